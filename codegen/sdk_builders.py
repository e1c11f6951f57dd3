"""The official Python SDK's builders (`acp.helpers`, 0.12.1), as data: each one's name, the
union and tag of the variant it builds, its parameters (which field each sets), and the order
of the SDK's module. codegen/build_helpers.py generates each where the schema fits it.

The unions are named here only as the roles they play (`SessionUpdate` is found as the
`update` of the `session/update` params, see build_helpers); these names key that lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

UPDATE, CONTENT, TOOL = "SessionUpdate", "ContentBlock", "ToolCallContent"


@dataclass(frozen=True)
class P:
    """One SDK parameter: `field` is the field it sets (default: its own name)."""

    name: str
    field: str | None = None
    keyword_only: bool = False
    optional: bool = False  # default None, which leaves the field out
    iterable: bool = False  # any iterable, stored as a list
    default: str | None = None  # a fixed string default (`priority="medium"`)

    @property
    def target(self) -> str:
        return self.field or self.name


def kw(name: str, iterable: bool = False) -> P:
    """A keyword-only parameter defaulting to None (which leaves its field out)."""
    return P(name, keyword_only=True, optional=True, iterable=iterable)


_TOOL_FIELDS = (kw("kind"), kw("status"), kw("content", True), kw("locations", True), kw("raw_input"), kw("raw_output"))

# (name, union, tag, parameters): the SDK builders that set fields from their parameters only.
PLAIN: tuple[tuple[str, str, str, tuple[P, ...]], ...] = (
    ("text_block", CONTENT, "text", (P("text"),)),
    ("image_block", CONTENT, "image", (P("data"), P("mime_type"), kw("uri"))),
    ("audio_block", CONTENT, "audio", (P("data"), P("mime_type"))),
    (
        "resource_link_block",
        CONTENT,
        "resource_link",
        (P("name"), P("uri"), kw("mime_type"), kw("size"), kw("description"), kw("title")),
    ),
    ("resource_block", CONTENT, "resource", (P("resource"),)),
    ("tool_content", TOOL, "content", (P("block", "content"),)),
    ("tool_diff_content", TOOL, "diff", (P("path"), P("new_text"), P("old_text", optional=True))),
    ("tool_terminal_ref", TOOL, "terminal", (P("terminal_id"),)),
    ("update_plan", UPDATE, "plan", (P("entries", iterable=True),)),
    ("update_user_message", UPDATE, "user_message_chunk", (P("content"),)),
    ("update_agent_message", UPDATE, "agent_message_chunk", (P("content"),)),
    ("update_agent_thought", UPDATE, "agent_thought_chunk", (P("content"),)),
    (
        "update_available_commands",
        UPDATE,
        "available_commands_update",
        (P("commands", "available_commands", iterable=True),),
    ),
    ("update_current_mode", UPDATE, "current_mode_update", (P("current_mode_id"),)),
    ("start_tool_call", UPDATE, "tool_call", (P("tool_call_id"), P("title"), *_TOOL_FIELDS)),
    ("update_tool_call", UPDATE, "tool_call_update", (P("tool_call_id"), kw("title"), *_TOOL_FIELDS)),
)
# SDK builder -> the builder taking the same text (`update_agent_message_text(text)`).
TEXT_FORMS = ("update_user_message", "update_agent_message", "update_agent_thought")


# The order of the SDK's module; the builders beyond it follow, union by union, in schema order.
SDK_ORDER = (
    "text_block",
    "image_block",
    "audio_block",
    "resource_link_block",
    "embedded_text_resource",
    "embedded_blob_resource",
    "resource_block",
    "tool_content",
    "tool_diff_content",
    "tool_terminal_ref",
    "plan_entry",
    "update_plan",
    "update_user_message",
    "update_user_message_text",
    "update_agent_message",
    "update_agent_message_text",
    "update_agent_thought",
    "update_agent_thought_text",
    "update_available_commands",
    "update_current_mode",
    "session_notification",
    "start_tool_call",
    "start_read_tool_call",
    "start_edit_tool_call",
    "update_tool_call",
)
