"""Decode/encode speed of the generated types vs json.loads/json.dumps and the official SDK.

    .venv/bin/python benchmarks/bench_serde.py

Prints times and ratios measured side by side in one run, every row with the same loop shape
(a plain `for` loop that discards each result, the baselines included). The official SDK is PyPI
`agent-client-protocol==0.12.1` (a test/benchmark-only dependency): decode = json.loads +
SessionNotification.model_validate; encode = model_dump(mode="json", by_alias=True,
exclude_none=True) + json.dumps. With orjson importable the generated code uses it; the
`stdlib` rows force the plain-json path.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from _common import ROOT, best_of, chunk_lines, tool_update_lines

import agent.connection
import agent.serde as gs
import agent.types as gt


def measure(name: str, lines: list[str]) -> None:
    msgs = [json.loads(line) for line in lines]
    params = [m["params"] for m in msgs]
    objs = [gt.SessionNotification.from_dict(p) for p in params]
    assert [o.to_dict() for o in objs] == params

    # Every row has the same loop shape: one call per message, the result thrown away (a list
    # comprehension would keep 10,000 results alive and pay allocation/GC the loops do not).
    def plain_loads() -> None:
        for line in lines:
            json.loads(line)

    def plain_dumps() -> None:
        for m in msgs:
            json.dumps(m)

    t_loads = best_of(plain_loads)
    t_dumps = best_of(plain_dumps)

    def gen_decode() -> None:
        for line in lines:
            gt.SessionNotification.from_dict(gt.loads(line)["params"])

    def gen_encode() -> None:
        for o in objs:
            gt.dumps({"jsonrpc": "2.0", "method": "session/update", "params": o.to_dict()})

    rows: list[tuple[str, float, float]] = []
    saved = gs._orjson
    for label, impl in (("generated (orjson)", saved), ("generated (stdlib json)", None)):
        if label.endswith("(orjson)") and saved is None:
            continue
        gs._orjson = impl
        rows.append((label, best_of(gen_decode), best_of(gen_encode)))
    gs._orjson = saved
    try:
        from acp.schema import SessionNotification as SdkNotification

        def sdk_decode() -> None:
            for line in lines:
                SdkNotification.model_validate(json.loads(line)["params"])

        sdk_objs = [SdkNotification.model_validate(p) for p in params]

        def sdk_encode() -> None:
            for o in sdk_objs:
                json.dumps(
                    {"jsonrpc": "2.0", "method": "session/update",
                     "params": o.model_dump(mode="json", by_alias=True, exclude_none=True)}
                )

        rows.append(("official SDK 0.12.1", best_of(sdk_decode), best_of(sdk_encode)))
    except ImportError:
        print("  (official SDK not installed: pip install agent-client-protocol==0.12.1)")
    print(f"\n{name}: {len(lines)} messages, json.loads {t_loads * 1e3:.1f} ms, json.dumps {t_dumps * 1e3:.1f} ms")
    print(f"  {'':26} {'decode ms':>10} {'÷ loads':>8} {'encode ms':>10} {'÷ dumps':>8}")
    for label, dec, enc in rows:
        print(f"  {label:26} {dec * 1e3:10.1f} {dec / t_loads:7.2f}x {enc * 1e3:10.1f} {enc / t_dumps:7.2f}x")


def import_time(module: str, runs: int = 9) -> float:
    """Median time a fresh interpreter takes to import `module`, bytecode cached (as installed)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def run() -> float:
        code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT / "generated", env=env, capture_output=True, text=True, check=True
        )
        return float(out.stdout)

    run()  # writes the .pyc files, as an install or a first run would
    return statistics.median(run() for _ in range(runs))


def main() -> None:
    print(f"orjson available: {gs._orjson is not None}; connection uses orjson: {agent.connection._orjson is not None}")
    measure("agent_message_chunk", chunk_lines(10_000))
    measure("tool_call_update", tool_update_lines(1_000))
    ours = import_time("agent")
    try:
        sdk = import_time("acp")
        print(f"\nimport: generated package {ours * 1e3:.1f} ms, `import acp` {sdk * 1e3:.1f} ms, ratio {ours / sdk:.2f}x")
    except subprocess.CalledProcessError:
        print(f"\nimport: generated package {ours * 1e3:.1f} ms (official SDK not installed)")


if __name__ == "__main__":
    main()
