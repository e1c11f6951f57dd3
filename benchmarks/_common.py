"""Shared helpers for the benchmarks: workloads and a best-of-N timer."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))

TEXT_200 = ("The quick brown fox jumps over the lazy dog; " * 5)[:200]
DIFF_OLD = "\n".join(f"    line {i}: value = compute({i}, factor)" for i in range(4))
DIFF_NEW = DIFF_OLD.replace("factor", "factor * 2")


def chunk_lines(n: int) -> list[str]:
    """`n` session/update notifications (full JSON-RPC lines), agent_message_chunk of ~200 chars."""
    return [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "sess_abc123def456",
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": f"{i:05d} {TEXT_200[6:]}"},
                    },
                },
            }
        )
        for i in range(n)
    ]


def tool_update_lines(n: int) -> list[str]:
    """`n` tool_call_update notifications: text content, a ~300-char diff, locations, rawInput."""
    return [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "sess_abc123def456",
                    "update": {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": f"call_{i:04d}",
                        "status": "completed",
                        "kind": "edit",
                        "title": "Editing src/compute.py",
                        "content": [
                            {"type": "content", "content": {"type": "text", "text": "Applied the edit."}},
                            {"type": "diff", "path": "/home/user/project/src/compute.py",
                             "oldText": DIFF_OLD, "newText": DIFF_NEW},
                        ],
                        "locations": [{"path": "/home/user/project/src/compute.py", "line": 42}],
                        "rawInput": {"path": "/home/user/project/src/compute.py", "edits": [{"line": 42}]},
                    },
                },
            }
        )
        for i in range(n)
    ]


def best_of(fn: Callable[[], Any], repeat: int = 7) -> float:
    """The fastest of `repeat` runs, in seconds (least disturbed by the rest of the machine)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
