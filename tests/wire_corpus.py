"""The one-wire corpus of tests/test_wire_fidelity.py (issue 29 §2), run two ways.

`run(cases)` evaluates each case (a builder call written as a JSON tree, see `evaluate`) with
the golden agent package, and records what `to_json()` gives and what a real `Connection`
writes for it (over in-memory streams): the decoded JSON, or the error's type and problem.
The test calls `run` in its own process (orjson importable) and runs this file as a script,
which blocks orjson before the package is imported and reads the cases on stdin.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    sys.modules["orjson"] = None  # importing orjson now fails: the standard library path

import asyncio
import dataclasses
import datetime
import decimal
import enum
import json
import math
import uuid
from collections.abc import Iterator
from typing import Any


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    """A user's own dataclass: not JSON (orjson would write its attributes)."""

    x: int = 1


def _gen() -> Iterator[int]:
    yield 1


# The awkward values, by name: built here, since most cannot travel as JSON.
AWKWARD: dict[str, Any] = {
    "datetime": lambda: datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
    "date": lambda: datetime.date(2024, 1, 2),
    "uuid": lambda: uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "enum": lambda: Color.RED,
    "set": lambda: {1, 2},
    "decimal": lambda: decimal.Decimal("1.5"),
    "generator": _gen,
    "tuple_key": lambda: {(1, 2): "x"},
    "int_key": lambda: {1: "x", None: "y", 2.5: "z"},
    "tuple": lambda: (1, "a", [2]),
    "nan": lambda: math.nan,
    "inf": lambda: math.inf,
    "neg_inf": lambda: -math.inf,
    "dataclass": Point,
    "big_int": lambda: -(2**100),
    "unicode": lambda: "héllo ✓ 日本 \U0001f600",
    "lone_surrogate": lambda: "a\ud800b",
}


def evaluate(tree: Any, helpers: Any, types: Any) -> Any:
    """A case tree: {"c": builder, "a": [args], "k": {kwargs}} calls a builder, {"t": class,
    "f": {fields}} builds a class, {"v": name} is an AWKWARD value; lists and dicts hold trees."""
    if isinstance(tree, list):
        return [evaluate(x, helpers, types) for x in tree]
    if not isinstance(tree, dict):
        return tree
    if "c" in tree:
        args = [evaluate(a, helpers, types) for a in tree["a"]]
        kwargs = {k: evaluate(v, helpers, types) for k, v in tree["k"].items()}
        return getattr(helpers, tree["c"])(*args, **kwargs)
    if "t" in tree:
        fields = {k: evaluate(v, helpers, types) for k, v in tree["f"].items()}
        return getattr(types, tree["t"])(**fields)
    if "v" in tree:
        return AWKWARD[tree["v"]]()
    return {k: evaluate(v, helpers, types) for k, v in tree["d"].items()}


def _outcome(encode: Any) -> list[Any]:
    try:
        return ["ok", json.loads(encode())]
    except (TypeError, ValueError) as exc:
        return ["error", type(exc).__name__, getattr(exc, "problem", str(exc))]


async def _sent(connection: Any, out: Any, params: Any) -> list[Any]:
    """What the connection writes for a notification with `params`, or the error it raises."""
    try:
        await connection.notify("_wire/corpus", params)
    except (TypeError, ValueError) as exc:
        return ["error", type(exc).__name__, getattr(exc, "problem", str(exc))]
    line: bytes = await asyncio.wait_for(out.read(), 5)
    assert line.endswith(b"\n") and line.count(b"\n") == 1, line
    return ["ok", json.loads(line)["params"]]


def run(cases: dict[str, Any]) -> dict[str, Any]:
    """Per case: [to_json(), json.dumps(to_dict()), the connection's send of to_dict()], or for a
    value that is no generated object (a raw dict), [the connection's send of that value]."""
    from agent import helpers, types
    from agent.connection import Connection
    from agent.dispatch import Dispatcher
    from agent.testing import MemoryStream

    async def main() -> dict[str, Any]:
        out = MemoryStream()
        connection = Connection(Dispatcher(object(), frozenset()), MemoryStream(), out)
        results: dict[str, Any] = {}
        for name, tree in cases.items():
            try:
                value = evaluate(tree, helpers, types)
            except (TypeError, ValueError) as exc:  # a builder that refuses its arguments
                results[name] = [["error", type(exc).__name__, str(exc)]]
                continue
            if hasattr(value, "to_json"):
                to_dict = _outcome(lambda: json.dumps(value.to_dict()))  # noqa: B023 (called at once)
                sent: list[Any] = ["error", *to_dict[1:]]
                if to_dict[0] == "ok":
                    sent = await _sent(connection, out, value.to_dict())
                results[name] = [_outcome(value.to_json), to_dict, sent]
            else:
                results[name] = [await _sent(connection, out, value)]
        return results

    return asyncio.run(main())


if __name__ == "__main__":
    print(json.dumps(run(json.load(sys.stdin))))
