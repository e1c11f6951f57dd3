"""`helpers.py` against the official SDK's `acp.helpers` (0.12.1), call by call.

Each call is written once as a small tree (`C(builder, *args, **kwargs)`, `T(type, **fields)`)
and evaluated against both modules, so every nested block, resource or location is built by the
side under test. Ours must give the SDK's wire JSON (`serialize_params`: `model_dump(mode="json",
by_alias=True, exclude_none=True, exclude_defaults=True)`; a handler's result is dumped with
`exclude_unset` instead, which gives the same here), and decode back to an equal object.
Which builders exist is checked on the golden v1, unstable and v2 packages; the release packages'
helpers.py are type-checked by tests/test_releases.py, the goldens' by tests/test_static.py, and
the keyword checks by mypy and pyright in tests/test_keyword_calls.py.
"""

from __future__ import annotations

import inspect
import itertools
import typing
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import acp.helpers as sdk
import acp.schema
import pytest
from agent import helpers, types
from golden_import import load_golden
from pydantic import BaseModel


@dataclass(frozen=True)
class C:
    """A builder call."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()


def c(builder: str, /, *args: Any, **kwargs: Any) -> C:
    return C(builder, args, tuple(kwargs.items()))


@dataclass(frozen=True)
class T:
    """A protocol object built by its type (the same class name on both sides)."""

    name: str
    fields: tuple[tuple[str, Any], ...]


def t(cls: str, /, **fields: Any) -> T:
    return T(cls, tuple(fields.items()))


def build(value: Any, side: ModuleType, schema: ModuleType) -> Any:
    if isinstance(value, C):
        args = [build(a, side, schema) for a in value.args]
        return getattr(side, value.name)(*args, **{k: build(v, side, schema) for k, v in value.kwargs})
    if isinstance(value, T):
        return getattr(schema, value.name)(**{k: build(v, side, schema) for k, v in value.fields})
    if isinstance(value, list):
        return [build(v, side, schema) for v in value]
    if isinstance(value, dict):  # an open value (raw input): generated objects at any depth
        return {k: build(v, side, schema) for k, v in value.items()}
    return value


TEXT = c("text_block", "hi")
IMAGE = c("image_block", "aGk=", "image/png", uri="file:///i.png")
BLOCKS = [TEXT, IMAGE, c("resource_link_block", "a.py", "file:///a.py")]
RESOURCES = [
    c("embedded_text_resource", "file:///a", "x", mime_type="text/plain"),
    c("embedded_blob_resource", "file:///b", "AA=="),
]
TOOL_CONTENT = [
    [c("tool_content", TEXT), c("tool_diff_content", "/a", "new", "old"), c("tool_terminal_ref", "term")],
    [],
]
LOCATIONS = [[t("ToolCallLocation", path="/a.py", line=3), t("ToolCallLocation", path="/b")], []]
DIFF = c("tool_diff_content", "/a", "new", "old")
# Open values holding generated objects, nested in dicts and lists (issue 29 §1).
NESTED = [DIFF, {"k": [TEXT, {"d": DIFF}], "u": "日本 ✓", "n": 2**70}, [IMAGE, None]]
RAW = [{"path": "/a", "n": [1, 2]}, "text", 0, False, [None], *NESTED]
UPDATES = [c("update_agent_message_text", "hi"), c("start_read_tool_call", "t1", "Read", "/a")]

# builder -> parameter -> values tried (`None` where the SDK's parameter defaults to None).
POOLS: dict[str, dict[str, list[Any]]] = {
    "text_block": {"text": ["hi", "", "two\nlines"]},
    "image_block": {"data": ["aGk="], "mime_type": ["image/png"], "uri": ["file:///i.png", None]},
    "audio_block": {"data": ["aGk="], "mime_type": ["audio/wav"]},
    "resource_link_block": {
        "name": ["a.py"],
        "uri": ["file:///a.py"],
        "mime_type": ["text/x-python", None],
        "size": [0, 12],
        "description": ["d"],
        "title": ["T", None],
    },
    "embedded_text_resource": {"uri": ["file:///a"], "text": ["x", ""], "mime_type": ["text/plain", None]},
    "embedded_blob_resource": {"uri": ["file:///b"], "blob": ["AA=="], "mime_type": ["image/png", None]},
    "resource_block": {"resource": RESOURCES},
    "tool_content": {"block": BLOCKS},
    "tool_diff_content": {"path": ["/a"], "new_text": ["new", ""], "old_text": ["old", None, ""]},
    "tool_terminal_ref": {"terminal_id": ["term-1"]},
    "plan_entry": {"content": ["step"], "priority": ["high", "low", "medium"], "status": ["in_progress", "completed"]},
    "update_plan": {"entries": [[c("plan_entry", "a"), c("plan_entry", "b", priority="high", status="completed")], []]},
    "update_user_message": {"content": BLOCKS},
    "update_user_message_text": {"text": ["hi", ""]},
    "update_agent_message": {"content": BLOCKS},
    "update_agent_message_text": {"text": ["hi", ""]},
    "update_agent_thought": {"content": BLOCKS},
    "update_agent_thought_text": {"text": ["hmm"]},
    "update_available_commands": {
        "commands": [[t("AvailableCommand", name="web", description="search the web")], []],
    },
    "update_current_mode": {"current_mode_id": ["code", "ask"]},
    "session_notification": {"session_id": ["s1"], "update": UPDATES},
    "start_tool_call": {
        "tool_call_id": ["t1"],
        "title": ["Read a.py"],
        "kind": ["read", "execute", None],
        "status": ["pending", "failed", None],
        "content": TOOL_CONTENT,
        "locations": LOCATIONS,
        "raw_input": [*RAW, None],
        "raw_output": [{"ok": True}, None],
    },
    "start_read_tool_call": {
        "tool_call_id": ["t1"],
        "title": ["Read"],
        "path": ["/a.py"],
        "extra_options": [*TOOL_CONTENT, None],
    },
    "start_edit_tool_call": {
        "tool_call_id": ["t2"],
        "title": ["Edit"],
        "path": ["/a.py"],
        "content": ["new text", {"k": [1]}, None, *NESTED],
        "extra_options": [*TOOL_CONTENT, None],
    },
    "update_tool_call": {
        "tool_call_id": ["t1"],
        "title": ["Done", None],
        "kind": ["edit", None],
        "status": ["completed", None],
        "content": TOOL_CONTENT,
        "locations": LOCATIONS,
        "raw_input": RAW,
        "raw_output": [{"ok": True}, "out", None],
    },
}


def calls(name: str) -> list[C]:
    """Every subset of the optional parameters, the values taken round-robin from the pools."""
    params = list(inspect.signature(getattr(sdk, name)).parameters.values())
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    optional = [p for p in params if p.default is not inspect.Parameter.empty]
    pool = POOLS[name]
    out: list[C] = []
    counter = itertools.count()
    for size in range(len(optional) + 1):
        for chosen in itertools.combinations(optional, size):
            rounds = max([len(pool[p]) for p in [*required, *(o.name for o in chosen)]] or [1])
            for _ in range(rounds):
                n = next(counter)
                args = tuple(pool[p][n % len(pool[p])] for p in required)
                kwargs = tuple((o.name, pool[o.name][n % len(pool[o.name])]) for o in chosen)
                out.append(C(name, args, kwargs))
    return out


ALL_CALLS = [call for name in sdk.__all__ for call in calls(name)]


def wire(model: BaseModel) -> Any:
    sent = model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    assert sent == model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
    return sent


def test_every_sdk_builder_is_generated_for_the_bundled_v1_schema() -> None:
    assert set(sdk.__all__) <= set(helpers.__all__)
    assert set(sdk.__all__) == set(POOLS)


@pytest.mark.parametrize("name", sdk.__all__)
def test_sdk_builder_signature_is_kept(name: str) -> None:
    """The SDK's parameters, in order, of the same kind and default; ours only add keyword-only ones."""
    theirs = list(inspect.signature(getattr(sdk, name)).parameters.values())
    ours = list(inspect.signature(getattr(helpers, name)).parameters.values())
    assert [(p.name, p.kind, p.default) for p in ours[: len(theirs)]] == [(p.name, p.kind, p.default) for p in theirs]
    extra = ours[len(theirs) :]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is types.UNSET for p in extra), extra


@pytest.mark.parametrize("role", ["agent", "client"])
def test_builders_give_the_sdk_json_on_the_same_call(role: str) -> None:
    package = load_golden(role)
    assert len(ALL_CALLS) > 800
    for call in ALL_CALLS:
        theirs = build(call, sdk, acp.schema)
        ours = build(call, package.helpers, package.types)
        assert ours.to_dict() == wire(theirs), call
        decoded = type(ours).from_dict(ours.to_dict())
        assert decoded.to_dict() == ours.to_dict(), call
        if not any(n in call.args or n in dict(call.kwargs).values() for n in NESTED):
            assert decoded == ours, call  # else an open value decodes as JSON, not objects


def test_builders_beyond_the_sdk() -> None:
    usage = helpers.update_usage(used=10, size=100)
    assert usage.to_dict() == {"sessionUpdate": "usage_update", "used": 10, "size": 100}
    info = helpers.update_session_info(title=None)
    assert info.to_dict() == {"sessionUpdate": "session_info_update", "title": None}  # null: clear the title
    assert helpers.update_session_info().to_dict() == {"sessionUpdate": "session_info_update"}
    options = helpers.update_config_options(config_options=[])
    assert options.to_dict() == {"sessionUpdate": "config_option_update", "configOptions": []}
    chunk = helpers.update_agent_message_text("hi", message_id="m1", meta={"k": 1})
    assert chunk.to_dict() == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "hi"},
        "messageId": "m1",
        "_meta": {"k": 1},
    }
    # The SDK's own parameters keep its meaning: None leaves the field out, also where null is allowed.
    cleared = helpers.update_tool_call("t1", title=None)
    assert cleared.to_dict() == {"sessionUpdate": "tool_call_update", "toolCallId": "t1"}


# -- which builders exist, per schema (the golden packages) ------------------------------------
GOLDENS = {"v1": load_golden("agent"), "v1-unstable": load_golden("unstable/agent"), "v2": load_golden("v2/agent")}


def builders(package: ModuleType) -> dict[str, type]:
    """Each builder of the package -> the class it returns."""
    module = package.helpers
    returns = {name: getattr(module, name).__annotations__["return"] for name in module.__all__}
    return {name: getattr(package.types, hint.removeprefix("types.")) for name, hint in returns.items()}


@pytest.mark.parametrize("schema", GOLDENS)
def test_every_variant_has_a_builder_of_its_own_type(schema: str) -> None:
    package = GOLDENS[schema]
    made = set(builders(package).values())
    for union in ("SessionUpdate", "ContentBlock", "ToolCallContent"):
        variants = {v for v in typing.get_args(getattr(package.types, union)) if not v.__name__.startswith("Unknown")}
        assert variants and variants <= made, (union, variants - made)


def test_builders_follow_each_schema() -> None:
    v1, unstable, v2 = (set(builders(GOLDENS[s])) for s in ("v1", "v1-unstable", "v2"))
    assert {"update_usage", "update_session_info", "update_config_options"} <= v1
    assert {"update_compaction", "update_plan_update"} <= unstable - v1
    # v2: no `tool_call` variant, and message chunks require a messageId the SDK's builders cannot give.
    assert not {"start_tool_call", "start_read_tool_call", "update_agent_message_text"} & v2
    assert {"update_agent_message_chunk", "update_terminal", "update_tool_call"} <= v2
    diff = inspect.signature(GOLDENS["v2"].helpers.tool_diff_content).parameters
    assert list(diff)[:1] == ["changes"] and diff["changes"].kind is inspect.Parameter.KEYWORD_ONLY
