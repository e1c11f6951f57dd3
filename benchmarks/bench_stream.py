#!/usr/bin/env python3
"""The receive path, side by side: N `agent_message_chunk` notifications over a subprocess pipe.

A feeder process writes N pre-encoded `session/update` lines (the same bytes for every stack)
once the receiver says go; the receiver counts the CPU time (`time.process_time`, its own
process only) from go until the N-th message reached its handler. Stacks, in one run:

    floor        raw asyncio, `readline()` per line, nothing decoded
    json.loads   the same, plus `json.loads` per line
    ours stdlib  the generated client (Connection + typed decode + handler), orjson blocked
    ours orjson  the same with orjson importable
    SDK          the official SDK's client connection (agent-client-protocol)

Every measurement runs in a fresh receiver process; rounds alternate the stacks so machine
noise hits them alike; the best round is reported (the least disturbed), with the median.

    python benchmarks/bench_stream.py [--messages 10000] [--rounds 3]

Goals (issue 31 §1): ours stdlib <= 8 ms CPU per 1k, ours orjson <= 5 ms, and ours stdlib
<= 1.7x "json.loads".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "generated"))
NO_ORJSON = "ACP_BENCH_NO_ORJSON"
if os.environ.get(NO_ORJSON):
    sys.modules["orjson"] = None  # type: ignore[assignment]  # makes `import orjson` fail

STACKS = ("floor", "json.loads", "ours stdlib", "ours orjson", "SDK")


def feed(count: int) -> None:
    """The feeder: wait for one line on stdin (go), write `count` lines, wait for EOF."""
    from _common import chunk_lines

    data = ("\n".join(chunk_lines(count)) + "\n").encode()
    sys.stdin.buffer.readline()
    out = sys.stdout.buffer
    for start in range(0, len(data), 1 << 16):
        out.write(data[start : start + (1 << 16)])
    out.flush()
    sys.stdin.buffer.read()


def feeder_command(count: int) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--feed", str(count)]


async def receive_raw(count: int, decode: bool) -> float:
    process = await asyncio.create_subprocess_exec(
        *feeder_command(count), stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit=1 << 20
    )
    assert process.stdin is not None and process.stdout is not None
    await asyncio.sleep(0.2)  # the feeder has started and built its lines
    loads = json.loads
    start = time.process_time()
    process.stdin.write(b"go\n")
    readline = process.stdout.readline
    for _ in range(count):
        line = await readline()
        if decode:
            loads(line)
    elapsed = time.process_time() - start
    process.stdin.close()
    await process.wait()
    return elapsed


async def receive_ours(count: int) -> float:
    import client
    from client import types

    done = asyncio.get_running_loop().create_future()

    class Counter(client.Client):
        received = 0

        async def session_update(self, params: types.SessionNotification) -> None:
            self.received += 1
            if self.received == count:
                done.set_result(time.process_time())

        async def session_request_permission(
            self, params: types.RequestPermissionRequest
        ) -> types.RequestPermissionResponse:
            raise NotImplementedError

    async with client.spawn_agent(Counter(), feeder_command(count)) as spawned:
        await asyncio.sleep(0.2)
        start = time.process_time()
        await spawned.proxy.session_cancel(types.CancelNotification(session_id="go"))
        end: float = await done
    return end - start


async def receive_sdk(count: int) -> float:
    import acp

    done = asyncio.get_running_loop().create_future()

    class Counter:
        received = 0

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            self.received += 1
            if self.received == count:
                done.set_result(time.process_time())

    command = feeder_command(count)
    async with acp.spawn_agent_process(Counter(), command[0], *command[1:]) as (conn, _process):
        await asyncio.sleep(0.2)
        start = time.process_time()
        await conn.cancel(session_id="go")
        end: float = await done
    return end - start


def receive(stack: str, count: int) -> float:
    if stack in ("floor", "json.loads"):
        return asyncio.run(receive_raw(count, stack == "json.loads"))
    if stack == "SDK":
        return asyncio.run(receive_sdk(count))
    return asyncio.run(receive_ours(count))


def measure(stack: str, count: int) -> float:
    env = dict(os.environ)
    env.pop(NO_ORJSON, None)
    if stack == "ours stdlib":
        env[NO_ORJSON] = "1"
    command = [sys.executable, str(Path(__file__).resolve()), "--receive", stack, "--messages", str(count)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{stack} run failed:\n{result.stdout}{result.stderr}")
    return float(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description="receive path: floor, json.loads, ours, the SDK")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--feed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--receive", choices=STACKS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.feed is not None:
        return feed(args.feed)
    if args.receive:
        print(receive(args.receive, args.messages))
        return None
    from importlib.metadata import version

    results: dict[str, list[float]] = {stack: [] for stack in STACKS}
    for _ in range(args.rounds):
        for stack in STACKS:
            results[stack].append(measure(stack, args.messages))
    per_1k = {stack: min(times) * 1000 / (args.messages / 1000) for stack, times in results.items()}
    print(
        f"{args.messages} agent_message_chunk lines over a pipe; receiver CPU, best (median) of "
        f"{args.rounds} fresh processes; Python {sys.version.split()[0]}, "
        f"agent-client-protocol {version('agent-client-protocol')}; load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'stack':14}{'CPU ms / 1k':>13}{'median':>9}{'msgs/s CPU':>13}")
    for stack, times in results.items():
        median = statistics.median(times) * 1000 / (args.messages / 1000)
        print(f"{stack:14}{per_1k[stack]:>13.2f}{median:>9.2f}{1000 / per_1k[stack] * 1000:>13,.0f}")
    ratio = per_1k["ours stdlib"] / per_1k["json.loads"]
    print()
    print(f"ours stdlib: {per_1k['ours stdlib']:.2f} ms / 1k (goal <= 8), {ratio:.2f}x json.loads (goal <= 1.7x)")
    print(f"ours orjson: {per_1k['ours orjson']:.2f} ms / 1k (goal <= 5)")
    print(f"SDK / ours stdlib: {per_1k['SDK'] / per_1k['ours stdlib']:.1f}x")
    return None


if __name__ == "__main__":
    main()
