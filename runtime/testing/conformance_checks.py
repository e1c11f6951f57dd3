"""The conformance checks: each protocol rule with its level and the page and section of the
ACP docs it comes from; and the options a run takes. (`conformance` is the public façade.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

from .conformance_report import Check, Status
from .runners import Answer, Line

UNSUPPORTED_VERSION: Final = 65535  # the highest uint16: a protocol version no agent speaks

Outcome = tuple[Status, str, "Line | None", list[str]]
"""What a probe settles a check with: status, detail, the offending line, warnings."""


_STDIO = "transports.mdx § stdio"
CHECKS: Final[tuple[Check, ...]] = (
    Check(
        "stdio-framing",
        "every line the agent writes is one JSON-RPC 2.0 message",
        "MUST",
        _STDIO,
        "Messages are delimited by newlines (\\n), and MUST NOT contain embedded newlines. "
        "The agent MUST NOT write anything to its stdout that is not a valid ACP message.",
    ),
    Check(
        "schema-strict",
        "every message decodes in strict mode (unknown fields and variants are warnings)",
        "MUST",
        _STDIO,
        "The agent MUST NOT write anything to its stdout that is not a valid ACP message.",
    ),
    Check(
        "initialize",
        "initialize answers the chosen version and the agent's capabilities",
        "MUST",
        "initialization.mdx § Initialization",
        "The Agent MUST respond with the chosen protocol version and the capabilities it supports.",
    ),
    Check(
        "initialize-version",
        f"initialize asking for unsupported version {UNSUPPORTED_VERSION} gets the agent's latest",
        "MUST",
        "initialization.mdx § Version Negotiation",
        "If the Agent supports the requested version, it MUST respond with the same version. "
        "Otherwise, the Agent MUST respond with the latest version it supports.",
    ),
    Check(
        "session-new",
        "session/new answers a unique session id",
        "MUST",
        "session-setup.mdx § Creating a Session",
        "The Agent MUST respond with a unique Session ID that identifies this conversation.",
    ),
    Check(
        "session-modes",
        "advertised modes: currentModeId is one of availableModes, set_mode to another works",
        "MUST",
        "session-modes.mdx § SessionModeState, § From the Client",
        "The ID of the mode that is currently active. The ID of the mode to switch to. Must "
        "be one of the modes listed in availableModes.",
    ),
    Check(
        "session-modes-unknown",
        "session/set_mode to a mode that was not advertised gets an error",
        "SHOULD",
        "session-modes.mdx § From the Client",
        "The ID of the mode to switch to. Must be one of the modes listed in availableModes.",
    ),
    Check(
        "session-load",
        "session/load of a known session answers after its replay",
        "MUST",
        "session-setup.mdx § Loading a Session",
        "When all the conversation entries have been streamed to the Client, the Agent MUST "
        "respond to the original session/load request.",
    ),
    Check(
        "prompt-turn",
        "every session/update of a turn arrives before the session/prompt response",
        "MUST",
        "prompt-turn.mdx § 4. Check for Completion",
        "If there are no pending tool calls, the turn ends and the Agent MUST respond to the "
        "original session/prompt request with a StopReason.",
    ),
    Check(
        "cancel",
        "session/cancel ends the turn with stopReason cancelled, and no update follows",
        "MUST",
        "prompt-turn.mdx § Cancellation",
        "After all ongoing operations have been successfully aborted and pending updates have "
        "been sent, the Agent MUST respond to the original session/prompt request with the "
        "cancelled stop reason. The Agent MAY send session/update notifications with content "
        "or tool call updates after receiving the session/cancel notification, but it MUST "
        "ensure that it does so before responding to the session/prompt request.",
    ),
    Check(
        "unknown-method",
        "an unknown method gets -32601",
        "MUST",
        "overview.mdx § Communication Model",
        "The protocol follows the JSON-RPC 2.0 specification (JSON-RPC 2.0 § 5.1: -32601 "
        "Method not found, the method does not exist / is not available).",
    ),
    Check(
        "unknown-ext-method",
        "an unknown `_`-prefixed request gets -32601",
        "SHOULD",
        "extensibility.mdx § Custom Requests",
        "If the receiving end doesn't recognize the custom method name, it should respond "
        'with the standard "Method not found" error.',
    ),
    Check(
        "invalid-params",
        "params that do not fit get an error (-32602), and the agent keeps serving",
        "MUST",
        "overview.mdx § Communication Model",
        "The protocol follows the JSON-RPC 2.0 specification (JSON-RPC 2.0 § 5: when a rpc "
        "call is made, the Server MUST reply with a Response; § 5.1: -32602 Invalid params).",
    ),
    Check(
        "unknown-notification",
        "unknown notifications are ignored (no answer), and the agent keeps serving",
        "SHOULD",
        "extensibility.mdx § Custom Notifications",
        "Unlike with custom requests, implementations SHOULD ignore unrecognized notifications.",
    ),
    Check(
        "exit-on-eof",
        "the agent exits by itself once its stdin is closed (information only)",
        "INFO",
        _STDIO,
        "Client->>Agent Process: Close stdin, terminate subprocess (the sequence diagram: the "
        "client ends the agent; exiting on EOF is good manners, not a requirement).",
    ),
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
    """Seconds a fresh agent may take to start and answer `initialize` (apart from `timeout`:
    a slow start on a loaded machine changes no verdict)."""
    auth_method: str | None = None
    """An advertised auth method id to `authenticate` with before any session is made."""
    session_cwd: str | None = None
    """The `cwd` of the sessions the checks make (default: a fresh temporary directory)."""
    prompt: str = "Hello"
    """The text of the prompt the turn checks send."""
    cancel_prompt: str | None = None
    """The prompt the cancel check sends, then cancels (default: `prompt`): one that runs long."""
    script: Mapping[str, Answer] | None = None
    """How the client answers the agent's requests (default: `DEFAULT_SCRIPT`)."""
    settle: float = 0.3
    """Seconds to watch for late messages after a response (updates after the turn ended)."""
    eof_timeout: float = 2.0
    """Seconds the exit-on-EOF check waits for the agent to end after EOF."""
    concurrency: int = 4
    """How many agents run at once (each check drives its own)."""
    select: Callable[[str], bool] | None = None
    """Which checks to run, by id (`compile_selection("initialize")`); default: all."""


def script_of(options: Options | None) -> Mapping[str, Answer]:
    return DEFAULT_SCRIPT if options is None or options.script is None else options.script
