"""Decode/encode speed of the generated types vs json.loads/json.dumps and the official SDK.

    .venv/bin/python benchmarks/bench_serde.py            # with orjson, when it is installed
    .venv/bin/python benchmarks/bench_serde.py --stdlib   # orjson blocked: the stdlib-only figures

Prints times and ratios measured side by side in one run, every row with the same loop shape
(a plain `for` loop that discards each result, the baselines included), rows interleaved batch
by batch so a busy machine disturbs them alike, each batch timed in CPU time of this thread
(`time.thread_time`: time the thread waits for a core is not counted; on a quiet machine it
equals wall time). Decode rows besides `json.loads`: the standard library's scanner alone (the
C function `json.loads` wraps, with none of its Python layers: the floor of any stdlib parse),
the generated `loads` alone (its parse: that scanner called directly), and the generated decode
(`loads` + `from_dict`), so what parsing and what `from_dict` cost shows apart.

The official SDK is PyPI `agent-client-protocol==0.12.1` (a test/benchmark-only dependency):
decode = json.loads + SessionNotification.model_validate; encode = model_dump(mode="json",
by_alias=True, exclude_none=True) + json.dumps. With orjson importable the generated code uses it; the
`stdlib` rows force the plain-json path.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from json.scanner import make_scanner
from typing import Any, cast

# --stdlib: as on a machine without orjson (blocked before the generated package is imported).
if "--stdlib" in sys.argv[1:]:
    sys.modules["orjson"] = None  # type: ignore[assignment]

from _common import ROOT, chunk_lines, tool_update_lines  # noqa: E402, I001  (puts generated/ on sys.path)

import agent.jsonline  # noqa: E402
import agent.serde as gs  # noqa: E402
import agent.types as gt  # noqa: E402

SDK = "official SDK 0.12.1"
SCANNER = "stdlib scanner alone"
CONNECTION = "generated, connection path"
SCAN = make_scanner(cast(Any, json.JSONDecoder()))  # what json.loads calls, without its Python layers


BATCH = 250  # messages per timed call: short enough to run between preemptions on a busy machine


def interleaved(rows: dict[str, Callable[[list[Any]], None]], items: list[Any], rounds: int = 7) -> dict[str, float]:
    """Time every row over the same items in the same run: per batch, the fastest of `rounds`
    interleaved runs (round-robin over the rows, so load shifts hit all rows alike), summed."""
    batches = [items[i : i + BATCH] for i in range(0, len(items), BATCH)]
    best = {label: [float("inf")] * len(batches) for label in rows}
    for _ in range(rounds):
        for b, batch in enumerate(batches):
            for label, fn in rows.items():
                start = time.thread_time()
                fn(batch)
                best[label][b] = min(best[label][b], time.thread_time() - start)
    return {label: sum(times) for label, times in best.items()}


def measure(name: str, lines: list[str]) -> None:
    msgs = [json.loads(line) for line in lines]
    params = [m["params"] for m in msgs]
    objs = [gt.SessionNotification.from_dict(p) for p in params]
    assert [o.to_dict() for o in objs] == params

    # Every row has the same loop shape: one call per message, the result thrown away (a list
    # comprehension would keep every result alive and pay allocation/GC the loops do not).
    def plain_loads(batch: list[str]) -> None:
        for line in batch:
            json.loads(line)

    def scanner_only(batch: list[str]) -> None:
        for line in batch:
            SCAN(line, 0)

    def gen_loads(batch: list[str]) -> None:
        for line in batch:
            gt.loads(line)["params"]

    def gen_decode(batch: list[str]) -> None:
        for line in batch:
            gt.SessionNotification.from_dict(gt.loads(line)["params"])

    # The connection reads bytes: each line's, encoded beforehand (the lookup costs ~1% of a row).
    raw = {line: line.encode() for line in lines}
    line_loads = agent.jsonline.loads

    def conn_decode(batch: list[str]) -> None:
        for line in batch:
            gt.SessionNotification.from_dict(line_loads(raw[line])["params"])

    decode_rows: dict[str, Callable[[list[Any]], None]] = {
        "json.loads": plain_loads,
        SCANNER: scanner_only,
    }
    if gs._orjson is not None:
        orjson_loads = gs._orjson.loads

        def orjson_only(batch: list[str]) -> None:
            for line in batch:
                orjson_loads(line)

        decode_rows["orjson.loads alone"] = orjson_only
    decode_rows["generated loads alone"] = gen_loads
    decode_rows["generated"] = gen_decode
    # What the connection runs: the line's bytes through jsonline.loads, then the params' decoder.
    decode_rows[CONNECTION] = conn_decode

    def plain_dumps(batch: list[int]) -> None:
        for i in batch:
            json.dumps(msgs[i])

    def gen_encode(orjson: Any) -> Callable[[list[int]], None]:
        def run(batch: list[int]) -> None:
            gs._orjson = orjson
            for i in batch:
                gt.dumps({"jsonrpc": "2.0", "method": "session/update", "params": objs[i].to_dict()})

        return run

    saved = gs._orjson
    encode_rows: dict[str, Callable[[list[Any]], None]] = {"json.dumps": plain_dumps}
    if saved is not None:
        encode_rows["generated (orjson)"] = gen_encode(saved)
    encode_rows["generated (stdlib json)"] = gen_encode(None)
    try:
        from acp.schema import SessionNotification as SdkNotification

        def sdk_decode(batch: list[str]) -> None:
            for line in batch:
                SdkNotification.model_validate(json.loads(line)["params"])

        sdk_objs = [SdkNotification.model_validate(p) for p in params]

        def sdk_encode(batch: list[int]) -> None:
            for i in batch:
                json.dumps(
                    {"jsonrpc": "2.0", "method": "session/update",
                     "params": sdk_objs[i].model_dump(mode="json", by_alias=True, exclude_none=True)}
                )

        decode_rows[SDK] = sdk_decode
        encode_rows[SDK] = sdk_encode
    except ImportError:
        print("  (official SDK not installed: pip install agent-client-protocol==0.12.1)")
    dec = interleaved(decode_rows, lines)
    enc = interleaved(encode_rows, list(range(len(msgs))))
    gs._orjson = saved
    t_loads, t_dumps = dec["json.loads"], enc["json.dumps"]
    print(f"\n{name}: {len(lines)} messages, json.loads {t_loads * 1e3:.1f} ms, json.dumps {t_dumps * 1e3:.1f} ms")
    print(f"  {'decode (loads + from_dict)':26} {'ms':>8} {'÷ loads':>8}")
    for label, t in dec.items():
        print(f"  {label:26} {t * 1e3:8.1f} {t / t_loads:7.2f}x")
    parse, total = dec["generated loads alone"], dec["generated"]
    print(f"  (generated: parse {parse / t_loads:.2f}x + from_dict {(total - parse) / t_loads:.2f}x of json.loads)")
    print(f"  {'encode (to_dict + dumps)':26} {'ms':>8} {'÷ dumps':>8}")
    for label, t in enc.items():
        print(f"  {label:26} {t * 1e3:8.1f} {t / t_dumps:7.2f}x")


def large_lines() -> dict[str, bytes]:
    """Large messages (issue 31 §2): diffs of 2 and 20 KB, 10 MB of floats in `rawOutput`, 10 MB of text."""

    def line(update: dict[str, Any]) -> bytes:
        params = {"sessionId": "s", "update": {"toolCallId": "c", **update}}
        return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}).encode()

    def diff(size: int) -> bytes:
        old = "\n".join(f"    line {i}: value = compute({i}, factor)" for i in range(size // 40))
        new = old.replace("factor", "factor * 2")
        content = [{"type": "diff", "path": "/p/x.py", "oldText": old, "newText": new}]
        return line({"sessionUpdate": "tool_call_update", "status": "completed", "content": content})

    floats = random.Random(1)
    text = {"type": "text", "text": "abcdefgh " * 1_100_000}
    return {
        "diff 2 KB": diff(2_000),
        "diff 20 KB": diff(20_000),
        "10 MB of floats (rawOutput)": line(
            {"sessionUpdate": "tool_call_update", "rawOutput": [floats.random() * 1000 for _ in range(550_000)]}
        ),
        "10 MB of text": line({"sessionUpdate": "agent_message_chunk", "content": text}),
    }


def large_rows(data: bytes) -> dict[str, Callable[[], object]]:
    """json.loads; the connection's decode (`jsonline.loads`, or `loads_held` from its size on,
    then `from_dict` of the params); the SDK's (json.loads + model_validate), if installed."""
    parse = agent.jsonline.loads if len(data) < agent.jsonline.HELD_FROM else agent.jsonline.loads_held
    rows: dict[str, Callable[[], object]] = {
        "json.loads": lambda: json.loads(data),
        "generated": lambda: gt.SessionNotification.from_dict(parse(data)["params"]),
    }
    try:
        from acp.schema import SessionNotification as SdkNotification

        rows[SDK] = lambda: SdkNotification.model_validate(json.loads(data)["params"])
    except ImportError:
        pass
    return rows


def measure_large() -> None:
    """Each large line, rows interleaved round by round: the median of per-round ratios."""
    print("\nlarge messages, the connection's decode (median of per-round ratios to json.loads):")
    for name, data in large_lines().items():
        rows, copies = large_rows(data), max(1, 200_000 // len(data))
        ratios: dict[str, list[float]] = {label: [] for label in rows}
        for _ in range(7 if len(data) > 1_000_000 else 15):
            took = {}
            for label, fn in rows.items():
                start = time.thread_time()
                for _ in range(copies):
                    fn()
                took[label] = time.thread_time() - start
            for label in rows:
                ratios[label].append(took[label] / took["json.loads"])
        cells = ", ".join(f"{label} {statistics.median(r):.2f}x" for label, r in ratios.items())
        print(f"  {name:28} {len(data):>10} bytes: {cells}")


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
    print(f"orjson available: {gs._orjson is not None}; connection uses orjson: {agent.jsonline._orjson is not None}")
    measure("agent_message_chunk", chunk_lines(10_000))
    measure("tool_call_update", tool_update_lines(1_000))
    measure_large()
    ours = import_time("agent")
    try:
        sdk = import_time("acp")
        print(
            f"\nimport: generated package {ours * 1e3:.1f} ms, `import acp` {sdk * 1e3:.1f} ms, ratio {ours / sdk:.2f}x"
        )
    except subprocess.CalledProcessError:
        print(f"\nimport: generated package {ours * 1e3:.1f} ms (official SDK not installed)")


if __name__ == "__main__":
    main()
