"""The agent conformance checks, in report order, and the options a run takes; the rules
themselves are in `conformance_rules` and `conformance_rules_session`. (`conformance` is the
public façade.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

from .conformance_report import Check, Status
from .conformance_rules import (
    CLIENT_CAPABILITIES,
    INITIALIZE,
    PROMPT,
    TRANSPORT,
    UNSUPPORTED_VERSION,
)
from .conformance_rules_session import INFORMATIONAL, SESSIONS
from .runners import Answer, Line

__all__ = [
    "CHECKS",
    "CHECKS_BY_ID",
    "DEFAULT_SCRIPT",
    "UNSUPPORTED_VERSION",
    "Options",
    "Outcome",
    "script_of",
]

Outcome = tuple[Status, str, "Line | None", list[str]]
"""What a probe settles a check with: status, detail, the offending line, warnings."""

CHECKS: Final[tuple[Check, ...]] = (
    TRANSPORT + INITIALIZE + SESSIONS + PROMPT + CLIENT_CAPABILITIES + INFORMATIONAL
)
CHECKS_BY_ID: Final = {check.id: check for check in CHECKS}


def _reject_option(params: Any) -> dict[str, Any]:
    """The default answer to session/request_permission: a reject option if there is one."""
    options: list[Any] = getattr(params, "options", None) or []
    for option in options:
        if getattr(option, "kind", None) in ("reject_once", "reject_always"):
            option_id: Any = getattr(option, "option_id", None)
            return {"outcome": {"outcome": "selected", "optionId": option_id}}
    return {"outcome": {"outcome": "cancelled"}}


DEFAULT_SCRIPT: Final[Mapping[str, Answer]] = {"session/request_permission": _reject_option}


@dataclasses.dataclass(frozen=True)
class Options:
    timeout: float = 5.0
    """Seconds to wait for any one answer, once the agent has answered `initialize`."""
    startup_timeout: float = 30.0
    """Seconds a fresh agent may take to start and answer `initialize`, and to answer any
    session/new, load or resume (apart from `timeout`: a slow start on a loaded machine
    changes no verdict)."""
    auth_method: str | None = None
    """An advertised auth method id to `authenticate` with before any session is made."""
    session_cwd: str | None = None
    """The `cwd` of the sessions the checks make (default: a fresh temporary directory)."""
    prompt: str = "Hello"
    """The text of the prompt the turn checks send."""
    cancel_prompt: str | None = None
    """A prompt whose turn keeps running, which the cancel and close-in-flight checks send and
    cancel. Without it they send `prompt`; a turn that ended before its cancel arrived is then
    `not exercised`."""
    script: Mapping[str, Answer] | None = None
    """How the client answers the agent's requests (default: `DEFAULT_SCRIPT`)."""
    settle: float = 0.3
    """Seconds to watch for late messages after a response (updates after the turn ended)."""
    replay_watch: float = 2.0
    """Seconds of silence that end the watch for replayed entries after a session/load answer
    (each message restarts it): a replay entry after the answer fails however late."""
    eof_timeout: float = 4.0
    """Seconds the exit-on-EOF check waits for the agent to end after EOF."""
    concurrency: int = 6
    """How many agents run at once (each check drives its own)."""
    select: Callable[[str], bool] | None = None
    """Which checks to run, by id (`compile_selection("initialize")`); default: all."""


def script_of(options: Options | None) -> Mapping[str, Answer]:
    return DEFAULT_SCRIPT if options is None or options.script is None else options.script
