#!/usr/bin/env python3
"""Memory under load: one generated client <-> generated agent connection pair over OS pipes.

One process, one event loop: two `os.pipe()` pairs join the client's connection to the
agent's (both ends are the generated runtime, each on its own pipe transports, exactly as
over a subprocess's stdio). The client sends `--requests` `session/prompt` requests from
`--concurrency` workers; the agent answers most of them after streaming `session/update`
notifications (`--notifications` in all). Mixed in:

- a share (`--cancel-share`) the client cancels (the calling task is cancelled, so the
  runtime sends `$/cancel_request`; the agent's handler is cancelled and answers -32800,
  which arrives late and is dropped);
- a share (`--timeout-share`) that time out (`request(..., timeout=)`: `$/cancel_request`,
  `TimeoutError`, the late -32800 dropped).

Prints RSS after warm-up (the first 10% of the work), along the way, at the end, and the
peak (ru_maxrss); target: growth after warm-up <= 5 MiB. Asserts at the end that every table
of both connections (`Connection.stats()`: pending, in flight, background, waiters, queued
notifications) is empty and every update arrived.

    python benchmarks/bench_soak.py [--notifications 1000000] [--requests 100000]

It is not a timed test: it takes minutes at full scale. tests/test_runtime_soak.py runs
`soak()` at small scale.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))

import agent  # noqa: E402
import client  # noqa: E402
from agent import types as at  # noqa: E402
from client import methods as cm  # noqa: E402
from client import types as ct  # noqa: E402

MiB = 1024 * 1024
HANG = "hang"  # a prompt the agent never answers by itself: it waits to be cancelled


def rss() -> int:
    """Resident set size now, in bytes (Linux: VmRSS, which recent kernels keep exact where
    /proc/self/statm may lag behind; elsewhere the peak so far)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return peak_rss()


def settle_memory() -> None:
    """Collect garbage and give free heap memory back to the OS (glibc), so that RSS shows
    what is in use rather than freed memory the allocator keeps resident."""
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


def peak_rss() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class SoakAgent(agent.Agent):
    def __init__(self) -> None:
        self.cancelled = 0

    async def initialize(self, params: at.InitializeRequest) -> at.InitializeResponse:
        return at.InitializeResponse(protocol_version=1)

    async def authenticate(self, params: at.AuthenticateRequest) -> at.AuthenticateResponse:
        return at.AuthenticateResponse()

    async def session_new(self, params: at.NewSessionRequest) -> at.NewSessionResponse:
        return at.NewSessionResponse(session_id="soak")

    async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
        block = params.prompt[0]
        assert isinstance(block, at.TextContent)
        if block.text == HANG:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        for i in range(int(block.text)):
            chunk = at.SessionUpdateAgentMessageChunk(content=at.TextContent(text=f"chunk {i} of a soak turn"))
            await self.peer.session_update(at.SessionNotification(session_id=params.session_id, update=chunk))
        return at.PromptResponse(stop_reason="end_turn")

    async def session_cancel(self, params: at.CancelNotification) -> None:
        return None


class SoakClient(client.Client):
    def __init__(self) -> None:
        self.updates = 0

    async def session_update(self, params: ct.SessionNotification) -> None:
        self.updates += 1

    async def session_request_permission(self, params: ct.RequestPermissionRequest) -> ct.RequestPermissionResponse:
        return ct.RequestPermissionResponse(outcome=ct.RequestPermissionOutcomeCancelled())


async def pipe_streams(loop: asyncio.AbstractEventLoop) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A reader and a writer on the two ends of a fresh OS pipe, through the event loop."""
    read_fd, write_fd = os.pipe()
    reader = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb", 0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


@dataclass
class Report:
    notifications: int
    requests: int
    answered: int = 0
    cancelled: int = 0
    timed_out: int = 0
    rss_warm: int = 0
    rss_end: int = 0
    blocks_warm: int = 0  # sys.getallocatedblocks(): objects the interpreter holds
    blocks_end: int = 0
    rss_peak: int = 0
    seconds: float = 0.0
    samples: list[tuple[int, int]] = field(default_factory=list)  # (requests done, rss)
    client_stats: dict[str, int] = field(default_factory=dict)
    agent_stats: dict[str, int] = field(default_factory=dict)


def plan(notifications: int, requests: int, cancel_share: float, timeout_share: float) -> list[tuple[str, str]]:
    """Every request's prompt text (a number of updates, or HANG) and kind: "normal", "cancel"
    (the client cancels it) or "timeout"; the last two spread evenly through the run."""
    cancels, timeouts = int(requests * cancel_share), int(requests * timeout_share)
    hangs = cancels + timeouts
    normal = requests - hangs
    assert normal > 0
    base, extra = divmod(notifications, normal)
    work = [(str(base + (1 if i < extra else 0)), "normal") for i in range(normal)]
    for k in range(hangs):
        # Bresenham: `cancels` of the `hangs` are cancelled, evenly interleaved.
        kind = "cancel" if (k + 1) * cancels // hangs > k * cancels // hangs else "timeout"
        work.insert(k * requests // hangs, (HANG, kind))
    return work


async def soak(
    notifications: int,
    requests: int,
    *,
    cancel_share: float = 0.05,
    timeout_share: float = 0.05,
    concurrency: int = 32,
    timeout: float = 0.005,
    progress: bool = False,
) -> Report:
    loop = asyncio.get_running_loop()
    to_agent_r, to_agent_w = await pipe_streams(loop)
    to_client_r, to_client_w = await pipe_streams(loop)
    soak_agent, soak_client = SoakAgent(), SoakClient()
    serving_agent = asyncio.ensure_future(agent.run_agent(soak_agent, to_agent_r, to_client_w))
    proxy, connection = client.connect(soak_client, to_client_r, to_agent_w)
    serving_client = asyncio.ensure_future(connection.run())
    await proxy.initialize(ct.InitializeRequest(protocol_version=1, client_capabilities=ct.ClientCapabilities()))
    session = await proxy.session_new(ct.NewSessionRequest(cwd="/", mcp_servers=[]))

    work = plan(notifications, requests, cancel_share, timeout_share)
    report = Report(notifications=notifications, requests=requests)
    warm_at = requests // 10
    sample_every = max(requests // 10, 1)
    next_index = 0
    done = 0
    start = time.perf_counter()

    async def one(index: int) -> None:
        text, kind = work[index]
        request = ct.PromptRequest(session_id=session.session_id, prompt=[ct.TextContent(text=text)])
        if kind == "normal":
            response = await proxy.session_prompt(request)
            assert response.stop_reason == "end_turn"
            report.answered += 1
        elif kind == "timeout":
            params = cm.METHODS[cm.SESSION_PROMPT].encode_params(request)
            try:
                await connection.request(cm.SESSION_PROMPT, params, timeout=timeout)
            except TimeoutError:
                report.timed_out += 1
            else:
                raise AssertionError("a hanging prompt was answered")
        else:
            task = asyncio.ensure_future(proxy.session_prompt(request))
            await asyncio.sleep(0.001)  # sent; the agent is waiting in its handler
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                report.cancelled += 1
            else:
                raise AssertionError("a hanging prompt was answered")

    async def worker() -> None:
        nonlocal next_index, done
        while next_index < len(work):
            index = next_index
            next_index += 1
            await one(index)
            done += 1
            if done == warm_at:
                settle_memory()
                report.rss_warm = rss()
                report.blocks_warm = sys.getallocatedblocks()
            if done % sample_every == 0:
                report.samples.append((done, rss()))
                if progress:
                    elapsed = time.perf_counter() - start
                    print(
                        f"  {done:>7} requests, {soak_client.updates:>8} updates, {elapsed:6.1f} s, "
                        f"RSS {rss() / MiB:7.1f} MiB",
                        flush=True,
                    )

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    # Late answers (-32800 for the cancelled and timed-out prompts) and the agent's answers to
    # `$/cancel_request` may still be on their way: a round trip, then wait until all settle.
    await proxy.initialize(ct.InitializeRequest(protocol_version=1, client_capabilities=ct.ClientCapabilities()))
    agent_connection = soak_agent.peer.connection
    for _ in range(500):
        if not any(connection.stats().values()) and not any(agent_connection.stats().values()):
            break
        await asyncio.sleep(0.01)
    report.seconds = time.perf_counter() - start
    report.client_stats = connection.stats()
    report.agent_stats = agent_connection.stats()
    settle_memory()
    report.rss_end = rss()
    report.blocks_end = sys.getallocatedblocks()
    report.rss_peak = peak_rss()

    await connection.close()
    await asyncio.wait_for(asyncio.gather(serving_client, serving_agent), 10)
    to_client_w.close()

    assert report.client_stats and not any(report.client_stats.values()), report.client_stats
    assert report.agent_stats and not any(report.agent_stats.values()), report.agent_stats
    assert soak_client.updates == notifications, (soak_client.updates, notifications)
    assert report.answered + report.cancelled + report.timed_out == requests
    assert soak_agent.cancelled == report.cancelled + report.timed_out, (soak_agent.cancelled, report)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notifications", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--cancel-share", type=float, default=0.05)
    parser.add_argument("--timeout-share", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    orjson = "on" if client.connection._orjson is not None else "off"
    print(
        f"soak: {args.notifications:,} session/update + {args.requests:,} session/prompt "
        f"({args.cancel_share:.0%} cancelled, {args.timeout_share:.0%} timed out), {args.concurrency} workers, "
        f"one process, two os.pipe() pairs; Python {sys.version.split()[0]}, orjson {orjson}",
        flush=True,
    )
    report: Any = asyncio.run(
        soak(
            args.notifications,
            args.requests,
            cancel_share=args.cancel_share,
            timeout_share=args.timeout_share,
            concurrency=args.concurrency,
            progress=True,
        )
    )
    growth = report.rss_end - report.rss_warm
    print(
        f"answered {report.answered:,}, cancelled {report.cancelled:,}, timed out {report.timed_out:,} "
        f"in {report.seconds:.0f} s ({(report.notifications + report.requests) / report.seconds:,.0f} messages/s)"
    )
    print(f"RSS after warm-up: {report.rss_warm / MiB:.1f} MiB")
    print(f"RSS at the end:    {report.rss_end / MiB:.1f} MiB  (growth {growth / 1024:+,.0f} KiB; target <= 5 MiB)")
    print(f"peak RSS:          {report.rss_peak / MiB:.1f} MiB")
    print(
        f"allocated blocks:  {report.blocks_warm:,} after warm-up, {report.blocks_end:,} at the end "
        f"({report.blocks_end - report.blocks_warm:+,})"
    )
    print(f"tables at the end: client {report.client_stats}, agent {report.agent_stats}")
    if growth > 5 * MiB:
        print("FAIL: RSS grew by more than 5 MiB after warm-up")
        sys.exit(1)


if __name__ == "__main__":
    main()
