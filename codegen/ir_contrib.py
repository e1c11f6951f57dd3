"""The IR of `contrib.py` and of the agent's terminal handle: what the schema being generated
supports of them, decided in `codegen.build_contrib` (templates only print it).

Every class name here is the schema's own (variants are found by their tag, never by name), and
every hint is spelled as a generated module spells it (`types.`-qualified). A helper whose
prerequisites the schema lacks is None: it is not generated at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .ir import Method


@dataclass(frozen=True)
class ToolField:
    """One field of a tool call besides its id (`title`, `content`, ...): a view attribute, a
    tracker parameter, a field of the updates the tracker builds."""

    py: str
    """The attribute name (`raw_input`)."""
    hint: str
    """Its value's hint without `None`/`Unset` (`types.ToolKind`); for a list field, the item's."""
    is_list: bool
    """A list on the wire: a tuple in views, a `Sequence` parameter."""
    in_start: bool
    """The `tool_call` (start) variant has the field too (else a start leaves it None)."""
    start_required: bool
    """Required by the start variant (`title`): a required parameter of `ToolCallTracker.start`."""
    start_default: str | None
    """The default of `start`'s parameter as a Python literal (`'in_progress'` for `status`, as
    the SDK's); None: `None`."""


@dataclass(frozen=True)
class ChunkKind:
    """A message-chunk variant the accumulator records (`user_message_chunk`, ...)."""

    tag: str
    """The `sessionUpdate` tag."""
    cls: str
    """The variant's class."""
    attr: str
    """The snapshot attribute listing these chunks (`user_messages`), as the SDK names it."""
    role: Literal["user", "agent", "thought"]
    """The `role` of the messages these chunks make up."""
    message_id: Literal["absent", "optional", "required"]
    """Whether the variant has a `messageId` (`message_id`) field, and how."""


@dataclass(frozen=True)
class Latest:
    """An update whose value replaces a snapshot attribute (the plan, the commands, the mode...)."""

    tag: str
    """The `sessionUpdate` tag."""
    cls: str
    """The variant's class."""
    attr: str
    """The snapshot attribute (`plan_entries`)."""
    source: str | None
    """The variant's field holding the value (`entries`); None: the whole update is the value."""
    hint: str
    """The value's hint; for a list, the item's (the attribute is then a tuple)."""
    is_list: bool
    """The value is a list (kept as a tuple, empty before any such update)."""


@dataclass(frozen=True)
class InfoField:
    """A field of the `session_info_update` variant: merged into `SessionInfoState`."""

    py: str
    """The attribute name (`title`)."""
    hint: str
    """Its value's hint without `None`/`Unset`."""


@dataclass(frozen=True)
class SessionInfoPlan:
    """The `session_info_update` variant, whose fields are merged (absent keeps, null clears)."""

    cls: str
    """The variant's class."""
    fields: tuple[InfoField, ...]
    """Its fields besides `_meta`."""


@dataclass(frozen=True)
class AccumulatorPlan:
    """`SessionAccumulator` and its snapshot: which updates the schema has and where they go."""

    notification: str
    """The `session/update` params class (`SessionNotification`)."""
    update_union: str
    """The union of its `update` field (`SessionUpdate`)."""
    chunks: tuple[ChunkKind, ...]
    """The message-chunk variants, in the SDK's attribute order."""
    tool_call_start: str | None
    """The `tool_call` variant's class; None when the schema has none (updates alone create calls)."""
    tool_call_update: str | None
    """The `tool_call_update` variant's class; None: the snapshot tracks no tool calls."""
    tool_fields: tuple[ToolField, ...]
    """The fields of a tool-call view besides its id."""
    latest: tuple[Latest, ...]
    """The updates replacing one snapshot attribute each."""
    session_info: SessionInfoPlan | None
    """The session-info update, when the schema has it."""
    others: tuple[str, ...]
    """Classes of the known variants folded into no attribute (kept in `other_updates`)."""
    unknown_cls: str | None
    """The union's unknown-variant class (kept in `unknown_updates`); None for a union without one."""
    block_hint: str
    """The hint of a chunk's `content` (`types.ContentBlock`), for `Message.content`."""
    text_cls: str | None
    """The text content block class (`TextContent`), for `Message.text`; None: no such block."""


@dataclass(frozen=True)
class TrackerPlan:
    """`ToolCallTracker` (agent side): the start and progress variants and the tool-call object."""

    start: str
    """The `tool_call` variant's class (what `start` returns)."""
    progress: str
    """The `tool_call_update` variant's class (what `progress` returns)."""
    tool_call: str
    """The tool-call object a permission request carries (`ToolCallUpdate`, `tool_call_model`)."""
    fields: tuple[ToolField, ...]
    """The tracked fields, in the start parameters' order (`title` first: it is required)."""
    content_cls: str | None
    """The `content` tool-call content class wrapping a block (`append_stream_text`); None: omitted."""
    text_cls: str | None
    """The text content block class; None: `append_stream_text` and `description=` are omitted."""


@dataclass(frozen=True)
class BrokerPlan:
    """`PermissionBroker` and `default_permission_options`."""

    request: str
    """The `session/request_permission` params class."""
    response: str
    """Its result class."""
    option: str
    """The permission option class (`PermissionOption`)."""
    proxy_method: str
    """The proxy method sending the request (`session_request_permission`), for the docs."""


@dataclass(frozen=True)
class TerminalPlan:
    """The agent proxy's `create_terminal` and its `TerminalHandle`: the five terminal methods."""

    create: Method
    """`terminal/create` (its proxy method stays the raw call; `create_terminal` wraps it)."""
    output: tuple[str, str]
    """(proxy method, result class) of `terminal/output`."""
    wait_for_exit: tuple[str, str]
    """(proxy method, result class) of `terminal/wait_for_exit`."""
    kill: tuple[str, str]
    """(proxy method, result class) of `terminal/kill`."""
    release: tuple[str, str]
    """(proxy method, result class) of `terminal/release`."""
    output_request: str
    """The `terminal/output` params class (all four take `session_id` and `terminal_id`)."""
    wait_request: str
    """The `terminal/wait_for_exit` params class."""
    kill_request: str
    """The `terminal/kill` params class."""
    release_request: str
    """The `terminal/release` params class."""


@dataclass(frozen=True)
class ContribPlan:
    """What `contrib.py` holds for this schema, and the terminal handle; None parts are omitted."""

    accumulator: AccumulatorPlan | None
    """`SessionAccumulator`; None when the schema has no `session/update` with a tagged union."""
    tracker: TrackerPlan | None
    """`ToolCallTracker`; None without `tool_call` and `tool_call_update` variants and a tool-call object."""
    broker: BrokerPlan | None
    """`PermissionBroker`; None without the tracker or a `session/request_permission` taking a tool call."""
    default_options: str | None
    """The permission option class, when `default_permission_options` exists (the option kinds
    allow_once, allow_always and reject_once do); None: it does not."""
    terminal: TerminalPlan | None
    """The terminal handle (agent role only); None without the five terminal methods."""
    imports: tuple[str, ...]
    """The import lines of `contrib.py` (exactly what it uses)."""
    exports: tuple[str, ...]
    """`__all__` of `contrib.py`, sorted."""

    @property
    def has_view(self) -> bool:
        """`ToolCallView` exists: the tracker or the snapshot's tool calls use it."""
        return self.tracker is not None or bool(self.accumulator and self.accumulator.tool_call_update)

    @property
    def view_fields(self) -> tuple[ToolField, ...]:
        """The fields of `ToolCallView` besides `tool_call_id` (the tracker's and the accumulator's)."""
        if self.tracker is not None:
            return self.tracker.fields
        return self.accumulator.tool_fields if self.accumulator and self.accumulator.tool_call_update else ()
