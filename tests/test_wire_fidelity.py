"""One wire: open fields encode the same with orjson and without it (issue 29 §1-§3).

One corpus (every builder, with open fields holding generated objects, nested dicts and lists,
unicode and large integers; and each awkward value: datetime, UUID, Enum, set, Decimal,
generator, tuple-keyed dict, NaN, infinity, a user dataclass...) goes through `to_json()`,
through `json.dumps(to_dict())` and through a real `Connection`'s send (tests/wire_corpus.py),
in this process (orjson importable) and in a subprocess where orjson cannot be imported. The
decoded JSON must be equal, or the same error raised, in all of them. The tests after it pin
what the outcomes are: conversions, refusals with the value's path, and no silent drop at send.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import wire_corpus
from agent import helpers, types
from agent.connection import Connection
from agent.dispatch import Dispatcher, RequestError
from agent.testing import MemoryStream, memory_streams
from test_helpers import POOLS, C, T, c, calls

pytest.importorskip("orjson")
ROOT = Path(__file__).resolve().parents[1]

DIFF = c("tool_diff_content", "/a.py", "new", "old")
TEXT = c("text_block", "héllo ✓")
# An open value with generated objects at depth, unicode, a big integer, null and empties.
OPEN = {"obj": DIFF, "deep": [TEXT, {"d": [DIFF, None, {}]}], "n": 2**70, "u": "日本 \U0001f600"}
EXTRA_BUILDERS = {  # ours beyond the SDK's, keyword-only
    "update_usage": c("update_usage", used=10, size=100, meta=OPEN),
    "update_session_info": c("update_session_info", title=None, meta=OPEN),
    "update_config_options": c("update_config_options", config_options=[], meta=OPEN),
}
CONVERTED = ["datetime", "date", "uuid", "enum", "int_key", "tuple", "big_int", "unicode"]
CONVERTED += ["lone_surrogate"]
REFUSED = ["set", "decimal", "generator", "tuple_key", "nan", "inf", "neg_inf", "dataclass"]


def tree(value: Any) -> Any:
    """A call tree of test_helpers as wire_corpus's JSON tree."""
    if isinstance(value, C):
        return {"c": value.name, "a": tree(list(value.args)), "k": tree(dict(value.kwargs))["d"]}
    if isinstance(value, T):
        return {"t": value.name, "f": tree(dict(value.fields))["d"]}
    if isinstance(value, list):
        return [tree(x) for x in value]
    if isinstance(value, dict):
        return {"d": {k: tree(x) for k, x in value.items()}}
    return value


def corpus() -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for name in POOLS:  # every SDK builder: its first call, and its call with every option
        every = calls(name)
        first, full = every[0], every[-1]
        if "meta" in helpers.__annotations__ or _takes_meta(name):
            full = C(full.name, full.args, (*full.kwargs, ("meta", OPEN)))
        cases[f"{name}:first"], cases[f"{name}:full"] = tree(first), tree(full)
    for name, call in EXTRA_BUILDERS.items():
        cases[f"{name}:full"] = tree(call)
    assert {n.split(":")[0] for n in cases} == set(helpers.__all__)
    for value in [*CONVERTED, *REFUSED]:
        v = {"v": value}
        cases[f"raw_input:{value}"] = tree(c("start_tool_call", "t", "T", raw_input={"v": DIFF}))
        cases[f"raw_input:{value}"]["k"]["raw_input"]["d"]["v"] = v
        cases[f"content:{value}"] = tree(c("start_edit_tool_call", "t", "E", "/a", {}))
        cases[f"content:{value}"]["a"][3] = {"d": {"v": v}}
        cases[f"meta:{value}"] = tree(c("update_agent_message_text", "hi", meta={}))
        cases[f"meta:{value}"]["k"]["meta"] = {"d": {"v": [v]}}
        cases[f"raw:{value}"] = {"d": {"rawInput": {"d": {"v": v}}}}  # a raw extension payload
    return cases


def _takes_meta(name: str) -> bool:
    import inspect

    return "meta" in inspect.signature(getattr(helpers, name)).parameters


@pytest.fixture(scope="module")
def both() -> tuple[dict[str, Any], dict[str, Any]]:
    cases = corpus()
    with_orjson = wire_corpus.run(cases)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "generated")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "wire_corpus.py")],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    without: dict[str, Any] = json.loads(done.stdout)
    return with_orjson, without


def test_same_outcome_with_and_without_orjson(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    with_orjson, without = both
    assert with_orjson.keys() == without.keys()
    for name in with_orjson:
        assert with_orjson[name] == without[name], name


def test_to_json_to_dict_and_the_connection_agree(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    for run in both:
        for name, outcomes in run.items():
            assert all(o == outcomes[0] for o in outcomes), (name, outcomes)
        for value in [*CONVERTED, *REFUSED]:  # a raw payload: the same value or problem
            raw, built = run[f"raw:{value}"][0], run[f"raw_input:{value}"][0]
            if raw[0] == "ok":
                assert raw[1]["rawInput"]["v"] == built[1]["rawInput"]["v"], value
            else:
                assert raw == built, value


def test_every_builder_encodes(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    diff = {"type": "diff", "path": "/a.py", "newText": "new", "oldText": "old"}
    for run in both:
        for name, outcomes in run.items():
            if name.endswith((":first", ":full")):
                assert outcomes[0][0] == "ok", (name, outcomes[0])
        meta = run["update_usage:full"][0][1]["_meta"]
        assert meta == {
            "obj": diff,
            "deep": [{"type": "text", "text": "héllo ✓"}, {"d": [diff, None, {}]}],
            "n": 2**70,
            "u": "日本 \U0001f600",
        }


def test_documented_conversions(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    want = {
        "datetime": "2024-01-02T03:04:05+00:00",
        "date": "2024-01-02",
        "uuid": "12345678-1234-5678-1234-567812345678",
        "enum": "red",
        "int_key": {"1": "x", "null": "y", "2.5": "z"},
        "tuple": [1, "a", [2]],
        "big_int": -(2**100),
        "unicode": "héllo ✓ 日本 \U0001f600",
        "lone_surrogate": "a\ud800b",
    }
    assert set(want) == set(CONVERTED)
    for run in both:
        for value, wire in want.items():
            kind, sent = run[f"raw_input:{value}"][0]
            assert kind == "ok" and sent["rawInput"]["v"] == wire, value
            assert run[f"content:{value}"][0][1]["rawInput"]["content"]["v"] == wire, value
            assert run[f"meta:{value}"][0][1]["_meta"]["v"] == [wire], value


@pytest.mark.parametrize("value", REFUSED)
def test_non_json_is_refused_both_ways(
    both: tuple[dict[str, Any], dict[str, Any]], value: str
) -> None:
    for run in both:
        for where in ("raw_input", "content", "meta", "raw"):
            assert run[f"{where}:{value}"][0][0] == "error", (where, value)


# -- the error names the value's path, where the user builds or sends --------------------------
PATHS = {
    "set": ("TypeError", "a set is not JSON"),
    "decimal": ("TypeError", "a Decimal is not JSON"),
    "generator": ("TypeError", "a generator is not JSON"),
    "tuple_key": ("TypeError", "a tuple key is not JSON"),
    "dataclass": ("TypeError", "a Point is not JSON"),
    "nan": ("ValueError", "nan is not JSON"),
    "inf": ("ValueError", "inf is not JSON"),
}


@pytest.mark.parametrize("value", PATHS)
def test_the_error_names_the_path(value: str) -> None:
    kind, problem = PATHS[value]
    bad = wire_corpus.AWKWARD[value]()
    call = helpers.start_edit_tool_call("t", "E", "/a", {"when": [0, {"x": bad}]})
    for encode in (call.to_dict, call.to_json):
        with pytest.raises((TypeError, ValueError)) as info:
            encode()
        assert type(info.value).__mro__[1].__name__ == kind
        assert str(info.value).startswith(f"rawInput.content.when[1].x: {problem}"), info.value
    meta = helpers.update_agent_message_text("hi", meta={"k": bad})
    with pytest.raises((TypeError, ValueError), match=r"^_meta\.k: "):
        meta.to_dict()
    unknown = types.TextContent(text="hi", extra={"future": {"k": bad}})
    with pytest.raises((TypeError, ValueError), match=r"^future\.k: "):
        unknown.to_dict()
    with pytest.raises((TypeError, ValueError), match=r"^params\.rawInput\.k: "):
        asyncio.run(_notify({"rawInput": {"k": bad}}))


async def _notify(params: Any) -> None:
    connection = Connection(Dispatcher(object(), frozenset()), MemoryStream(), MemoryStream())
    await connection.notify("_x/y", params)


def test_a_generated_object_in_a_generated_object_keeps_its_path() -> None:
    inner = helpers.start_edit_tool_call("t", "E", "/a", {"s": {1}})
    with pytest.raises(TypeError, match=r"^rawInput\.content\.s: a set"):
        types.SessionNotification(session_id="s", update=inner).to_json()
    holder = helpers.update_agent_message_text("hi", meta={"call": inner})
    with pytest.raises(TypeError, match=r"^_meta\.call\.rawInput\.content\.s: a set"):
        holder.to_dict()


def test_plain_open_values_are_not_copied() -> None:
    raw = {"a": [1, 2.5, "x", None, True, {"b": []}]}
    assert helpers.start_tool_call("t", "T", raw_input=raw).to_dict()["rawInput"] is raw


def test_deep_open_values_are_left_to_the_encoder() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    call = helpers.start_tool_call("t", "T", raw_input=deep)
    assert call.to_dict()["rawInput"] is deep  # too deep to walk: not refused by the walk
    with pytest.raises(ValueError, match="nested too deeply"):
        call.to_json()


# -- no silent drops at send (§3) --------------------------------------------------------------
def test_a_request_that_cannot_be_encoded_raises_locally() -> None:
    async def scenario() -> None:
        (reader, writer), (peer_reader, peer_writer) = memory_streams()
        connection = Connection(Dispatcher(object(), frozenset()), reader, writer)
        with pytest.raises(TypeError, match=r"^params\.v: a set is not JSON"):
            await connection.request("_x/y", {"v": {1}}, timeout=5)
        with pytest.raises(ValueError, match=r"^params\.v\[0\]: nan is not JSON"):
            await connection.notify("_x/y", {"v": [float("nan")]})
        assert connection.stats()["pending"] == 0
        assert peer_reader._buffer == b""  # nothing reached the peer
        await connection.notify("_x/y", {"v": 1})  # the connection still works
        assert json.loads(await peer_reader.read())["params"] == {"v": 1}
        peer_writer.close()

    asyncio.run(scenario())


class _Refuses:
    async def ext_method(self, method: str, params: Any) -> Any:
        raise RequestError(-32000, "no", {"bad": {1, 2}})


def test_error_data_that_cannot_be_encoded_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> Any:
        (reader, writer), (peer_reader, peer_writer) = memory_streams()
        connection = Connection(Dispatcher(_Refuses(), frozenset()), reader, writer)
        task = asyncio.ensure_future(connection.run())
        peer_writer.write(b'{"jsonrpc":"2.0","id":7,"method":"_x/ask","params":{}}\n')
        answer = json.loads(await asyncio.wait_for(peer_reader.read(), 5))
        peer_writer.close()
        await asyncio.wait_for(task, 5)
        return answer

    with caplog.at_level(logging.ERROR):
        answer = asyncio.run(scenario())
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32000, "message": "no"}}
    logged = [r.getMessage() for r in caplog.records]
    assert any("_x/ask" in m and "error.data.bad: a set is not JSON" in m for m in logged), logged
