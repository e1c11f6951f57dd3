"""Test helpers: in-memory streams and a scripted client peer, for driving an agent in a test.

`memory_streams()` gives two connected ends, each a (reader, writer) pair the connection
runtime accepts, so an agent and a client can talk inside one event loop with no OS pipe and
no subprocess::

    (agent_reader, agent_writer), (client_reader, client_writer) = memory_streams()
    server = asyncio.ensure_future(run_agent(MyAgent(), agent_reader, agent_writer))
    async with ScriptedClient(client_reader, client_writer, script) as client:
        result = await client.call("initialize", {"protocolVersion": 1})

`ScriptedClient` plays the client role on the generic `Connection`, `METHODS` and `types`
(so it works in the agent package too, which has no `Client` base class). It records every
line the agent sends, in wire order and before anything is decoded (`received`), and every
line it sends itself (`sent`). It answers `fs/*`, `terminal/*` and
`session/request_permission` (any client method) from the script the test gives it; an
unscripted request gets -32601 (method not found).

To run an agent under test afresh, each way gives an `Opener` (an async context manager
yielding an `AgentRun`, a started `ScriptedClient` connected to a new agent): `in_process`
(served in this event loop over memory streams) and `over_stdio` (a process;
`agent_process` is the one place one is started and stopped: its own process group, stdin
closed at the end, then SIGTERM and SIGKILL to the whole group, every wait bounded).
`conformance.py` runs its checks on these.

`MemoryStream` and `memory_streams` live in `memstream`, `ScriptedClient`, `Line` and `Reply`
in `scripted`; they are re-exported here. Standard library only.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from ..connection import Reader, Writer
from ..process import ChildProcess, describe_exit, spawn_process
from .memstream import MemoryStream, memory_streams
from .scripted import Answer, Line, Reply, ScriptedClient, as_list, as_object

__all__ = [
    "AgentRun",
    "Answer",
    "Line",
    "MemoryStream",
    "Opener",
    "Reply",
    "ScriptedClient",
    "Serve",
    "StartupSlots",
    "StderrTail",
    "agent_process",
    "as_list",
    "as_object",
    "in_process",
    "memory_streams",
    "over_stdio",
    "process_notes",
]


# -- running an agent to test --------------------------------------------------------------
class StderrTail(list[str]):
    """The last lines a process wrote to stderr, and how much it wrote in all."""

    def __init__(self, keep: int = 20) -> None:
        super().__init__()
        self.keep = keep
        self.total_lines = 0
        self.total_bytes = 0

    def add(self, line: str) -> None:
        self.total_lines += 1
        self.total_bytes += len(line.encode("utf-8", "replace")) + 1
        self.append(line)
        del self[: -self.keep]


class AgentRun:
    """One agent under test, driven by `client`; its end is filled in when the run closes."""

    def __init__(self, client: ScriptedClient) -> None:
        self.client = client
        self.exited_on_eof: bool | None = None
        self.stderr: StderrTail = StderrTail()
        """The last lines the agent wrote to stderr (a process only)."""
        self.process: ChildProcess | None = None
        """The agent's process (None in-process); its `escaped` once the run has closed."""

    def exit_text(self) -> str:
        """How the agent's process ended, for a report (`killed by SIGSEGV`); empty while it
        runs, or in-process."""
        status = None if self.process is None else self.process.exit_status()
        return "" if status is None else describe_exit(status)

    def process_notes(self) -> list[str]:
        """What the process did that a report should say, after the run (`process_notes`)."""
        return [] if self.process is None else process_notes(self.process, "agent")


def process_notes(child: ChildProcess, role: str) -> list[str]:
    """A report's notes on a stopped process: a crash (a signal, or an exit status other than
    0, that the kit did not cause), and each process that escaped its process group (found
    and stopped with it)."""
    notes: list[str] = []
    status = child.returncode
    if status is not None and status != 0 and not child.signalled:
        notes.append(f"{role} process {child.pid} {describe_exit(status)}")
    for pid, command in sorted(child.escaped.items()):
        notes.append(
            f"process {pid} ({command[:200] or '?'}), started by {role} process {child.pid}, "
            "had left its process group (setsid): found and stopped"
        )
    return notes


Opener = Callable[[float], AbstractAsyncContextManager[AgentRun]]
"""Starts a fresh agent; the argument is how long to wait for it to end after EOF."""


Serve = Callable[[Reader, Writer], Awaitable[None]]


def in_process(serve: Callable[[], Serve], script: Mapping[str, Answer] | None = None) -> Opener:
    """An opener serving a fresh agent in this event loop over in-memory streams.

    `serve()` is called once per run and returns a coroutine function that serves one
    agent on the streams it is given until EOF (for this package: `run_agent` bound to a
    new agent)."""

    @asynccontextmanager
    async def opener(eof_wait: float) -> AsyncGenerator[AgentRun, None]:
        (agent_reader, agent_writer), (client_reader, client_writer) = memory_streams()
        server = asyncio.ensure_future(serve()(agent_reader, agent_writer))
        run = AgentRun(ScriptedClient(client_reader, client_writer, script, close_timeout=0.5))
        run.client.start()
        try:
            yield run
        finally:
            await run.client.connection.close()  # the agent sees EOF
            done, _ = await asyncio.wait([server], timeout=eof_wait)
            run.exited_on_eof = bool(done)
            if not done:
                server.cancel()
            await asyncio.gather(server, return_exceptions=True)
            agent_writer.close()
            await run.client.aclose()

    return opener


@asynccontextmanager
async def agent_process(
    argv: Sequence[str],
    eof_wait: float,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> AsyncGenerator[tuple[ChildProcess, StderrTail, list[bool]], None]:
    """The one place an agent process is started and stopped (on `process.spawn_process`).

    The agent gets its own process group. On exit: close its stdin and give it `eof_wait`
    seconds to exit by itself, then terminate and kill the whole group, every wait bounded, so
    nothing it started survives (POSIX; Windows: what `process.py` can do). Yields the
    process, the tail of its stderr, and a list that gets one bool at the end: whether it
    exited by itself after EOF."""
    stderr_tail = StderrTail()

    exited: list[bool] = []
    async with spawn_process(
        argv,
        cwd=cwd,
        env=env,
        on_stderr_line=stderr_tail.add,
        shutdown_timeout=0.0,
        terminate_timeout=1.0,
    ) as child:
        try:
            yield child, stderr_tail, exited
        finally:
            child.note_descendants()  # while it runs: those that left its group stop with it
            try:
                child.stdin.close()
            except (ConnectionError, OSError, RuntimeError):
                pass
            exited.append(await child.wait(eof_wait) is not None)


class StartupSlots:
    """How many agent processes may be starting at once in this process (every thread and
    event loop shares them): starting is what costs an agent CPU (a Python agent's imports), so
    a run of many checks on a few cores does not make every agent slow to answer its first
    request. A slot is held from the spawn until the agent's first line, its exit, or `hold`
    seconds; the wait for one counts against no timeout."""

    def __init__(self, size: int, hold: float = 10.0) -> None:
        self.size = size
        self.hold = hold
        self._free = threading.BoundedSemaphore(size)

    @asynccontextmanager
    async def starting(self, run: Callable[[], AgentRun | None]) -> AsyncGenerator[None, None]:
        """Hold a slot while the agent of `run()` (None until it exists) starts."""
        while not self._free.acquire(blocking=False):
            await asyncio.sleep(0.02)  # polled: the holder may be another thread's event loop
        held = [True]

        def release() -> None:
            if held[0]:
                held[0] = False
                self._free.release()

        async def watch() -> None:
            deadline = time.monotonic() + self.hold
            while time.monotonic() < deadline:
                current = run()
                if current is not None and (current.client.heard_at or current.client.agent_closed):
                    break
                await asyncio.sleep(0.02)
            release()

        watcher = asyncio.ensure_future(watch())
        try:
            yield
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            release()


STARTUPS = StartupSlots(max(2, os.cpu_count() or 2))


def over_stdio(
    argv: Sequence[str],
    script: Mapping[str, Answer] | None = None,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Opener:
    """An opener starting `argv` as a fresh agent process per run, talking over its stdio."""

    @asynccontextmanager
    async def opener(eof_wait: float) -> AsyncGenerator[AgentRun, None]:
        runs: list[AgentRun] = []
        async with STARTUPS.starting(lambda: runs[0] if runs else None):
            async with agent_process(argv, eof_wait, cwd=cwd, env=env) as (process, tail, exited):
                client = ScriptedClient(process.stdout, process.stdin, script, close_timeout=0.5)
                run = AgentRun(client)
                runs.append(run)
                run.stderr = tail
                run.process = process
                client.progress = process.cpu_seconds
                client.start()
                try:
                    yield run
                finally:
                    await client.connection.close()
        run.exited_on_eof = bool(exited and exited[0])
        await run.client.aclose()

    return opener
