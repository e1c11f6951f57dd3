"""The client conformance checks: each rule the protocol puts on a client, with its level and
the page and section of the ACP docs it comes from; and the options a client check takes.
(`client_conformance` is the public façade.)"""

from __future__ import annotations

import dataclasses
from typing import Final

from .conformance_report import Check

_STDIO = "transports.mdx § stdio"
_JSONRPC = "overview.mdx § Communication Model"
_REPLY = (
    "The protocol follows the JSON-RPC 2.0 specification (JSON-RPC 2.0 § 5: when a rpc call is "
    "made, the Server MUST reply with a Response)."
)

CLIENT_CHECKS: Final[tuple[Check, ...]] = (
    Check(
        "client-stdio-framing",
        "every line the client writes to the agent is one JSON-RPC 2.0 message",
        "MUST",
        _STDIO,
        "Messages are delimited by newlines (\\n), and MUST NOT contain embedded newlines. "
        "The client MUST NOT write anything to the agent's stdin that is not a valid ACP message.",
    ),
    Check(
        "client-schema-strict",
        "every message decodes in strict mode (unknown fields and variants are warnings)",
        "MUST",
        _STDIO,
        "The client MUST NOT write anything to the agent's stdin that is not a valid ACP message.",
    ),
    Check(
        "client-initialize-first",
        "the first message on a connection is initialize, with an integer protocolVersion",
        "MUST",
        "initialization.mdx § Initialization, § Version Negotiation",
        "Before a Session can be created, Clients MUST initialize the connection by calling the "
        "initialize method. The initialize request MUST include the latest protocol version the "
        "Client supports.",
    ),
    Check(
        "client-info",
        "initialize carries clientInfo with a name and a version",
        "SHOULD",
        "initialization.mdx § Implementation Information",
        "Both Clients and Agents SHOULD provide information about their implementation in the "
        "clientInfo and agentInfo fields respectively.",
    ),
    Check(
        "client-session-order",
        "session methods only after initialize is answered; prompts only to a session it has",
        "MUST",
        "prompt-turn.mdx § Prompt Turn; session-setup.mdx § Session Setup",
        "Before sending prompts, Clients MUST first complete the initialization phase and "
        "session setup.",
    ),
    Check(
        "client-session-cwd",
        "the cwd of session/new (and load, resume) is an absolute path",
        "MUST",
        "session-setup.mdx § Working Directory",
        "The cwd parameter MUST be an absolute path.",
    ),
    Check(
        "client-session-load",
        "no session/load, as the agent does not advertise loadSession",
        "MUST",
        "session-setup.mdx § Checking Support",
        "If loadSession is false or not present, the Agent does not support loading sessions and "
        "Clients MUST NOT attempt to call session/load.",
    ),
    Check(
        "client-session-gated",
        "no session/resume, /close, /list, additionalDirectories or HTTP/SSE MCP servers, as "
        "the agent advertises none",
        "MUST",
        "session-setup.mdx § Resuming, § Closing, § Additional Directories, § Transport Types; "
        "session-list.mdx § Checking Support",
        "If sessionCapabilities.resume (close, list) is not present, Clients MUST NOT attempt to "
        "call session/resume (close, list). Clients MUST only send additionalDirectories when "
        "the Agent advertises sessionCapabilities.additionalDirectories. Before using HTTP or "
        "SSE transports, Clients MUST verify the Agent's capabilities during initialization.",
    ),
    Check(
        "client-prompt-content",
        "prompts hold only text and resource links, as the agent advertises no other content",
        "MUST",
        "prompt-turn.mdx § 1. User Message",
        "Clients MUST restrict types of content according to the Prompt Capabilities "
        "established during initialization.",
    ),
    Check(
        "client-session-mode",
        "session/set_mode names one of the modes the agent listed",
        "MUST",
        "session-modes.mdx § From the Client",
        "The ID of the mode to switch to. Must be one of the modes listed in availableModes.",
    ),
    Check(
        "client-notifications",
        "notifications (every kind of session/update, a `_` one) never get a response",
        "MUST",
        _JSONRPC,
        "The protocol follows the JSON-RPC 2.0 specification (JSON-RPC 2.0 § 4.1: The Server "
        "MUST NOT reply to a Notification).",
    ),
    Check(
        "client-unknown-update",
        "an unknown session/update variant is tolerated: the client keeps serving",
        "SHOULD",
        "extensibility.mdx § Custom Notifications",
        "Unlike with custom requests, implementations SHOULD ignore unrecognized notifications.",
    ),
    Check(
        "client-permission-answered",
        "session/request_permission gets an answer",
        "MUST",
        "tool-calls.mdx § Requesting Permission; " + _JSONRPC,
        "The Client responds with the user's decision. " + _REPLY,
    ),
    Check(
        "client-permission-option",
        "a selected permission outcome names one of the options offered",
        "MUST",
        "tool-calls.mdx § Permission Options",
        "options: Available permission options for the user to choose from (the outcome's "
        "optionId: the ID of the option the user selected).",
    ),
    Check(
        "client-cancel-permission",
        "after session/cancel, pending permission requests are answered cancelled",
        "MUST",
        "prompt-turn.mdx § Cancellation; tool-calls.mdx § Requesting Permission",
        "The Client MUST respond to all pending session/request_permission requests with the "
        "cancelled outcome.",
    ),
    Check(
        "client-fs-read",
        "fs/read_text_file inside the cwd answers the file's content",
        "MUST",
        "file-system.mdx § Reading Files",
        "The fs/read_text_file method allows Agents to read text file contents from the "
        "Client's filesystem.",
        capability="fs.readTextFile",
    ),
    Check(
        "client-fs-write",
        "fs/write_text_file inside the cwd creates the file with the content",
        "MUST",
        "file-system.mdx § Writing Files",
        "The fs/write_text_file method allows Agents to write or update text files in the "
        "Client's filesystem. The Client MUST create the file if it doesn't exist.",
        capability="fs.writeTextFile",
    ),
    Check(
        "client-terminal",
        "terminal/create, wait_for_exit, output and release run a command and report it",
        "MUST",
        "terminals.mdx § Executing Commands, § Waiting for Exit, § Getting Output, § Releasing",
        "The Client returns a Terminal ID immediately without waiting for completion. The "
        "terminal/wait_for_exit method returns once the command completes.",
        capability="terminal",
    ),
    Check(
        "client-unadvertised",
        "a request for a capability it did not advertise gets an answer (an error will do)",
        "MUST",
        _JSONRPC,
        _REPLY,
    ),
    Check(
        "client-unknown-ext-method",
        "an unknown `_`-prefixed request gets -32601",
        "SHOULD",
        "extensibility.mdx § Custom Requests",
        "If the receiving end doesn't recognize the custom method name, it should respond with "
        'the standard "Method not found" error.',
    ),
)
_RFD = "rfds/streamable-http-websocket-transport.mdx"
REMOTE_CHECKS: Final[tuple[Check, ...]] = (
    Check(
        "client-remote-profiles",
        "the client works over both WebSocket and Streamable HTTP (check-client --listen)",
        "MUST",
        _RFD + " § Elevator pitch",
        "Clients that support remote ACP over HTTP MUST support both Streamable HTTP and "
        "WebSocket.",
    ),
    Check(
        "client-remote-cookies",
        "a cookie the server set is returned on every later request (check-client --listen)",
        "MUST",
        _RFD + " § 5. Requires cookie support on HTTP transports",
        "Clients MUST accept, store, and return cookies set by the server on all HTTP-based "
        "transports (Streamable HTTP and WebSocket). Cookies MUST be sent on subsequent requests "
        "to the server for the duration of the connection.",
    ),
    Check(
        "client-remote-session-header",
        "every session-scoped POST carries Acp-Connection-Id and its Acp-Session-Id "
        "(check-client --listen)",
        "MUST",
        _RFD + " § Streamable HTTP Message Flow",
        "POST requests for session-scoped operations MUST include both Acp-Connection-Id and "
        "Acp-Session-Id headers.",
    ),
)
"""The RFD's client rules, checked only when the client is checked remotely (`--listen`)."""
CLIENT_CHECKS_BY_ID: Final = {check.id: check for check in (*CLIENT_CHECKS, *REMOTE_CHECKS)}


@dataclasses.dataclass(frozen=True)
class ClientOptions:
    timeout: float = 5.0
    """Seconds to wait for the client's answer to any one request of the probe agent."""
    startup_timeout: float = 30.0
    """Seconds the client has to start the probe agent and send its first line."""
    idle: float = 5.0
    """Seconds without a line either way (and no request of ours pending) after which a
    client that does not exit by itself is stopped."""
    max_time: float = 120.0
    """Seconds a whole run may take at most."""
    chunk_delay: float = 0.05
    """Seconds between the message chunks of the turns after the first (room to cancel)."""
