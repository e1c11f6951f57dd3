"""The generated decoders take shortcuts on the hot path; these tests pin that each one decodes
exactly as the general helpers in runtime/serde.py do (same value, same error and path, same
warnings, lenient and strict):

- an array field is decoded in place, item by item (union items dispatched on their tag
  inline), instead of through `_s.skip_invalid` / `_s.list_of` with an item decoder;
- unknown fields are found by counting the known fields present instead of a set operation.

The reference for an array field is what the decoders did before: the helper, inside the
lenient field's `try` when the schema tolerates a malformed value.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from agent import serde as _s
from agent import types as T

Item = Callable[[Any, Any, T.DecodeContext], Any]


def role(x: Any, p: Any, ctx: T.DecodeContext) -> Any:
    """The item decoder the list helper used for `list[Role]` (an enum)."""
    return x if x.__class__ is str and x in ("assistant", "user") else _s.enum_fail(p, "Role", x)


CONTENT = {"type": "content", "content": {"type": "text", "text": "a"}}
DIFF = {"type": "diff", "path": "/a", "newText": "n", "oldText": "o"}
LOCATION = {"path": "/a", "line": 3}
TEXT = {"type": "text", "text": "t"}
ODD = [5, "x", None, True, 1.5, {}, [], {"type": 3}, {"type": "nope"}, {"type": None}]


@dataclass(frozen=True)
class Case:
    """An array field: its class, wire and Python names, the object's other fields, the item
    decoder and helper the field was decoded with, the lenient fallback (None: not lenient),
    whether null is allowed, and some good items."""

    cls: type[Any]
    wire: str
    py: str
    base: dict[str, Any]
    item: Item
    helper: Any
    fallback: Any
    nullable: bool
    good: list[Any]


CASES = [
    Case(T.SessionUpdateToolCallUpdate, "content", "content", {"toolCallId": "c"}, T._d_ToolCallContent,
         _s.skip_invalid, T.UNSET, True, [CONTENT, DIFF, {"type": "terminal", "terminalId": "t"}]),
    Case(T.SessionUpdateToolCallUpdate, "locations", "locations", {"toolCallId": "c"}, T._d_ToolCallLocation,
         _s.skip_invalid, T.UNSET, True, [LOCATION, {"path": "/b"}, {"path": "/c", "line": 2.0}]),
    Case(T.PromptRequest, "prompt", "prompt", {"sessionId": "s"}, T._d_ContentBlock, _s.list_of, None, False,
         [TEXT, {"type": "image", "mimeType": "image/png", "data": "AA"}, {"type": "future", "x": 1}]),
    Case(T.Annotations, "audience", "audience", {}, role, _s.skip_invalid, T.UNSET, True, ["user", "assistant"]),
    Case(T.McpServerStdio, "args", "args", {"name": "n", "command": "c", "env": []}, _s.d_str, _s.list_of, None,
         False, ["a", "b"]),
    Case(T.McpServerStdio, "env", "env", {"name": "n", "command": "c", "args": []}, T._d_EnvVariable, _s.list_of,
         None, False, [{"name": "A", "value": "1"}]),
    Case(T.InitializeResponse, "authMethods", "auth_methods", {"protocolVersion": 1}, T._d_AuthMethod,
         _s.skip_invalid, [], False, [{"id": "a", "name": "A"}, {"type": "terminal", "id": "t", "name": "T"}]),
    Case(T.SessionModeState, "availableModes", "available_modes", {"currentModeId": "m"}, T._d_SessionMode,
         _s.skip_invalid, [], False, [{"id": "m", "name": "M"}]),
    Case(T.ElicitationSchema, "required", "required", {}, _s.d_str, _s.list_of, None, True, ["a"]),
]  # fmt: skip


def values(good: list[Any]) -> list[Any]:
    """Field values: not a list, empty, all good, and every bad item among good ones."""
    out: list[Any] = [None, "x", 5, {}, {"0": good[0]}, [], good, good * 2]
    bad_items = ODD + ([{**good[0], "extra": 1}] if isinstance(good[0], dict) else [])
    for bad in bad_items:
        out.append([good[0], bad, good[-1]])
        out.append([bad])
    if isinstance(good[0], dict):  # an item missing each of its keys in turn
        for key in good[0]:
            out.append([{k: x for k, x in good[0].items() if k != key}, good[-1]])
    return out


def outcome(decode: Callable[[T.DecodeContext], Any], strict: bool) -> tuple[Any, ...]:
    """What a decode returned (the value) or raised (path, message), and what it reported."""
    ctx = T.DecodeContext(strict=strict)
    try:
        result: Any = ("value", decode(ctx))
    except T.DecodeError as exc:
        result = ("error", exc.path, exc.message)
    return result, [(w.path, w.message, w.kind) for w in ctx.warnings]


def field_of(cls: type[Any], obj: dict[str, Any], py: str) -> Callable[[T.DecodeContext], Any]:
    return lambda ctx: getattr(cls.from_dict(obj, ctx), py)


def reference(v: Any, item: Item, helper: Any, fallback: Any, nullable: bool, ctx: T.DecodeContext) -> Any:
    """The array field as the helpers decode it (the decoders' code before decoding in place)."""
    path: Any = (None, "f")
    if v is None and nullable:
        return None
    if fallback is None:
        return helper(v, path, ctx, item)
    try:
        return helper(v, path, ctx, item)
    except T.DecodeError as exc:
        return _s.tolerated(ctx, path, exc, fallback)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.cls.__name__}.{c.wire}" for c in CASES])
def test_an_array_field_decodes_in_place_as_the_helpers_do(case: Case) -> None:
    tolerated = 0
    for v, strict in itertools.product(values(case.good), (False, True)):
        got_result, got_seen = outcome(field_of(case.cls, {**case.base, case.wire: v}, case.py), strict)
        ref = functools.partial(reference, v, case.item, case.helper, case.fallback, case.nullable)
        ref_result, ref_seen = outcome(ref, strict)
        # The reference decodes the field alone (path "f"): compare with the field's own path.
        wire = case.wire
        got_seen = [(p.replace(wire, "f", 1), m.replace(f"(at {wire}", "(at f", 1), k) for p, m, k in got_seen]
        if got_result[0] == "error":
            got_result = ("error", got_result[1].replace(wire, "f", 1), got_result[2])
        assert (got_result, got_seen) == (ref_result, ref_seen), (v, strict)
        tolerated += got_result[0] == "value" and bool(got_seen)
    assert tolerated or case.fallback is None  # a lenient field was seen tolerating something


def test_in_place_items_keep_their_paths_deep_in_a_message() -> None:
    """Warnings and errors from inside an item name the item's full path."""
    update = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c",
        "content": [CONTENT, {"type": "content", "content": {"type": "text"}}, DIFF],
        "locations": [LOCATION, {"line": 1}],
    }
    ctx = T.DecodeContext()
    decoded = T.SessionNotification.from_dict({"sessionId": "s", "update": update}, ctx)
    assert [type(c).__name__ for c in decoded.update.content] == ["Content", "Diff"]
    assert [w.path for w in ctx.warnings] == ["update.content[1]", "update.locations[1]"]
    assert "(at update.content[1].content.text)" in ctx.warnings[0].message
    with pytest.raises(T.DecodeError) as info:
        T.SessionNotification.from_dict({"sessionId": "s", "update": update}, T.DecodeContext(strict=True))
    assert info.value.path == "update.content[1].content.text"
    with pytest.raises(T.DecodeError) as info:
        T.PromptRequest.from_dict({"sessionId": "s", "prompt": [TEXT, {"type": "text", "text": 5}]})
    assert (info.value.path, info.value.message) == ("prompt[1].text", "expected string, got integer")


# -- unknown fields, found by counting ---------------------------------------------------------

# (class, a complete object: every field present, the tag too where the class has one)
FULL: list[tuple[type[Any], dict[str, Any]]] = [
    (T.TextContent, {"type": "text", "text": "t", "annotations": {}, "_meta": {}}),
    (T.Diff, {"type": "diff", "path": "/a", "oldText": "o", "newText": "n", "_meta": {}}),
    (T.ToolCallLocation, {"path": "/a", "line": 1, "_meta": None}),
    (T.SessionNotification, {"sessionId": "s", "update": {"sessionUpdate": "plan", "entries": []}, "_meta": {}}),
    (T.EnvVariable, {"name": "A", "value": "1", "_meta": {}}),
    (T.HttpHeader, {"name": "A", "value": "1", "_meta": {}}),
    (
        T.InitializeResponse,
        {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": [], "agentInfo": None, "_meta": {}},
    ),
]


@pytest.mark.parametrize(("cls", "full"), FULL, ids=[c.__name__ for c, _ in FULL])
def test_unknown_fields_are_exactly_the_keys_the_class_does_not_know(cls: type[Any], full: dict[str, Any]) -> None:
    known = getattr(T, f"_K_{cls.__name__}")
    optional = [k for k in full if _drops_cleanly(cls, full, k)]
    unknown = [{}, {"zz": 1}, {"zz": 1, "yy": None}, {"type2": "x"}]
    for n in range(len(optional) + 1):
        for dropped in itertools.combinations(optional, n):
            for extra in unknown:
                obj = {k: v for k, v in full.items() if k not in dropped} | extra
                ctx = T.DecodeContext(strict=True, report_unknown=True)
                decoded = cls.from_dict(obj, ctx)
                assert decoded.extra == {k: v for k, v in obj.items() if k not in known}, obj
                assert [w.path for w in ctx.warnings] == list(decoded.extra), obj
                tag = dict([cls._tag]) if cls._tag else {}  # to_dict always writes a class's tag
                assert decoded.to_dict() == obj | tag


def _drops_cleanly(cls: type[Any], full: dict[str, Any], key: str) -> bool:
    """Whether `key` may be absent (an optional field or the tag)."""
    try:
        cls.from_dict({k: v for k, v in full.items() if k != key}, T.DecodeContext(strict=True))
    except T.DecodeError:
        return False
    return True


# -- from_dict: one class attribute to call ----------------------------------------------------


def test_from_dict_of_a_variant_class_checks_its_tag_first() -> None:
    assert T.TextContent.from_dict({"text": "x"}) == T.TextContent(text="x")
    assert T.TextContent.from_dict({"type": "text", "text": "x"}) == T.TextContent(text="x")
    with pytest.raises(T.DecodeError) as info:
        T.TextContent.from_dict({"type": "image", "text": "x"})
    assert (info.value.path, info.value.message) == ("type", "expected 'text', got 'image'")
    with pytest.raises(T.DecodeError) as info:
        T.TextContent.from_dict({"type": "image"})  # the tag is checked before the fields
    assert info.value.path == "type"
    with pytest.raises(T.DecodeError) as info:
        T.SessionUpdateAgentMessageChunk.from_dict([])
    assert (info.value.path, info.value.message) == ("", "expected object, got array")


def test_from_dict_uses_the_context_it_is_given() -> None:
    ctx = T.DecodeContext()
    decoded = T.SessionInfoUpdate.from_dict({"title": 5}, ctx)
    assert decoded.title is T.UNSET and [w.path for w in ctx.warnings] == ["title"]
    with pytest.raises(T.DecodeError):
        T.SessionInfoUpdate.from_dict({"title": 5}, T.DecodeContext(strict=True))
    with pytest.raises(T.DecodeError):
        T.TextContent.from_dict({"text": "x", "annotations": 5}, T.DecodeContext(strict=True))
