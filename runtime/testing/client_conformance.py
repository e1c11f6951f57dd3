"""Protocol conformance checks for any ACP client: in-process, or any executable that spawns
its agent from a command line.

    from myeditor.acp.testing.client_conformance import assert_client_conforms, check_client

    async def run_my_client(reader, writer) -> None:     # your client's whole session,
        ...                                              # on the agent's stdout and stdin

    def test_my_client_follows_the_protocol() -> None:
        assert_client_conforms(check_client(run_my_client))

    report = check_client_command(["acpx", "--agent", "{agent}", "exec", "hello"])

`{agent}` in the command line stands for the probe agent's command: as a whole argument it
becomes the command's words, inside a larger one the shell-quoted command string. The client
spawns the probe as its agent; the probe (`probe_relay`) passes every byte to this process
over a Unix socket it owns, where `probe` plays the agent and `probe_scenario` drives it.
Each check cites the doc sentence that binds the client and its level. A client that runs one
scripted interaction and exits gets every step in its first prompt turn; what it never gave
the chance to check is "not exercised", never passed. Every wait is bounded (`ClientOptions`),
the client runs in its own process group, and the probe processes are stopped at the end.

Standard library only; the command form needs POSIX (a Unix socket).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from ..connection import Reader, Writer
from ..process import describe_exit, spawn_process
from ..proctable import is_live, proc_stat
from .client_checks import CLIENT_CHECKS, CLIENT_CHECKS_BY_ID, REMOTE_CHECKS, ClientOptions
from .client_verdicts import evaluate, results
from .conformance_output import Matcher, compile_selection, report_json
from .conformance_output import junit_xml as _junit_xml
from .conformance_report import Report, assert_conforms
from .memstream import memory_streams
from .probe import Findings, ProbeSession, Turn
from .probe_scenario import run_turn
from .runners import process_notes

__all__ = [
    "AGENT_PLACEHOLDER",
    "CHECKS",
    "CHECKS_BY_ID",
    "PROBE_RELAY",
    "REMOTE_CHECKS",
    "ClientOptions",
    "RunClient",
    "assert_client_conforms",
    "check_client",
    "check_client_async",
    "check_client_command",
    "compile_selection",
    "expand_agent",
    "junit_xml",
    "report_json",
]

CHECKS: Final = CLIENT_CHECKS
CHECKS_BY_ID: Final = CLIENT_CHECKS_BY_ID
AGENT_PLACEHOLDER: Final = "{agent}"
PROBE_RELAY: Final = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe_relay.py")
_TAIL: Final = 20

RunClient = Callable[[Reader, Writer], Awaitable[None]]
"""A client's whole session, given the agent's stdout (`reader`) and stdin (`writer`)."""


def junit_xml(report: Report, suite: str = "acp-client-conformance") -> str:
    return _junit_xml(report, suite)


def assert_client_conforms(report: Report, strict: bool = False) -> None:
    """Raise AssertionError (the whole report as its message) unless every MUST check that
    was exercised passed (every SHOULD one too if `strict`)."""
    assert_conforms(report, strict)


def expand_agent(argv: Sequence[str], probe: Sequence[str]) -> list[str]:
    """`argv` with `{agent}` expanded: a whole argument becomes the probe's words, a part of
    one the shell-quoted command. ValueError when there is no `{agent}`."""
    out: list[str] = []
    for arg in argv:
        if arg == AGENT_PLACEHOLDER:
            out += probe
        else:
            out.append(arg.replace(AGENT_PLACEHOLDER, shlex.join(probe)))
    if not any(AGENT_PLACEHOLDER in arg for arg in argv):
        raise ValueError(
            "the client command has no {agent}: put it where the client takes its agent's "
            'command, e.g. acpx --agent "{agent}" exec hello'
        )
    return out


class Probe:
    """Every connection of one run, and the watch that decides when the run is over."""

    def __init__(self, options: ClientOptions, findings: Findings | None = None) -> None:
        self.options = options
        self.findings = findings or Findings()
        self.sessions: list[ProbeSession] = []
        self.tasks: list[asyncio.Future[None]] = []
        self.relays: list[int] = []
        self.start = asyncio.get_running_loop().time()

    def serve(self, reader: Reader, writer: Writer) -> ProbeSession:
        number = len(self.sessions) + 1
        session = ProbeSession(reader, writer, self.findings, self.options, number, run_turn)
        self.sessions.append(session)
        self.tasks.append(asyncio.ensure_future(session.connection.run()))
        return session

    def attached(self, turn: Turn) -> ProbeSession:
        """A session for a connection a transport runs (`client_remote`): it records the wire."""
        session = ProbeSession(
            None, None, self.findings, self.options, len(self.sessions) + 1, turn
        )
        self.sessions.append(session)
        return session

    async def on_socket(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            hello = json.loads(await asyncio.wait_for(reader.readline(), self.options.timeout))
            self.relays.append(int(hello["probe"]))
        except (ValueError, KeyError, TypeError, OSError, asyncio.TimeoutError):
            writer.close()
            return
        self.serve(reader, writer)

    async def watch(self, client: asyncio.Future[Any]) -> None:
        """Until the client is done, idle, or out of time (whichever comes first)."""
        loop = asyncio.get_running_loop()
        options = self.options
        while not client.done():
            now = loop.time()
            if now - self.start > options.max_time:
                return
            talked = [s for s in self.sessions if s.received]
            if not talked:
                if now - self.start > options.startup_timeout:
                    return
            elif not self._busy() and now - max(s.last_activity for s in talked) > options.idle:
                return
            await asyncio.wait({client}, timeout=0.05)

    def _busy(self) -> bool:
        return any(s.waiting or s.cancels for s in self.sessions)

    async def close(self) -> None:
        for session in self.sessions:
            if not session.external:  # a transport's connection is the transport's to close
                await session.connection.close()
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=2.0)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await _stop_relays(self.relays)

    def report(
        self,
        target: str,
        cannot_run: str,
        stderr: list[str],
        select: Matcher | None,
        notes: list[str] | None = None,
    ) -> Report:
        end = asyncio.get_running_loop().time()
        if not cannot_run and not any(s.received for s in self.sessions):
            cannot_run = "the client started the probe agent but sent it nothing"
        evaluate(self.sessions, self.findings)
        out = results(self.findings, self.sessions, self.start, end)
        for result in out:
            if result.status == "failed":
                result.stderr = list(stderr)
        if select is not None:
            out = [r for r in out if select(r.check.id)]
        return Report(target, out, cannot_run, end - self.start, list(notes or []))


async def _stop_relays(pids: list[int]) -> None:
    """The probe processes end when their socket closes; any still there after a second is
    killed (its parent, the client, may have left it behind)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 1.0
    for pid in pids:
        while is_live(proc_stat(pid)) and loop.time() < deadline:
            await asyncio.sleep(0.02)
        if is_live(proc_stat(pid)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def check_client(
    run_client: RunClient, options: ClientOptions | None = None, select: Matcher | None = None
) -> Report:
    """Run every client check against `run_client` in-process (memory streams, no process).
    Inside a running event loop (an async test), await `check_client_async` instead."""
    return asyncio.run(check_client_async(run_client, options, select))


async def check_client_async(
    run_client: RunClient, options: ClientOptions | None = None, select: Matcher | None = None
) -> Report:
    """`check_client`, for a caller already in an event loop."""
    options = options or ClientOptions()
    probe = Probe(options)
    (probe_reader, probe_writer), (client_reader, client_writer) = memory_streams()
    probe.serve(probe_reader, probe_writer)
    client = asyncio.ensure_future(run_client(client_reader, client_writer))
    errors: list[str] = []
    try:
        await probe.watch(client)
    finally:
        if not client.done():
            client.cancel()
        outcome = await asyncio.gather(client, return_exceptions=True)
        if isinstance(outcome[0], Exception):
            errors.append(f"the client raised {type(outcome[0]).__name__}: {outcome[0]}")
        client_writer.close()
        await probe.close()
    name = getattr(run_client, "__qualname__", type(run_client).__name__)
    talked = any(session.received for session in probe.sessions)
    cannot_run = "" if talked or not errors else f"{errors[0]}, before it sent anything"
    return probe.report(name, cannot_run, errors, select)


def check_client_command(
    argv: Sequence[str],
    options: ClientOptions | None = None,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    select: Matcher | None = None,
    stdin: bytes = b"",
) -> Report:
    """Run every client check against a client executable that spawns `{agent}`.

    `cwd`: the client's working directory (default: ours). `stdin`: what the client reads on
    its own stdin, then EOF (an interactive client's prompt lines). ValueError when `argv`
    has no `{agent}`; OSError when the client cannot be started."""
    run = _check_command(list(argv), options or ClientOptions(), cwd, env, select, stdin)
    return asyncio.run(run)


async def _check_command(
    argv: list[str],
    options: ClientOptions,
    cwd: str | None,
    env: Mapping[str, str] | None,
    select: Matcher | None,
    stdin: bytes,
) -> Report:
    folder = tempfile.mkdtemp(prefix="acp-check-client-")
    channel = os.path.join(folder, "probe.sock")
    command = expand_agent(argv, [_probe_script(folder, channel)])
    probe = Probe(options)
    listener = await asyncio.start_unix_server(probe.on_socket, path=channel)
    try:
        done = await run_client(command, probe, options, cwd, env, stdin)
    finally:
        listener.close()
        await probe.close()
        shutil.rmtree(folder, ignore_errors=True)
    return probe.report(shlex.join(argv), done.cannot_run, done.stderr, select, done.notes)


@dataclasses.dataclass
class ClientRun:
    """What one run of a client command left: its stderr tail, the process findings, and why
    it could not be checked (empty if it could)."""

    stderr: list[str]
    notes: list[str]
    cannot_run: str


async def run_client(
    command: list[str],
    probe: Probe,
    options: ClientOptions,
    cwd: str | None,
    env: Mapping[str, str] | None,
    stdin: bytes,
) -> ClientRun:
    """Run the client `command` (its agent already expanded) until `probe` says the run is
    over; the client's process group is stopped then."""
    stderr: list[str] = []
    stdout: list[str] = []
    cannot_run = ""

    def on_stderr(line: str) -> None:
        stderr.append(line)
        del stderr[:-_TAIL]

    async with spawn_process(
        command,
        cwd=cwd,
        env=env,
        on_stderr_line=on_stderr,
        shutdown_timeout=1.0,
        terminate_timeout=1.0,
    ) as child:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            child.stdin.write(stdin)
            child.stdin.close()  # a client reading its own stdin gets EOF, not a hang
        drain = asyncio.ensure_future(_drain(child.stdout, stdout))
        exited = asyncio.ensure_future(child.wait())
        try:
            await probe.watch(exited)
            child.note_descendants()
        finally:
            exited.cancel()
    notes = process_notes(child, "client")
    if not probe.sessions:
        status = child.returncode
        cannot_run = "the client never started the probe agent (or stopped it at once)" + (
            f"; it {describe_exit(status)}" if status is not None else ""
        )
        tail = " | ".join(line for line in (stderr or stdout)[-8:] if line.strip())
        cannot_run += f"; its output: {tail[-600:]}" if tail else ""
    await asyncio.wait({drain}, timeout=1.0)
    drain.cancel()
    return ClientRun(stderr, notes, cannot_run)


def _probe_script(folder: str, channel: str) -> str:
    """The probe agent's command as one executable path: then `{agent}` is the same whether
    the client's command line takes it as words or as a string (`acpx --agent "{agent}"`
    reaches us without its quotes). `-I -S`: the relay needs only the standard library."""
    path = os.path.join(folder, "acp-probe-agent")
    relay = [sys.executable, "-I", "-S", PROBE_RELAY, "--channel", channel]
    with open(path, "w", encoding="utf-8") as script:
        script.write(f"#!/bin/sh\nexec {shlex.join(relay)}\n")
    os.chmod(path, 0o700)
    return path


async def _drain(stream: asyncio.StreamReader, tail: list[str]) -> None:
    """The client's own stdout, read to its end (kept for the cannot-run message)."""
    pending = b""
    with contextlib.suppress(ConnectionError, OSError):
        while chunk := await stream.read(64 * 1024):
            *lines, pending = (pending + chunk).split(b"\n")
            tail += [line[:400].decode("utf-8", "replace").rstrip() for line in lines]
            del tail[:-_TAIL]
            pending = pending[-400:]
