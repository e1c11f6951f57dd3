"""The agent conformance checks: each protocol rule with its level, the page and section of the
ACP docs it comes from (quoted), the capability that gates it and the acp-tck requirements it
covers. (`conformance_checks` assembles them with the run options.)

A rule's own note, where the docs say it elsewhere or the kit reads it a certain way, follows
the quotation in parentheses starting "(JSON-RPC" or in square brackets."""

from __future__ import annotations

from typing import Final

from .conformance_report import Check, Level

UNSUPPORTED_VERSION: Final = 65535  # the highest uint16: a protocol version no agent speaks

STDIO = "transports.mdx § stdio"
_RPC = "overview.mdx § Communication Model, § Error Handling"
_JSONRPC = "The protocol follows the JSON-RPC 2.0 specification"
SESSION_CAPS = "agentCapabilities.sessionCapabilities."
_PROMPT_CAPS = "agentCapabilities.promptCapabilities."
CANCEL_RULE = (
    "After all ongoing operations have been successfully aborted and pending updates have "
    "been sent, the Agent MUST respond to the original session/prompt request with the "
    "cancelled stop reason. The Agent MAY send session/update notifications with content "
    "or tool call updates after receiving the session/cancel notification, but it MUST "
    "ensure that it does so before responding to the session/prompt request."
)


def rule(
    id: str,
    level: Level,
    title: str,
    doc: str,
    rule: str,
    capability: str | None = None,
    area: str = "",
) -> Check:
    return Check(id, title, level, doc, rule, capability, area)


TRANSPORT: Final[tuple[Check, ...]] = (
    rule(
        "stdio-framing",
        "MUST",
        "every line the agent writes is one UTF-8 JSON-RPC 2.0 message",
        "transports.mdx § Transports, § stdio",
        "JSON-RPC messages MUST be UTF-8 encoded. Messages are delimited by newlines (\\n), "
        "and MUST NOT contain embedded newlines. The agent MUST NOT write anything to its "
        "stdout that is not a valid ACP message.",
        area="ACP-TRANSPORT-001, ACP-TRANSPORT-002",
    ),
    rule(
        "schema-strict",
        "MUST",
        "every message decodes in strict mode (unknown fields and variants are warnings)",
        f"{STDIO}; extensibility.mdx § The _meta Field",
        "The agent MUST NOT write anything to its stdout that is not a valid ACP message. "
        "[Unknown root fields are warnings: Implementations MUST NOT add any custom fields at "
        "the root of a type that's part of the specification.]",
        area="ACP-SCHEMA-001, ACP-SCHEMA-002",
    ),
    rule(
        "jsonrpc-id",
        "MUST",
        "a response echoes the request id exactly, string and integer",
        _RPC,
        f"{_JSONRPC} (JSON-RPC 2.0 § 5: the id of a Response MUST be the same as the value of "
        "the id member in the Request Object).",
        area="ACP-JSONRPC-001",
    ),
    rule(
        "jsonrpc-response",
        "MUST",
        "each response carries exactly one of result and error; an error has an integer code "
        "and a string message",
        _RPC,
        "Successful responses include a result field. Errors include an error object with "
        "code and message.",
        area="ACP-JSONRPC-002",
    ),
    rule(
        "error-message",
        "SHOULD",
        "every error message is non-empty and one line",
        _RPC,
        "Errors include an error object with code and message (JSON-RPC 2.0 § 5.1: the "
        "message SHOULD be limited to a concise single sentence).",
        area="ACP-ERROR-001",
    ),
    rule(
        "notification-no-response",
        "MUST",
        "no notification the client sends is ever answered",
        _RPC,
        "Notifications never receive responses (success or error).",
        area="ACP-JSONRPC-003",
    ),
    rule(
        "unknown-method",
        "MUST",
        "an unknown method gets -32601",
        "overview.mdx § Communication Model",
        f"{_JSONRPC} (JSON-RPC 2.0 § 5.1: -32601 Method not found, the method does not exist "
        "/ is not available).",
        area="ACP-JSONRPC-004",
    ),
    rule(
        "ext-method-answered",
        "MUST",
        "an unknown `_`-prefixed request gets a response",
        "extensibility.mdx § Custom Requests",
        "Upon receiving a custom request, implementations MUST respond accordingly with the "
        "provided id:",
        area="ACP-EXT-001",
    ),
    rule(
        "unknown-ext-method",
        "SHOULD",
        "an unknown `_`-prefixed request gets -32601",
        "extensibility.mdx § Custom Requests",
        "If the receiving end doesn't recognize the custom method name, it should respond "
        'with the standard "Method not found" error.',
        area="ACP-JSONRPC-004",
    ),
    rule(
        "invalid-params",
        "MUST",
        "params that do not fit get an error (-32602), and the agent keeps serving",
        "overview.mdx § Communication Model",
        f"{_JSONRPC} (JSON-RPC 2.0 § 5: when a rpc call is made, the Server MUST reply with a "
        "Response; § 5.1: -32602 Invalid params).",
        area="ACP-JSONRPC-005",
    ),
    rule(
        "unknown-notification",
        "SHOULD",
        "unknown notifications are ignored (no answer), and the agent keeps serving",
        "extensibility.mdx § Custom Notifications",
        "Unlike with custom requests, implementations SHOULD ignore unrecognized notifications.",
        area="ACP-JSONRPC-003, ACP-JSONRPC-005",
    ),
)

INITIALIZE: Final[tuple[Check, ...]] = (
    rule(
        "initialize",
        "MUST",
        "initialize answers the chosen version and the agent's capabilities",
        "initialization.mdx § Initialization, § Version Negotiation",
        "The Agent MUST respond with the chosen protocol version and the capabilities it "
        "supports. If the Agent supports the requested version, it MUST respond with the same "
        "version.",
        area="ACP-INIT-001, ACP-INIT-002",
    ),
    rule(
        "initialize-version",
        "MUST",
        f"initialize asking for unsupported version {UNSUPPORTED_VERSION} gets the agent's latest",
        "initialization.mdx § Version Negotiation",
        "If the Agent supports the requested version, it MUST respond with the same version. "
        "Otherwise, the Agent MUST respond with the latest version it supports.",
        area="ACP-INIT-003",
    ),
    rule(
        "agent-info",
        "SHOULD",
        "initialize names the agent: agentInfo with name and version",
        "initialization.mdx § Implementation Information",
        "Both Clients and Agents SHOULD provide information about their implementation in the "
        "clientInfo and agentInfo fields respectively.",
        area="ACP-INIT-004",
    ),
    rule(
        "auth-methods-unique",
        "SHOULD",
        "the advertised auth method ids are unique",
        "authentication.mdx § Advertising Authentication",
        "Every method has an id, but the Client sends that ID to authenticate only for a method "
        "whose type defines that protocol-driven flow. [AuthMethod.id: Unique identifier]",
        area="ACP-AUTH-001",
    ),
    rule(
        "auth-no-terminal",
        "MUST",
        "no terminal auth method is advertised to a client without auth.terminal",
        "authentication.mdx § Authentication method types",
        "An Agent may advertise a terminal method only when this capability is true.",
        area="ACP-AUTH-002",
    ),
    rule(
        "authenticate",
        "MUST",
        "authenticate with the --auth-method id answers, and session/new then works",
        "authentication.mdx § Protocol-driven authentication",
        "When an Agent requires authentication and the selected method uses the "
        "protocol-driven flow, the Client calls authenticate with the advertised "
        "authentication method ID:",
        capability="--auth-method",
        area="ACP-AUTH-003",
    ),
    rule(
        "auth-not-required",
        "SHOULD",
        "an agent that advertises no auth methods does not refuse session/new with -32000",
        "authentication.mdx § Advertising Authentication",
        "Agents advertise authentication options in the authMethods field of the initialize "
        "response.",
        area="ACP-AUTH-005",
    ),
)

CLIENT_CAPABILITIES: Final[tuple[Check, ...]] = (
    rule(
        "no-fs-without-capability",
        "MUST",
        "a prompt turn calls no fs/* method the client did not advertise",
        "file-system.mdx § Checking Support",
        "If readTextFile or writeTextFile is false or not present, the Agent MUST NOT attempt "
        "to call the corresponding filesystem method.",
        area="ACP-CLIENTCAP-001",
    ),
    rule(
        "no-terminal-without-capability",
        "MUST",
        "no terminal/* call when the client did not advertise terminal",
        "terminals.mdx § Checking Support",
        "If terminal is false or not present, the Agent MUST NOT attempt to call any terminal "
        "methods.",
        area="ACP-CLIENTCAP-002",
    ),
    rule(
        "no-elicitation-without-capability",
        "MUST",
        "no elicitation/create in a mode the client did not advertise",
        "elicitation.mdx § Checking support",
        "Agents MUST NOT request a mode the Client has not advertised.",
        area="ACP-CLIENTCAP-003",
    ),
)

PROMPT: Final[tuple[Check, ...]] = (
    rule(
        "prompt-turn",
        "MUST",
        "a text prompt ends with a StopReason, after every conversation update of its turn",
        "prompt-turn.mdx § 4. Check for Completion; content.mdx § Text Content",
        "If there are no pending tool calls, the turn ends and the Agent MUST respond to the "
        "original session/prompt request with a StopReason: All Agents MUST support text "
        "content blocks when included in prompts.",
        area="ACP-PROMPT-001, ACP-PROMPT-002",
    ),
    rule(
        "prompt-image",
        "MUST",
        "a prompt with an image block beside text ends with a StopReason",
        "initialization.mdx § Prompt capabilities",
        "The prompt may include ContentBlock::Image",
        capability=_PROMPT_CAPS + "image",
        area="ACP-PROMPTCAP-001",
    ),
    rule(
        "prompt-audio",
        "MUST",
        "a prompt with an audio block beside text ends with a StopReason",
        "initialization.mdx § Prompt capabilities",
        "The prompt may include ContentBlock::Audio",
        capability=_PROMPT_CAPS + "audio",
        area="ACP-PROMPTCAP-002",
    ),
    rule(
        "prompt-resource",
        "MUST",
        "a prompt with an embedded resource beside text ends with a StopReason",
        "initialization.mdx § Prompt capabilities",
        "The prompt may include ContentBlock::Resource",
        capability=_PROMPT_CAPS + "embeddedContext",
        area="ACP-PROMPTCAP-003",
    ),
    rule(
        "prompt-resource-link",
        "SHOULD",
        "a prompt with a resource link beside text ends with a StopReason",
        "initialization.mdx § Prompt capabilities",
        "As a baseline, all Agents MUST support ContentBlock::Text and ContentBlock::ResourceLink "
        "in session/prompt requests. [SHOULD here: content.mdx requires only text]",
        area="ACP-PROMPT-003",
    ),
    rule(
        "prompt-meta",
        "SHOULD",
        "a prompt carrying _meta (traceparent) ends with a StopReason",
        "extensibility.mdx § The _meta Field",
        "All types in the protocol include a _meta field with type { [key: string]: unknown } "
        "that implementations can use to attach custom information.",
        area="ACP-META-001",
    ),
    rule(
        "cancel",
        "MUST",
        "session/cancel mid-turn ends it with stopReason cancelled, no conversation update after",
        "prompt-turn.mdx § Cancellation",
        CANCEL_RULE,
        area="ACP-CANCEL-001, ACP-CANCEL-002",
    ),
)
