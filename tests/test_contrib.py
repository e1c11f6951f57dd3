"""contrib (golden v1 packages) against the official SDK's `acp.contrib` 0.12.1, call by call.

The same session/update JSON goes to the SDK's SessionAccumulator (as its pydantic models) and
to ours (as generated types); after every notification the SDK's snapshot fields must equal
ours, normalised to JSON (ours with `to_dict`, the SDK's with `model_dump(by_alias=True,
exclude_none=True)`). The same for ToolCallTracker's updates, views and tool-call models, and
for the requests PermissionBroker sends. The sequences are random but seeded (no hypothesis),
and small: a few hundred notifications and calls in all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any

import pytest
from acp import contrib as sdk
from acp import schema as sdk_schema
from agent import contrib, types
from golden_import import load_golden

SEEDS = range(12)
SESSIONS = ("s1", "s2")
IDS = ("call_a", "call_b", "call_c")


# -- random JSON for session/update notifications ------------------------------------------------
def _block(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.8:
        return {"type": "text", "text": rng.choice(["hi", "there", "", "ünï", "a\nb"])}
    return {"type": "resource_link", "uri": "file:///x", "name": "x"}


def _content(rng: random.Random) -> list[dict[str, Any]]:
    kinds = [
        lambda: {"type": "content", "content": _block(rng)},
        lambda: {"type": "diff", "path": "/a.py", "oldText": "a", "newText": "b"},
        lambda: {"type": "terminal", "terminalId": "t1"},
    ]
    return [rng.choice(kinds)() for _ in range(rng.randrange(3))]


def _tool_fields(rng: random.Random, nulls: bool) -> dict[str, Any]:
    """Some of a tool call's optional fields (and, in an update, nulls: "no change" to both)."""
    choices: dict[str, Any] = {
        "kind": lambda: rng.choice(["read", "edit", "execute", "other"]),
        "status": lambda: rng.choice(["pending", "in_progress", "completed", "failed"]),
        "content": lambda: _content(rng),
        "locations": lambda: [{"path": "/a.py", "line": rng.randrange(9)} for _ in range(rng.randrange(3))],
        "rawInput": lambda: rng.choice([{"cmd": "ls"}, [1, 2], "x", 0]),
        "rawOutput": lambda: rng.choice([{"ok": True}, "done", 3]),
        "title": lambda: rng.choice(["Read", "Edit", "Run"]),
    }
    out: dict[str, Any] = {}
    for key, make in choices.items():
        if rng.random() < 0.4:
            out[key] = None if nulls and rng.random() < 0.2 else make()
    return out


def _update(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(
        ["user", "agent", "thought", "tool_call", "tool_call_update", "tool_call_update", "plan", "commands", "mode"]
        + ["config", "info", "usage", "unknown"]
    )
    if kind in ("user", "agent", "thought"):
        tag = {"user": "user_message_chunk", "agent": "agent_message_chunk", "thought": "agent_thought_chunk"}[kind]
        update: dict[str, Any] = {"sessionUpdate": tag, "content": _block(rng)}
        if rng.random() < 0.5:
            update["messageId"] = rng.choice(["m1", "m2", "m3"])
        return update
    if kind == "tool_call":
        fields = _tool_fields(rng, nulls=False)
        fields["title"] = fields.get("title") or "Start"
        return {"sessionUpdate": "tool_call", "toolCallId": rng.choice(IDS), **fields}
    if kind == "tool_call_update":
        return {"sessionUpdate": "tool_call_update", "toolCallId": rng.choice(IDS), **_tool_fields(rng, nulls=True)}
    if kind == "plan":
        entries = [
            {"content": f"step {i}", "priority": "high", "status": rng.choice(["pending", "completed"])}
            for i in range(rng.randrange(3))
        ]
        return {"sessionUpdate": "plan", "entries": entries}
    if kind == "commands":
        commands = [
            {"name": n, "description": f"do {n}"} for n in rng.sample(["web", "test", "plan"], rng.randrange(3))
        ]
        return {"sessionUpdate": "available_commands_update", "availableCommands": commands}
    if kind == "mode":
        return {"sessionUpdate": "current_mode_update", "currentModeId": rng.choice(["ask", "code"])}
    if kind == "config":
        return {"sessionUpdate": "config_option_update", "configOptions": []}
    if kind == "info":
        return {"sessionUpdate": "session_info_update", "title": rng.choice(["T", None])}
    if kind == "usage":
        return {"sessionUpdate": "usage_update", "used": rng.randrange(100), "size": 100}
    return {"sessionUpdate": "future_update", "payload": rng.randrange(5)}


def notifications(seed: int, count: int = 30) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    session = SESSIONS[0]
    out = []
    for _ in range(count):
        if rng.random() < 0.05:
            session = rng.choice(SESSIONS)
        out.append({"sessionId": session, "update": _update(rng)})
    return out


# -- normalising both snapshots to JSON ------------------------------------------------------------
def _sdk(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_sdk(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, exclude_none=True)
    return value


def _ours(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_ours(v) for v in value]
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


VIEW_FIELDS = ("tool_call_id", "title", "kind", "status", "content", "locations", "raw_input", "raw_output")
SNAPSHOT_FIELDS = ("session_id", "plan_entries", "current_mode_id", "available_commands")
SNAPSHOT_FIELDS += ("user_messages", "agent_messages", "agent_thoughts")


def _view(view: Any, norm: Any) -> dict[str, Any]:
    return {f: norm(getattr(view, f)) for f in VIEW_FIELDS}


def sdk_snapshot(snap: Any) -> dict[str, Any]:
    out = {f: _sdk(getattr(snap, f)) for f in SNAPSHOT_FIELDS}
    out["tool_calls"] = [(k, _view(v, _sdk)) for k, v in snap.tool_calls.items()]
    return out


def our_snapshot(snap: contrib.SessionSnapshot) -> dict[str, Any]:
    out = {f: _ours(getattr(snap, f)) for f in SNAPSHOT_FIELDS}
    out["tool_calls"] = [(k, _view(v, _ours)) for k, v in snap.tool_calls.items()]
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_accumulator_matches_the_sdk(seed: int) -> None:
    theirs, ours = sdk.SessionAccumulator(), contrib.SessionAccumulator()
    for wire in notifications(seed):
        got = ours.apply(types.SessionNotification.from_dict(wire))
        if wire["update"]["sessionUpdate"] == "future_update":  # the SDK's models reject it
            continue
        expected = theirs.apply(sdk_schema.SessionNotification.model_validate(wire))
        assert our_snapshot(got) == sdk_snapshot(expected), wire
        assert our_snapshot(ours.snapshot()) == sdk_snapshot(theirs.snapshot())


def test_snapshots_read_late_show_their_own_moment() -> None:
    """Snapshots pin the accumulator's logs (apply is O(1)): one read only after many later
    applies and session resets must equal the same snapshot read at once."""
    early, late = contrib.SessionAccumulator(), contrib.SessionAccumulator()
    expected: list[dict[str, Any]] = []
    kept: list[contrib.SessionSnapshot] = []
    for seed in SEEDS[:3]:
        for wire in notifications(seed):
            expected.append(our_snapshot(early.apply(types.SessionNotification.from_dict(wire))))
            kept.append(late.apply(types.SessionNotification.from_dict(wire)))
        early.reset()
        late.reset()
    assert [our_snapshot(snap) for snap in kept] == expected
    first = kept[0]
    assert first == dataclasses.replace(first) and first.messages is first.messages  # built once


def test_accumulator_goes_beyond_the_sdk() -> None:
    acc = contrib.SessionAccumulator()
    seen: list[tuple[contrib.SessionSnapshot, types.SessionNotification]] = []
    unsubscribe = acc.subscribe(lambda snap, n: seen.append((snap, n)))

    def apply(update: dict[str, Any]) -> contrib.SessionSnapshot:
        return acc.apply(types.SessionNotification.from_dict({"sessionId": "s", "update": update}))

    apply({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a"}, "messageId": "m1"})
    apply({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "q"}})
    apply({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "b"}, "messageId": "m1"})
    apply({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "c"}, "messageId": "m2"})
    apply({"sessionUpdate": "session_info_update", "title": "First", "updatedAt": "2025-01-01T00:00:00Z"})
    apply({"sessionUpdate": "session_info_update", "title": None})  # null clears, absent keeps
    apply({"sessionUpdate": "usage_update", "used": 5, "size": 10})
    apply({"sessionUpdate": "config_option_update", "configOptions": []})
    snap = apply({"sessionUpdate": "brand_new", "x": 1})
    assert [(m.role, m.message_id, m.text) for m in snap.messages] == [
        ("agent", "m1", "ab"),
        ("user", None, "q"),
        ("agent", "m2", "c"),
    ]
    assert snap.session_info == contrib.SessionInfoState(title=None, updated_at="2025-01-01T00:00:00Z")
    assert snap.usage is not None and (snap.usage.used, snap.usage.size) == (5, 10)
    assert snap.config_options == ()
    assert [u.to_dict() for u in snap.unknown_updates] == [{"sessionUpdate": "brand_new", "x": 1}]
    assert len(seen) == 9 and seen[-1][0] is snap
    unsubscribe()
    unsubscribe()  # idempotent, as the SDK's
    acc.reset()  # subscribers stay, as in the SDK; the state goes
    with pytest.raises(RuntimeError):
        acc.snapshot()
    assert apply({"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": "failed"}).tool_calls["t"] == (
        contrib.ToolCallView(tool_call_id="t", status="failed")
    )
    assert len(seen) == 9


def test_session_change_without_auto_reset_raises_as_the_sdk() -> None:
    wire = [{"update": {"sessionUpdate": "current_mode_update", "currentModeId": m}} for m in ("ask", "code")]
    acc = contrib.SessionAccumulator(auto_reset_on_session_change=False)
    acc.apply(types.SessionNotification.from_dict({**wire[0], "sessionId": "a"}))
    with pytest.raises(contrib.SessionNotificationMismatchError) as ours:
        acc.apply(types.SessionNotification.from_dict({**wire[1], "sessionId": "b"}))
    assert (acc.snapshot().session_id, acc.snapshot().current_mode_id) == ("a", "ask")
    theirs = sdk.SessionAccumulator(auto_reset_on_session_change=False)
    theirs.apply(sdk_schema.SessionNotification.model_validate({**wire[0], "sessionId": "a"}))
    with pytest.raises(ValueError) as sdk_error:
        theirs.apply(sdk_schema.SessionNotification.model_validate({**wire[1], "sessionId": "b"}))
    assert str(ours.value) == str(sdk_error.value)


# -- the tracker and the broker: the same random calls on both -------------------------------------
def _counter() -> Any:
    n = iter(range(10**6))
    return lambda: f"id{next(n)}"


def _both_content(items: list[dict[str, Any]]) -> tuple[list[types.ToolCallContent], list[Any]]:
    ours = types.ToolCallUpdate.from_dict({"toolCallId": "x", "content": items}).content
    assert isinstance(ours, list)
    return ours, sdk_schema.ToolCallUpdate.model_validate({"toolCallId": "x", "content": items}).content or []


def _both_locations(items: list[dict[str, Any]]) -> tuple[list[types.ToolCallLocation], list[Any]]:
    return [types.ToolCallLocation.from_dict(i) for i in items], [
        sdk_schema.ToolCallLocation.model_validate(i) for i in items
    ]


def _kwargs(rng: random.Random, progress: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same keyword arguments for our tracker and the SDK's (None sometimes, to clear)."""
    ours: dict[str, Any] = {}
    theirs: dict[str, Any] = {}
    wire = _tool_fields(rng, nulls=progress)
    for key, value in wire.items():
        name = {"rawInput": "raw_input", "rawOutput": "raw_output"}.get(key, key)
        if key == "content" and value is not None:
            ours[name], theirs[name] = _both_content(value)
        elif key == "locations" and value is not None:
            ours[name], theirs[name] = _both_locations(value)
        else:
            ours[name] = theirs[name] = value
    if not progress:
        ours.pop("title", None), theirs.pop("title", None)
    return ours, theirs


def _permission_reply() -> tuple[types.RequestPermissionResponse, sdk_schema.RequestPermissionResponse]:
    wire = {"outcome": {"outcome": "selected", "optionId": "approve"}}
    return types.RequestPermissionResponse.from_dict(wire), sdk_schema.RequestPermissionResponse.model_validate(wire)


@pytest.mark.parametrize("seed", SEEDS)
def test_tracker_and_broker_match_the_sdk(seed: int) -> None:
    rng = random.Random(1000 + seed)
    ours, theirs = contrib.ToolCallTracker(id_factory=_counter()), sdk.ToolCallTracker(id_factory=_counter())
    sent: list[tuple[Any, Any]] = []
    reply = _permission_reply()

    async def our_requester(request: types.RequestPermissionRequest) -> types.RequestPermissionResponse:
        sent.append((request, None))
        return reply[0]

    async def sdk_requester(request: Any) -> Any:
        sent[-1] = (sent[-1][0], request)
        return reply[1]

    our_broker = contrib.PermissionBroker("s1", our_requester, tracker=ours)
    sdk_broker = sdk.PermissionBroker("s1", sdk_requester, tracker=theirs)
    started: set[str] = set()
    for _ in range(25):
        op = rng.choice(["start", "progress", "progress", "stream", "forget", "permission"])
        ext = rng.choice(["x", "y"])
        if op != "start" and ext not in started:
            with pytest.raises(KeyError):
                ours.view(ext)
            with pytest.raises(KeyError):
                theirs.view(ext)
            continue
        if op == "start":
            a, b = _kwargs(rng, progress=False)
            title = rng.choice(["Read", "Edit"])
            got, expected = ours.start(ext, title=title, **a), theirs.start(ext, title=title, **b)
            started.add(ext)
        elif op == "progress":
            a, b = _kwargs(rng, progress=True)
            got, expected = ours.progress(ext, **a), theirs.progress(ext, **b)
        elif op == "stream":
            text, status = rng.choice(["ab", "c", ""]), rng.choice([None, "completed"])
            got = ours.append_stream_text(ext, text, status=status)
            expected = theirs.append_stream_text(ext, text, status=status)
        elif op == "forget":
            ours.forget(ext), theirs.forget(ext)
            started.discard(ext)
            continue
        else:
            description = rng.choice([None, "", "May I?"])
            extra: dict[str, Any] = {}
            if rng.random() < 0.3:
                extra = {"content": _both_content(_content(rng))}
            got = asyncio.run(
                our_broker.request_for(ext, description=description, **{k: v[0] for k, v in extra.items()})
            )
            expected = asyncio.run(
                sdk_broker.request_for(ext, description=description, **{k: v[1] for k, v in extra.items()})
            )
            assert got is reply[0] and expected is reply[1]
            got, expected = sent[-1]
        assert _ours(got) == _sdk(expected), op
        assert _view(ours.view(ext), _ours) == _view(theirs.view(ext), _sdk)
        assert ours.tool_call_model(ext).to_dict() == _sdk(theirs.tool_call_model(ext))


def test_broker_with_explicit_tool_call_and_options() -> None:
    got: list[types.RequestPermissionRequest] = []

    async def requester(request: types.RequestPermissionRequest) -> types.RequestPermissionResponse:
        got.append(request)
        return _permission_reply()[0]

    broker = contrib.PermissionBroker("s1", requester)
    with pytest.raises(contrib.MissingToolCallError):
        asyncio.run(broker.request_for("x"))
    tool_call = types.ToolCallUpdate(tool_call_id="t", title="Edit")
    option = types.PermissionOption(option_id="ok", name="OK", kind="allow_once")
    asyncio.run(broker.request_for("x", tool_call=tool_call, description="why", options=[option]))
    assert tool_call.content is types.UNSET  # the caller's object is left alone, as the SDK's deep copy does
    assert got[-1].to_dict() == {
        "sessionId": "s1",
        "toolCall": {
            "toolCallId": "t",
            "title": "Edit",
            "content": [{"type": "content", "content": {"type": "text", "text": "why"}}],
        },
        "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
    }
    asyncio.run(broker.request_for("x", tool_call=tool_call, options=[]))  # empty: the defaults, as in the SDK
    assert [o.to_dict() for o in got[-1].options] == [
        o.model_dump(by_alias=True, exclude_none=True) for o in sdk.default_permission_options()
    ]
    assert [o.to_dict() for o in contrib.default_permission_options()] == [
        o.model_dump(by_alias=True, exclude_none=True) for o in sdk.default_permission_options()
    ]


# -- what each schema gets -------------------------------------------------------------------
def test_each_schema_gets_what_it_has() -> None:
    """v2 has no `tool_call` start, no `plan`, no mode update and no terminal methods; --unstable
    adds variants the snapshot does not fold and a `name` on tool calls."""
    v2 = load_golden("v2/agent")
    assert not hasattr(v2.contrib, "ToolCallTracker") and not hasattr(v2.contrib, "PermissionBroker")
    assert hasattr(v2.contrib, "default_permission_options")
    snapshot_fields = {f.name for f in dataclasses.fields(v2.contrib.SessionSnapshot)}
    assert {"plan_entries", "current_mode_id"}.isdisjoint(snapshot_fields)
    assert {"tool_calls", "messages", "other_updates", "unknown_updates"} <= snapshot_fields
    assert not hasattr(v2.agent.ClientProxy, "create_terminal") and not hasattr(v2.agent, "TerminalHandle")
    acc = v2.contrib.SessionAccumulator()
    for update in (
        {"sessionUpdate": "tool_call_update", "toolCallId": "t", "title": "Run", "status": "in_progress"},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": {"type": "text", "text": "a"}},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": {"type": "text", "text": "b"}},
        {"sessionUpdate": "user_message", "messageId": "u"},
    ):
        snap = acc.apply(v2.types.UpdateSessionNotification.from_dict({"sessionId": "s", "update": update}))
    assert (snap.tool_calls["t"].title, snap.tool_calls["t"].status) == ("Run", "in_progress")
    assert [(m.message_id, m.text) for m in snap.messages] == [("m", "ab")]
    assert [u.to_dict() for u in snap.other_updates] == [{"sessionUpdate": "user_message", "messageId": "u"}]
    unstable = load_golden("unstable/agent")
    assert "name" in {f.name for f in dataclasses.fields(unstable.contrib.ToolCallView)}
    assert "other_updates" in {f.name for f in dataclasses.fields(unstable.contrib.SessionSnapshot)}
    assert "other_updates" not in {f.name for f in dataclasses.fields(contrib.SessionSnapshot)}
