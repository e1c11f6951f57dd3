"""spawn_agent's process lifecycle (generated `process.py`): process group, bounded stop, the
handle, stderr, command resolution. POSIX only where process groups are the point."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import client
import pytest
from client import process, proctable
from client import types as ct

pytestmark = pytest.mark.slow  # every test spawns processes

T = TypeVar("T")
HERE = Path(__file__).resolve().parent
STUBBORN = HERE / "stubborn_agent.py"
GUARD = 30.0  # a hang guard only: the assertions are about what is left behind, not speed
# Stopping waits out shutdown_timeout whenever a process of the group outlives EOF, and
# terminate_timeout whenever one ignores SIGTERM: here, always (the grandchildren do both).
# EXIT_GRACE lets an agent exit by itself at EOF on a loaded machine (what the tests check);
# the other waits only delay the next signal, so they are short.
EXIT_GRACE = 0.5
SHORT_WAIT = 0.1

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, GUARD)

    return asyncio.run(bounded())


class QuietClient(client.Client):
    async def session_request_permission(self, params: ct.RequestPermissionRequest) -> ct.RequestPermissionResponse:
        return ct.RequestPermissionResponse(outcome=ct.RequestPermissionOutcomeCancelled())

    async def session_update(self, params: ct.SessionNotification) -> None:
        return None


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie nobody reaped (this sandbox's PID 1 reaps none)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


async def wait_for_file(path: Path) -> int:
    while not path.exists():
        await asyncio.sleep(0.01)
    return int(path.read_text())


INIT = ct.InitializeRequest(protocol_version=1, client_capabilities=ct.ClientCapabilities())


@posix_only
@pytest.mark.parametrize("mode", ["exit", "stubborn"])
def test_grandchild_that_ignores_eof_and_sigterm_is_killed(tmp_path: Path, mode: str) -> None:
    """The agent starts a grandchild holding its stdout that ignores EOF and SIGTERM; in
    `stubborn` mode the agent ignores both too. Leaving the context kills the whole group."""
    pidfile = tmp_path / "grandchild.pid"

    async def body() -> tuple[int, int, int | None, int | None]:
        command = [sys.executable, str(STUBBORN), str(pidfile), mode]
        grace = EXIT_GRACE if mode == "exit" else SHORT_WAIT  # a stubborn agent ignores EOF anyway
        async with client.spawn_agent(
            QuietClient(), command, shutdown_timeout=grace, terminate_timeout=SHORT_WAIT
        ) as agent:
            response = await agent.proxy.initialize(INIT)
            assert response.protocol_version == 1
            grandchild = await wait_for_file(pidfile)
            assert agent.returncode is None
            assert os.getpgid(agent.pid) == agent.pid  # its own group...
            assert os.getpgid(grandchild) == agent.pid  # ...which the grandchild is in
            assert agent.pid != os.getpgid(0)
            assert agent.connection is agent.proxy.connection
        return agent.pid, grandchild, agent.returncode, agent.process.returncode

    pgid, grandchild, returncode, same = run(body())
    assert not alive(grandchild)
    assert process.group_members(pgid) == []
    assert returncode is not None and returncode == same
    if mode == "exit":
        assert returncode == 0  # it exited by itself at EOF; only the grandchild needed killing
    else:
        assert returncode == -9  # SIGTERM was ignored


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="found through /proc (Linux)")
def test_descendant_that_left_the_group_is_stopped_too(tmp_path: Path) -> None:
    """The grandchild calls setsid (a "detached" child): not in the group any more, yet found
    through its parent while the agent runs, and killed."""
    pidfile = tmp_path / "grandchild.pid"

    async def body() -> tuple[int, int, int | None]:
        command = [sys.executable, str(STUBBORN), str(pidfile), "detached"]
        async with client.spawn_agent(
            QuietClient(), command, shutdown_timeout=EXIT_GRACE, terminate_timeout=SHORT_WAIT
        ) as agent:
            await agent.proxy.initialize(INIT)
            grandchild = await wait_for_file(pidfile)
            assert os.getpgid(grandchild) == grandchild != agent.pid  # its own group
            assert process.strays(agent.pid, agent.pid) == {grandchild: proctable.proc_stat(grandchild).start}
        return agent.pid, grandchild, agent.returncode

    pgid, grandchild, returncode = run(body())
    assert returncode == 0  # the agent exited at EOF by itself
    assert not alive(grandchild)
    assert process.group_members(pgid) == []


@posix_only
def test_cancelled_while_stopping_still_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"

    async def body() -> tuple[int, int]:
        command = [sys.executable, str(STUBBORN), str(pidfile), "stubborn"]
        pids: list[int] = []

        async def use() -> None:
            async with client.spawn_agent(QuietClient(), command, shutdown_timeout=60) as agent:
                await agent.proxy.initialize(INIT)
                pids.extend([agent.pid, await wait_for_file(pidfile)])

        task = asyncio.ensure_future(use())
        while len(pids) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # now inside stop(), waiting out the 60 s shutdown_timeout
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pids[0], pids[1]

    pgid, grandchild = run(body())
    for _ in range(200):  # SIGKILL was sent synchronously; let the kernel finish the job
        if not alive(grandchild) and not process.group_members(pgid):
            break
        run(asyncio.sleep(0.01))
    assert not alive(grandchild)
    assert process.group_members(pgid) == []


def test_handle_exposes_exit_status_of_a_clean_agent(tmp_path: Path) -> None:
    async def body() -> tuple[int | None, int | None]:
        command = [sys.executable, str(STUBBORN), str(tmp_path / "unused"), "clean"]
        async with client.spawn_agent(QuietClient(), command) as agent:
            await agent.proxy.initialize(INIT)
            during = agent.returncode
        return during, agent.returncode

    during, after = run(body())
    assert during is None
    assert after == 3


def test_chatty_stderr_is_drained_line_by_line(tmp_path: Path) -> None:
    """4 MB of stderr before the answer: far more than a pipe holds, so an undrained pipe
    would block the agent and the initialize call forever."""
    lines: list[str] = []

    async def body() -> None:
        command = [sys.executable, str(STUBBORN), str(tmp_path / "unused"), "clean", str(4_000_000)]
        async with client.spawn_agent(QuietClient(), command, on_stderr_line=lines.append) as agent:
            await agent.proxy.initialize(INIT)

    run(body())
    assert lines[-1] == "stderr done"
    assert lines[:-1] == ["x" * 99] * (4_000_000 // 100)


def test_stderr_callback_that_raises_does_not_block(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def broken(line: str) -> None:
        calls.append(line)
        raise RuntimeError("callback bug")

    async def body() -> None:
        command = [sys.executable, str(STUBBORN), str(tmp_path / "unused"), "clean", str(200_000)]
        async with client.spawn_agent(QuietClient(), command, stderr=subprocess.PIPE, on_stderr_line=broken) as agent:
            await agent.proxy.initialize(INIT)

    run(body())
    assert calls[-1] == "stderr done" and len(calls) == 2001
    assert sum("callback failed" in r.getMessage() for r in caplog.records) >= 1


def test_stderr_to_a_file_and_devnull(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "agent.log"

    async def body() -> None:
        command = [sys.executable, str(STUBBORN), str(tmp_path / "unused"), "clean", "300"]
        with log.open("wb") as sink:
            async with client.spawn_agent(QuietClient(), command, stderr=sink) as agent:
                await agent.proxy.initialize(INIT)
        async with client.spawn_agent(QuietClient(), command, stderr=subprocess.DEVNULL) as agent:
            await agent.proxy.initialize(INIT)

    run(body())
    assert log.read_text() == "x" * 99 + "\n" + "x" * 99 + "\n" + "x" * 99 + "\nstderr done\n"
    assert "stderr done" not in capfd.readouterr().err  # neither went to ours


def test_on_stderr_line_needs_a_pipe() -> None:
    async def body() -> None:
        async with client.spawn_agent(
            QuietClient(), [sys.executable, "-c", ""], stderr=subprocess.DEVNULL, on_stderr_line=print
        ):
            pass

    with pytest.raises(ValueError, match="on_stderr_line"):
        run(body())


@posix_only
def test_relative_command_resolved_before_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`bin/agent` names a file under the caller's directory, not under the agent's `cwd`."""
    (tmp_path / "bin").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = tmp_path / "bin" / "agent"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {STUBBORN} {tmp_path / 'unused'} clean\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    assert process.resolve_command(["bin/agent", "x"]) == [str(script), "x"]
    assert process.resolve_command(["python3", "bin/x"]) == ["python3", "bin/x"]  # looked up on PATH

    async def body() -> int | None:
        async with client.spawn_agent(QuietClient(), ["bin/agent"], cwd=str(elsewhere)) as agent:
            await agent.proxy.initialize(INIT)
        return agent.returncode

    assert run(body()) == 3


def test_missing_program_raises_oserror(tmp_path: Path) -> None:
    async def body() -> None:
        async with client.spawn_agent(QuietClient(), [str(tmp_path / "no-such-agent")]):
            pass

    with pytest.raises(OSError):
        run(body())


@posix_only
def test_spawn_process_without_a_client(tmp_path: Path) -> None:
    """The generic half (used by the conformance kit): same group guarantees, raw pipes."""
    pidfile = tmp_path / "grandchild.pid"

    async def body() -> tuple[int, int, bytes]:
        command = [sys.executable, str(STUBBORN), str(pidfile), "stubborn"]
        async with process.spawn_process(command, shutdown_timeout=SHORT_WAIT, terminate_timeout=SHORT_WAIT) as child:
            child.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
            line = await child.stdout.readline()
            grandchild = await wait_for_file(pidfile)
            assert child.alive()
        return child.pid, grandchild, line

    pgid, grandchild, line = run(body())
    assert b'"id":1' in line and b'"protocolVersion":1' in line
    assert not alive(grandchild)
    assert process.group_members(pgid) == []


def test_agent_process_handle_is_generic() -> None:
    handle: Any = client.AgentProcess
    assert handle is process.AgentProcess
