"""Who is on the other end of a connection: the `Principal`, owner of the sessions it makes.

Every session an agent keeps belongs to one owner, the `Principal.id` of the connection that
made it; the session layer scopes every store call by it, so one principal never lists, loads,
resumes, deletes or prompts another's sessions.

- Over stdio the peer is the local user who started the agent: `local_principal()`.
- Over the remote transport the connection's principal is what `asgi_app(authenticate=...)`
  returned for its first request; without an authentication hook (loopback clients only) it
  is the local user too.

The transport sets `agent.principal` before the agent serves its first message; an agent
reads it, never sets it.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = ["LOCAL_KIND", "LOCAL_PRINCIPAL", "Principal", "local_principal"]

LOCAL_KIND: Final = "local"


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. `id` is the owner key: stable across connections and hosts
    for the same user (a store keeps it), and distinct for distinct users."""

    id: str
    """The owner key every session store call is scoped by, e.g. `token:alice`."""
    kind: str = "token"
    """How it was established: `local` (stdio, unauthenticated loopback) or the hook's word."""
    claims: Mapping[str, str] = field(default_factory=lambda: {})
    """What the authentication hook chose to keep about the caller (never a secret)."""

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError(f"Principal.id must be a non-empty string, got {self.id!r}")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER: the uid still names us
        return f"uid{os.getuid()}" if hasattr(os, "getuid") else "user"


def local_principal() -> Principal:
    """The local user (`local:<login name>`): the owner over stdio and unauthenticated loopback."""
    return Principal(id=f"{LOCAL_KIND}:{_user()}", kind=LOCAL_KIND)


LOCAL_PRINCIPAL: Final = local_principal()
"""The local user, computed once: what `Agent.principal` is until a transport sets it."""
