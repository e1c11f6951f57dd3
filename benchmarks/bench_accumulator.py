"""`contrib.SessionAccumulator.apply` over a growing session: total time at 1k, 10k and 100k
agent_message_chunk notifications (every 50th a tool_call_update), next to the official SDK's
`acp.contrib.SessionAccumulator` on the same decoded notifications.

    .venv/bin/python benchmarks/bench_accumulator.py

Goal (issue 29 §4): apply costs time proportional to the update, not to the session, so the
per-chunk time at 100k is within 2x of that at 1k (linear total time). The SDK copies its
whole state into each snapshot (quadratic total time): its run stops at a time cap and the
chunks it got through are shown. Times are CPU time of this thread (`time.thread_time`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from _common import chunk_lines, tool_update_lines  # first: it puts generated/ on sys.path

# isort: split
import client.contrib as gc
import client.types as gt

SIZES = (1_000, 10_000, 100_000)
SDK_CAP_S = 10.0  # the SDK's quadratic run would take hours at 100k: stop it here


def notifications(n: int) -> list[dict[str, Any]]:
    chunks, tools = chunk_lines(n), tool_update_lines(max(1, n // 50))
    out = [json.loads(line)["params"] for line in chunks]
    for i, line in enumerate(tools):
        out[i * 50] = json.loads(line)["params"]
    return out


def ours(params: list[dict[str, Any]]) -> tuple[float, int]:
    decoded = [gt.SessionNotification.from_dict(p) for p in params]
    acc = gc.SessionAccumulator()
    start = time.thread_time()
    for note in decoded:
        acc.apply(note)
    elapsed = time.thread_time() - start
    messages = sum(1 for p in params if "content" in p["update"] and "toolCallId" not in p["update"])
    assert len(acc.snapshot().agent_messages) == messages
    return elapsed, len(decoded)


def sdk(params: list[dict[str, Any]]) -> tuple[float, int]:
    from acp.contrib import SessionAccumulator
    from acp.schema import SessionNotification

    decoded = [SessionNotification.model_validate(p) for p in params]
    acc = SessionAccumulator()
    start = time.thread_time()
    done = 0
    for note in decoded:
        acc.apply(note)
        done += 1
        if done % 100 == 0 and time.thread_time() - start > SDK_CAP_S:
            break
    return time.thread_time() - start, done


def main() -> None:
    print(f"{'chunks':>8} {'ours total':>11} {'ours µs/apply':>14} {'SDK applies':>12} {'SDK µs/apply':>13}")
    per: dict[int, float] = {}
    for n in SIZES:
        params = notifications(n)
        t, k = ours(params)
        per[n] = t / k * 1e6
        st, sk = sdk(params)
        capped = "" if sk == n else f" (capped at {SDK_CAP_S:.0f} s)"
        print(f"{n:>8} {t:>10.3f}s {per[n]:>14.1f} {sk:>12}{capped} {st / sk * 1e6:>13.1f}")
    ratio = per[SIZES[-1]] / per[SIZES[0]]
    verdict = "meets" if ratio <= 2.0 else "MISSES"
    print(f"per-apply time at {SIZES[-1]} / at {SIZES[0]}: {ratio:.2f} (goal <= 2.0: {verdict})")


if __name__ == "__main__":
    main()
