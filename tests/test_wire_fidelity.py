"""Open fields encode the same with orjson and without it (issue 29 §1-§2).

One corpus of values placed in open fields (`rawInput`, `_meta`, `extra`) goes through
`to_json()` and through `jsonline.dumps` (the connection's send path), in a subprocess with
orjson importable and in one where importing it fails: the decoded JSON must be equal, or the
same error type raised. Generated objects in open fields must encode as their own `to_dict()`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("orjson")

_CORPUS = textwrap.dedent(
    """
    import datetime, enum, json, math, sys, uuid
    if sys.argv[1] == "off":
        sys.modules["orjson"] = None  # importing it now fails
    from agent import helpers, jsonline, types

    class Color(enum.Enum):
        RED = "red"

    diff = helpers.tool_diff_content("/a.py", "new", "old")
    text = helpers.text_block("héllo ✓")
    cases = {
        "edit_diff": lambda: helpers.start_edit_tool_call("t1", "Edit", "/a.py", diff),
        "nested": lambda: helpers.start_edit_tool_call(
            "t1", "Edit", "/a.py", {"a": [diff, {"b": (text,)}], "n": 2**70, "u": "日本"}
        ),
        "meta_object": lambda: helpers.start_read_tool_call(
            "t2", "Read", "/a.py", meta={"block": text}
        ),
        "uuid": lambda: helpers.start_edit_tool_call(
            "t1", "E", "/a", uuid.UUID("12345678-1234-5678-1234-567812345678")
        ),
        "datetime": lambda: helpers.start_edit_tool_call(
            "t1", "E", "/a", datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
        ),
        "enum": lambda: helpers.start_edit_tool_call("t1", "E", "/a", Color.RED),
        "nan": lambda: helpers.start_edit_tool_call("t1", "E", "/a", math.nan),
        "inf": lambda: helpers.start_edit_tool_call("t1", "E", "/a", {"x": [math.inf]}),
        "null_kept": lambda: helpers.start_edit_tool_call("t1", "E", "/a", None),
        "set": lambda: helpers.start_edit_tool_call("t1", "E", "/a", {1, 2}),
        "unset": lambda: helpers.start_edit_tool_call("t1", "E", "/a", types.UNSET),
    }
    out = {}
    for name, build in cases.items():
        obj = build()
        res = []
        for encode in (
            lambda: obj.to_json(),
            lambda: jsonline.dumps({"jsonrpc": "2.0", "method": "m", "params": obj.to_dict()}),
        ):
            try:
                res.append(["ok", json.loads(encode())])
            except (TypeError, ValueError) as exc:
                res.append(["error", type(exc).__name__])
        out[name] = res
    print(json.dumps(out))
    """
)


def _run(mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CORPUS, mode],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1] / "generated",
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def both() -> tuple[dict[str, Any], dict[str, Any]]:
    return _run("on"), _run("off")


def test_same_outcome_with_and_without_orjson(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    with_orjson, without = both
    assert with_orjson == without


def _raw_input(case: list[Any]) -> Any:
    kind, value = case
    assert kind == "ok", case
    return value["rawInput"]["content"]


def test_a_diff_in_raw_input_is_its_wire_form(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    for run in both:
        to_json, sent = run["edit_diff"]
        want = {"type": "diff", "path": "/a.py", "newText": "new", "oldText": "old"}
        assert _raw_input(to_json) == want
        assert sent[1]["params"]["rawInput"]["content"] == want


def test_nested_objects_and_big_ints(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    for run in both:
        content = _raw_input(run["nested"][0])
        assert content["a"][0]["newText"] == "new"
        assert content["a"][1]["b"] == [{"type": "text", "text": "héllo ✓"}]
        assert content["n"] == 2**70 and content["u"] == "日本"
        assert run["meta_object"][0][1]["_meta"]["block"]["type"] == "text"


def test_documented_conversions(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    for run in both:
        assert _raw_input(run["uuid"][0]) == "12345678-1234-5678-1234-567812345678"
        assert _raw_input(run["datetime"][0]) == "2024-01-02T03:04:05+00:00"
        assert _raw_input(run["enum"][0]) == "red"
        assert _raw_input(run["null_kept"][0]) is None


@pytest.mark.parametrize("name", ["nan", "inf", "set"])
def test_non_json_is_refused_both_ways(
    both: tuple[dict[str, Any], dict[str, Any]], name: str
) -> None:
    for run in both:
        assert [kind for kind, _ in run[name]] == ["error", "error"], run[name]
