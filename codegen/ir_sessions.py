"""The IR of `sessions.py`, the agent's session layer: what the schema being generated has of
the session lifecycle, decided in `codegen.build_sessions` (the template only prints it).

Every hint is spelled as a generated module spells it (`types.`-qualified). A schema without the
prerequisites (a `session/new` and `session/prompt` with object params and results) gets no
`SessionsPlan`, and no `sessions.py`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Served:
    """One method the layer answers."""

    wire: str
    """The method's wire name (`session/load`)."""
    handler: str
    """The `Agent` handler it overrides (`session_load`)."""
    core: str
    """The `SessionCore` coroutine that does it (`load`)."""
    params: str
    """The params hint (`types.LoadSessionRequest`)."""
    result: str | None
    """The result class (`types.LoadSessionResponse`); None for a notification."""
    result_fields: tuple[str, ...]
    """The result's wire fields (`modes`, `configOptions`, ...)."""


@dataclass(frozen=True)
class Unserved:
    """A baseline (abstract) handler the layer does not serve: answered -32601 by default."""

    handler: str
    """The `Agent` handler (`authenticate`)."""
    const: str
    """Its `methods` constant (`AUTHENTICATE`)."""
    params: str
    """The params hint (`types.AuthenticateRequest`)."""
    result: str | None
    """The result hint; None for a notification."""


@dataclass(frozen=True)
class SessionsPlan:
    """Everything `sessions.py.jinja` prints for one schema."""

    served: tuple[Served, ...]
    """The methods the layer answers, in `build_sessions.SERVED` order."""
    unserved: tuple[Unserved, ...]
    """The other baseline handlers (given a -32601 default so `SessionAgent` is concrete)."""
    prompt_block: str
    """The hint of one prompt content block (`types.ContentBlock`)."""
    update: str
    """The hint of a `session/update`'s `update` (`types.SessionUpdate`)."""
    update_tags: tuple[str, ...]
    """The `sessionUpdate` tags of that union."""
    mode: str | None
    """The hint of a session mode (`types.SessionMode`), when the schema has modes."""
    config_option: str | None
    """The hint of a config option (`types.SessionConfigOption`), when the schema has them."""
    initialize: Served | None
    """`initialize`, when its result has `protocolVersion` and capabilities."""
    capabilities: str
    """The hint of the capabilities (`types.AgentCapabilities`)."""
    implementation: str | None
    """The hint of the implementation info (`types.Implementation`), when the result has it."""
    capabilities_field: str
    """The initialize result's capabilities field (v1 `agentCapabilities`, v2 `capabilities`)."""
    info_field: str | None
    """Its implementation field (v1 `agentInfo`, v2 `info`), when it has one."""
    info_required: bool
    """Whether that field is required (v2): then `agent_info` must be set."""
    session_capabilities_field: str
    """The capabilities' session field (v1 `sessionCapabilities`, v2 `session`), or empty."""
    session_capabilities: tuple[str, ...]
    """The keys of that field that say a session method is served (`list`, `delete`, ...)."""
    info_fields: tuple[str, ...]
    """The wire fields of a `session/list` entry."""
    say: str | None
    """The helpers builder of an agent text chunk (`update_agent_message_text`), if generated."""
    think: str | None
    """The helpers builder of an agent thought text chunk, if generated."""
