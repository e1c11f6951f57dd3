"""The session layer's running turns: which prompt turn runs on which session in this process,
and the store's claim that keeps two turns off one session across processes.

`Turns` is what `SessionCore.prompt` runs a turn through: `claimed(session)` takes the store's
claim (or refuses a second prompt with -32600, not queued), `run` runs the turn's task so that
`interrupt` (for `session/cancel`, `close`, `delete`) can cancel it, and the claim is renewed
while the turn runs and released after it. The registry is per process, keyed by store and
session, so every connection of the process sees every turn running in it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

from .dispatch import RequestError
from .session_live import LiveSession, store_failed
from .session_store import DEFAULT_CLAIM_TTL, SessionStore, StoreError, holder_id

__all__ = ["Turns"]

log = logging.getLogger(__name__)

Key = tuple[int, str]


def busy(session_id: str) -> RequestError:
    return RequestError.invalid_request(
        f"session {session_id} already has a prompt turn running (here or in another agent "
        "process): wait for its answer, or send session/cancel, then prompt again"
    )


class Turns:
    """The prompt turns running in this process on one store, seen by one connection's owner."""

    # (id(store), session id) -> the running turn's session: cancel/close/delete reach it
    running: Final[dict[Key, LiveSession]] = {}
    tasks: Final[dict[Key, asyncio.Task[Any]]] = {}
    # claims a finished turn could not release (the store was down): released before the next
    # claim, so this process's own dead turn never keeps its session busy once the store is back
    unreleased: Final[dict[Key, str]] = {}

    def __init__(self, store: SessionStore, owner: Callable[[], str]) -> None:
        self.store, self.owner = store, owner

    def live(self, session_id: str) -> LiveSession | None:
        """The owner's session as its running turn here sees it, if one runs."""
        live = self.running.get((id(self.store), session_id))
        return live if live is not None and live.owner == self.owner() else None

    @asynccontextmanager
    async def claimed(self, session: LiveSession) -> AsyncGenerator[None]:
        """Hold the session's claim (renewed) for the block; -32600 when a turn already runs
        on it (here or in another process), -32603 when the store fails."""
        key, holder = (id(self.store), session.id), holder_id()
        stale = None if key in self.running else self.unreleased.pop(key, None)
        try:
            if stale is not None:
                await self.store.release(session.owner, session.id, stale)
            claimed = key not in self.running and await self.store.claim(
                session.owner, session.id, holder
            )
        except StoreError as exc:
            if stale is not None:  # still to release, next time
                self.unreleased.setdefault(key, stale)
            raise store_failed(exc) from exc
        if not claimed:
            raise busy(session.id)
        self.running[key] = session
        renew = asyncio.ensure_future(self._renew(session, holder))
        try:
            yield
        finally:
            session.cancelled = True  # a straggler of this turn sends nothing more
            renew.cancel()
            self.running.pop(key, None)
            self.tasks.pop(key, None)
            try:
                await self.store.release(session.owner, session.id, holder)
            except StoreError as exc:  # released before the next claim here; else it expires
                self.unreleased[key] = holder
                log.warning("session %s: claim not released: %s", session.id, exc)

    async def run(self, session: LiveSession, turn: Awaitable[str | None]) -> str | None:
        """Run `turn` (within `claimed`) as a task `interrupt` can cancel: its stop reason, or
        `cancelled` when it was interrupted."""
        task = asyncio.ensure_future(turn)
        self.tasks[(id(self.store), session.id)] = task
        try:
            stop = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not session.cancelled:  # our caller was cancelled, not the turn: pass it on
                task.cancel()
                raise
            await asyncio.gather(task, return_exceptions=True)
            stop = "cancelled"
        return "cancelled" if session.cancelled else stop

    async def interrupt(self, session_id: str) -> None:
        """Cancel the session's running turn in this process (if it is the owner's): its prompt
        answers `cancelled`, and nothing more is sent for it."""
        key = (id(self.store), session_id)
        live, task = self.running.get(key), self.tasks.get(key)
        if live is None or live.owner != self.owner():
            return
        live.cancelled = True
        if task is not None:
            task.cancel()

    async def _renew(self, session: LiveSession, holder: str) -> None:
        while True:
            await asyncio.sleep(DEFAULT_CLAIM_TTL / 3)
            try:
                await self.store.claim(session.owner, session.id, holder)
            except StoreError as exc:
                log.warning("session %s: claim not renewed: %s", session.id, exc)
