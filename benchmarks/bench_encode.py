"""The connection's send path, `jsonline.dumps`, against `json.dumps` of the same dict (issue 31 §3).

    .venv/bin/python benchmarks/bench_encode.py          # stdlib mode (orjson blocked)
    .venv/bin/python benchmarks/bench_encode.py --orjson # with orjson, where installed
    .venv/bin/python benchmarks/bench_encode.py --why    # the 10 MB ASCII row, step by step

`jsonline.dumps(message)` is what `Connection` writes for every message: one line of bytes with
its newline. It is timed side by side with `json.dumps(message)` (default settings: a str, no
newline) and `json.dumps(message).encode()` (the same, as bytes), rows interleaved round by
round so a busy machine disturbs them alike, each row the fastest round in CPU time of this
thread. Payloads: 2,000 `agent_message_chunk` notifications in ASCII and in non-ASCII text,
200 `tool_call_update` notifications with a diff, a 10 MB ASCII and a 10 MB non-ASCII
`rawOutput` result. Every output is checked: it decodes to the same JSON as `json.dumps`'s.
Goal: `jsonline.dumps` ≤ 1.05× `json.dumps` in stdlib mode, on every payload.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

if "--orjson" not in sys.argv:
    sys.modules["orjson"] = None  # importing orjson now fails: the standard library path

from _common import DIFF_NEW, DIFF_OLD, TEXT_200  # first: it puts generated/ on sys.path

# isort: split
import agent.jsonline

NON_ASCII = ("Le renard brun rapide saute — 日本語のテキスト ✓ ü " * 6)[:200]


def chunk(i: int, text: str) -> dict[str, Any]:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"{i} {text}"}}
    params = {"sessionId": "sess_abc123def456", "update": update}
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


def tool_update(i: int) -> dict[str, Any]:
    path = "/home/user/project/src/compute.py"
    update = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": f"call_{i:04d}",
        "status": "completed",
        "content": [{"type": "diff", "path": path, "oldText": DIFF_OLD * 8, "newText": DIFF_NEW * 8}],
        "rawInput": {"path": path, "edits": [{"line": 42, "factor": 2.5}]},
    }
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}


def result(raw: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": {"rawOutput": raw}}


PAYLOADS: dict[str, tuple[list[dict[str, Any]], int]] = {  # name -> (messages, rounds)
    "2,000 chunks, ASCII": ([chunk(i, TEXT_200) for i in range(2000)], 25),
    "2,000 chunks, non-ASCII": ([chunk(i, NON_ASCII) for i in range(2000)], 25),
    "200 tool_call_update with a diff": ([tool_update(i) for i in range(200)], 25),
    "10 MB rawOutput, ASCII": ([result("x" * 10_000_000)], 15),
    "10 MB rawOutput, non-ASCII": ([result("日本語é" * 2_000_000)], 9),
}
ROWS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "json.dumps": json.dumps,
    "json.dumps + encode": lambda m: json.dumps(m).encode(),
    "jsonline.dumps": agent.jsonline.dumps,
}


def measure(messages: list[dict[str, Any]], rounds: int) -> dict[str, float]:
    best = dict.fromkeys(ROWS, float("inf"))
    for _ in range(rounds):
        for label, fn in ROWS.items():
            start = time.thread_time()
            for m in messages:
                fn(m)
            best[label] = min(best[label], time.thread_time() - start)
    return best


def why(rounds: int = 25) -> None:
    """`--why`: where `jsonline.dumps` spends more than `json.dumps` on the 10 MB ASCII payload,
    one step at a time (the standard library's C encoder, made once, as jsonline calls it)."""
    message = PAYLOADS["10 MB rawOutput, ASCII"][0][0]
    make = json.encoder.c_make_encoder  # type: ignore[attr-defined]
    ascii_chunks = make(None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, False)
    utf8_chunks = agent.jsonline._chunks
    steps: dict[str, Callable[[dict[str, Any]], Any]] = {
        "json.dumps": json.dumps,
        "C encoder, ASCII escaper (json.dumps's)": lambda m: "".join(ascii_chunks(m, 0)),
        "C encoder, UTF-8 escaper (jsonline's)": lambda m: "".join(utf8_chunks(m, 0)),
        "  + .encode()": lambda m: "".join(utf8_chunks(m, 0)).encode(),
        "  + newline (= jsonline.dumps)": agent.jsonline.dumps,
    }
    best = dict.fromkeys(steps, float("inf"))
    faults = dict.fromkeys(steps, 0)  # minor page faults of the step, summed over the rounds
    for _ in range(rounds):
        for label, fn in steps.items():
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.thread_time()
            fn(message)
            best[label] = min(best[label], time.thread_time() - start)
            faults[label] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    base = best["json.dumps"]
    print(f"10 MB ASCII rawOutput, step by step, best of {rounds}, load {os.getloadavg()[0]:.2f}")
    for label, t in best.items():
        print(f"  {label:42} {t * 1e3:7.2f} ms  {t / base:.3f}x  page faults/call {faults[label] / rounds:7.0f}")
    # A 10 MB block the allocator has just given back to the system costs ~2,440 faults (about
    # 4 ms here) when touched again: which step gets fresh memory depends on what ran before it,
    # more than the copies themselves (~0.3 ms each).


def main() -> None:
    if "--why" in sys.argv:
        why()
        return
    mode = "orjson" if agent.jsonline._orjson is not None else "stdlib"
    print(f"jsonline.dumps vs json.dumps, {mode} mode, load {os.getloadavg()[0]:.2f} (1-min average)")
    worst = 0.0
    for name, (messages, rounds) in PAYLOADS.items():
        for m in messages[:3]:  # identical decoded JSON, or the row is meaningless
            assert json.loads(agent.jsonline.dumps(m)) == json.loads(json.dumps(m)), name
        best = measure(messages, rounds)
        base = best["json.dumps"]
        ratio = best["jsonline.dumps"] / base
        worst = max(worst, ratio)
        cells = "  ".join(f"{label} {t * 1e3:8.2f} ms ({t / base:.2f}x)" for label, t in best.items())
        print(f"{name:34} {cells}")
    goal = "met" if worst <= 1.05 else f"missed by {worst / 1.05 - 1:.0%}"
    print(f"worst jsonline.dumps / json.dumps: {worst:.2f}x (goal <= 1.05x: {goal})")


if __name__ == "__main__":
    main()
