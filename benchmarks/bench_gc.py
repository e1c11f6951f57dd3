"""Large messages and the cyclic GC (issue 31 §2): a `tool_call_update` of 100,000 content items.

    .venv/bin/python benchmarks/bench_gc.py                      # this checkout's generated/
    .venv/bin/python benchmarks/bench_gc.py --generated OTHER    # another copy, for before/after
    .venv/bin/python benchmarks/bench_gc.py --stdlib             # orjson blocked

Times, in CPU time of this thread (best of 7, rows interleaved), the connection's parse of the
line (`jsonline.loads`, or `loads_held` where the checkout has it, as `Connection` calls it) and
`SessionNotification.from_dict` of its params, each with the collector on (as in a program) and
off (the floor). A decode that holds the collector off leaves it a collection owed: the
"+ owed" column adds the 1,000 small allocations after the decode that pay for it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def message(n: int) -> dict[str, Any]:
    item = {"type": "content", "content": {"type": "text", "text": "item"}}
    update = {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [dict(item) for _ in range(n)]}
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}


def timed(fn: Callable[[], Any], collector: bool) -> tuple[float, float]:
    gc.collect()
    if not collector:
        gc.disable()
    try:
        start = time.thread_time()
        value = fn()
        done = time.thread_time()
        owed = [[] for _ in range(1000)]  # a collection owed by the decode runs here
        after = time.thread_time()
    finally:
        gc.enable()
    del value, owed
    return done - start, after - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--generated", default=str(ROOT / "generated"))
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--stdlib", action="store_true", help="block orjson: the standard library's parser")
    args = parser.parse_args()
    if args.stdlib:
        sys.modules["orjson"] = None  # type: ignore[assignment]  # importing orjson now fails
    sys.path.insert(0, args.generated)
    import agent.jsonline as jl
    import agent.types as gt

    msg = message(args.items)
    line = json.dumps(msg).encode()
    held = getattr(jl, "loads_held", jl.loads)
    parse = held if len(line) >= getattr(jl, "HELD_FROM", 0) else jl.loads
    rows: dict[str, Callable[[], Any]] = {
        "parse (jsonline)": lambda: parse(line),
        "from_dict": lambda: gt.SessionNotification.from_dict(msg["params"]),
    }
    best = {(label, on): (float("inf"), float("inf")) for label in rows for on in (True, False)}
    for _ in range(7):
        for label, fn in rows.items():
            for on in (True, False):
                t, t_owed = timed(fn, on)
                b = best[label, on]
                best[label, on] = (min(b[0], t), min(b[1], t_owed))
    print(f"{args.generated}: {args.items:,} items, line {len(line) / 1e6:.1f} MB, orjson {jl._orjson is not None},"
          f" load {os.getloadavg()[0]:.2f}")
    for label in rows:
        on, off = best[label, True], best[label, False]
        print(f"  {label:18} gc on {on[0] * 1e3:7.1f} ms (+ owed {on[1] * 1e3:7.1f})   gc off {off[0] * 1e3:7.1f} ms"
              f"   gc share {1 - off[1] / on[1]:.0%}")


if __name__ == "__main__":
    main()
