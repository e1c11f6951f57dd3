"""The session checks (creating, loading, resuming, listing, closing, deleting; modes and config
options), the informational probes and exit-on-EOF: rules as in `conformance_rules`."""

from __future__ import annotations

from typing import Final

from .conformance_report import Check
from .conformance_rules import CANCEL_RULE, SESSION_CAPS, STDIO, rule

_LOAD = "agentCapabilities.loadSession"

SESSIONS: Final[tuple[Check, ...]] = (
    rule(
        "session-new",
        "MUST",
        "session/new answers a unique session id",
        "session-setup.mdx § Creating a Session",
        "The Agent MUST respond with a unique Session ID that identifies this conversation:",
        area="ACP-SESSION-001, ACP-SESSION-002",
    ),
    rule(
        "session-additional-directories",
        "MUST",
        "session/new with an absolute additionalDirectories entry is accepted",
        "session-setup.mdx § Additional Workspace Roots",
        "Agents that advertise sessionCapabilities.additionalDirectories allow Clients to "
        "include additionalDirectories on supported session lifecycle requests to expand the "
        "session's effective filesystem root set.",
        capability=SESSION_CAPS + "additionalDirectories",
        area="ACP-ADDDIRS-001",
    ),
    rule(
        "session-load",
        "MUST",
        "session/load of a session with a turn answers after its replayed conversation entries",
        "session-setup.mdx § Loading a Session",
        "The Agent MUST replay the entire conversation to the Client in the form of "
        "session/update notifications (like session/prompt). When all the conversation "
        "entries have been streamed to the Client, the Agent MUST respond to the original "
        "session/load request. [State updates (commands, mode, config options, session info, "
        "usage) are not conversation entries: they may follow the response.]",
        capability=_LOAD,
        area="ACP-LOAD-001, ACP-LOAD-002",
    ),
    rule(
        "session-load-fresh",
        "MUST",
        "session/load of a fresh session (no turn yet) succeeds",
        "session-setup.mdx § Loading a Session",
        "When all the conversation entries have been streamed to the Client, the Agent MUST "
        "respond to the original session/load request.",
        capability=_LOAD,
        area="ACP-LOAD-001, ACP-LOAD-003",
    ),
    rule(
        "session-resume",
        "MUST",
        "session/resume answers without replaying the history first",
        "session-setup.mdx § Resuming a Session",
        "Unlike session/load, the Agent MUST NOT replay the conversation history via "
        "session/update notifications before responding.",
        capability=SESSION_CAPS + "resume",
        area="ACP-RESUME-001, ACP-RESUME-002",
    ),
    rule(
        "session-list",
        "MUST",
        "session/list answers a sessions array",
        "session-list.mdx § Listing Sessions",
        "The Agent MUST respond with a list of sessions and optional pagination metadata:",
        capability=SESSION_CAPS + "list",
        area="ACP-LIST-001",
    ),
    rule(
        "session-list-cwd",
        "MUST",
        "session/list filtered by a cwd no session uses answers []",
        "session-list.mdx § Listing Sessions",
        "When no sessions match the criteria, the Agent MUST return an empty sessions array.",
        capability=SESSION_CAPS + "list",
        area="ACP-LIST-002",
    ),
    rule(
        "session-close",
        "MUST",
        "session/close of an idle session succeeds",
        "session-setup.mdx § Closing a Session",
        "To close an active session, Clients MUST call the session/close method with the "
        "session ID:",
        capability=SESSION_CAPS + "close",
        area="ACP-CLOSE-001",
    ),
    rule(
        "session-close-prompt",
        "MUST",
        "session/close with a prompt in flight ends that turn with stopReason cancelled",
        "session-setup.mdx § Closing a Session; prompt-turn.mdx § Cancellation",
        "The Agent MUST cancel any ongoing work for that session as if session/cancel had been "
        "called, then free the resources associated with the session. " + CANCEL_RULE,
        capability=SESSION_CAPS + "close",
        area="ACP-CLOSE-002",
    ),
    rule(
        "session-delete",
        "MUST",
        "session/delete of a session made earlier succeeds",
        "session-delete.mdx § Deleting a Session, § Semantics",
        "Deleted sessions no longer appear in future session/list results.",
        capability=SESSION_CAPS + "delete",
        area="ACP-DELETE-001",
    ),
    rule(
        "session-delete-unknown",
        "SHOULD",
        "session/delete of an unknown session succeeds silently",
        "session-delete.mdx § Semantics",
        "Deleting an already-deleted session, or a session that never existed, SHOULD succeed "
        "silently.",
        capability=SESSION_CAPS + "delete",
        area="ACP-DELETE-002",
    ),
    rule(
        "session-modes",
        "MUST",
        "advertised modes: currentModeId is one of availableModes, set_mode to another works",
        "session-modes.mdx § SessionModeState, § From the Client",
        "The ID of the mode that is currently active. The ID of the mode to switch to. Must "
        "be one of the modes listed in availableModes.",
        capability="modes (in the session/new answer)",
        area="ACP-MODES-001, ACP-MODES-002",
    ),
    rule(
        "session-modes-unknown",
        "SHOULD",
        "session/set_mode to a mode that was not advertised gets an error",
        "session-modes.mdx § From the Client",
        "The ID of the mode to switch to. Must be one of the modes listed in availableModes.",
        capability="modes (in the session/new answer)",
    ),
    rule(
        "config-options",
        "MUST",
        "advertised config options: each currentValue is one of its options",
        "session-config-options.mdx § ConfigOption, § Default Values and Graceful Degradation",
        "Agents MUST always provide a default value for every configuration option.",
        capability="configOptions (in the session/new answer)",
        area="ACP-CONFIG-001",
    ),
    rule(
        "config-set",
        "MUST",
        "session/set_config_option answers the complete list, with the new value applied",
        "session-config-options.mdx § From the Client",
        "The Agent MUST respond with the complete list of all configuration options and their "
        "current values:",
        capability="configOptions (in the session/new answer)",
        area="ACP-CONFIG-002",
    ),
    rule(
        "config-no-boolean",
        "MUST",
        "no boolean config option for a client that did not advertise support",
        "session-config-options.mdx § Boolean Config Options",
        'Agents MUST NOT include type: "boolean" options in configOptions payloads unless the '
        "Client advertised support.",
        area="ACP-CONFIG-003",
    ),
)

INFORMATIONAL: Final[tuple[Check, ...]] = (
    rule(
        "info-load-after-restart",
        "INFO",
        "a session survives a restart of the agent: a fresh agent loads it and replays the "
        "live turn (recorded)",
        "session-setup.mdx § Loading Sessions",
        "Agents that support the loadSession capability allow Clients to resume previous "
        "conversations. This feature enables persistence across restarts and sharing sessions "
        "between different Client instances. [Enables, does not require: recorded, never "
        "failed]",
        capability=_LOAD,
        area="ACP-LOAD-001",
    ),
    rule(
        "info-malformed-line",
        "INFO",
        "the reply to a line that is not JSON (recorded)",
        STDIO,
        "The client MUST NOT write anything to the agent's stdin that is not a valid ACP "
        "message. [Behaviour on such a line is unspecified: recorded, never failed]",
        area="ACP-INFO-PARSE-001",
    ),
    rule(
        "info-not-envelope",
        "INFO",
        "the reply to a JSON object that is not a JSON-RPC message (recorded)",
        STDIO,
        "Messages are individual JSON-RPC requests, notifications, or responses. [Recorded, "
        "never failed]",
        area="ACP-INFO-INVALIDREQ-001",
    ),
    rule(
        "info-unknown-session",
        "INFO",
        "the reply to a prompt for an unknown session id (recorded)",
        "prompt-turn.mdx § 1. User Message",
        "Before sending prompts, Clients MUST first complete the initialization phase and "
        "session setup. [v1 names no error code: recorded, never failed]",
        area="ACP-INFO-UNKNOWNSESSION-001",
    ),
    rule(
        "info-stderr",
        "INFO",
        "how much the agent writes to stderr (recorded)",
        STDIO,
        "The agent MAY write UTF-8 strings to its standard error (stderr) for logging purposes.",
        area="ACP-STDERR-001",
    ),
    rule(
        "exit-on-eof",
        "INFO",
        "the agent exits by itself once its stdin is closed, also with a live session",
        STDIO,
        "Client->>Agent Process: Close stdin, terminate subprocess (the sequence diagram: the "
        "client ends the agent; exiting on EOF is good manners, not a requirement).",
        area="ACP-SHUTDOWN-001",
    ),
)
