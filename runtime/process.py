"""Start a command (an ACP agent) as a subprocess, and stop it, with everything it started.

POSIX: the command runs in a new session, so it leads its own process group, and everything
it starts stays in that group unless it deliberately leaves it (`setsid`, a daemon). Stopping:

1. close its stdin (an ACP agent exits at EOF);
2. wait up to `shutdown_timeout` seconds for the command and every process of its group to
   exit;
3. SIGTERM the whole group, wait up to `terminate_timeout` seconds;
4. SIGKILL the whole group, wait (bounded) until the group is empty.

Step 3 and 4 also run when the command itself exited but processes it started linger (a node
wrapper whose native child still holds the pipes). Every wait is bounded, and if stopping is
itself cancelled the group is killed at once, so leaving `spawn_process` never hangs and never
leaves a process of the group behind. On Linux, zombies (exited, waiting for a parent to reap
them) count as gone.

Linux also finds, through /proc, the descendants that left the group (`setsid`, a "detached"
child), and signals them with the group: through parent links while the command still runs
(`ChildProcess.note_descendants`), and, orphaned or not, by a marker every descendant inherits
in its environment (`ACP_PROCESS_TAG`, one random value per command), which finds a daemon
that left the group and lost its parent (setsid and a double fork). Those found outside the
group are kept in `ChildProcess.escaped` (pid -> command line), for a report to name them; a
process that cleared its environment and was orphaned before stopping began is not found.
`describe_exit` words an exit status ("killed by SIGSEGV"). (`proctable` reads /proc.)

Windows (best effort, documented): the command starts in a new process group
(CREATE_NEW_PROCESS_GROUP); step 3 sends CTRL_BREAK_EVENT to that group and terminates the
command, step 4 kills the command. Processes it started are not tracked and may survive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import IO, Any, Final, Generic, TypeVar

from .connection import Connection, Reader, Writer
from .proctable import (
    TAG_VARIABLE,
    command_line,
    group_cpu_seconds,
    group_members,
    is_live,
    proc_stat,
    strays,
    tagged,
)

_log = logging.getLogger(__name__)

DEFAULT_SHUTDOWN_TIMEOUT: Final = 5.0
DEFAULT_TERMINATE_TIMEOUT: Final = 2.0
_KILL_TIMEOUT: Final = 5.0  # SIGKILL cannot be ignored; only an uninterruptible sleep delays it
_POLL: Final = 0.02
_STDERR_CHUNK: Final = 64 * 1024
_STDERR_LINE_MAX: Final = 64 * 1024  # a longer stderr line is passed on in pieces
_POSIX: Final = sys.platform != "win32"

PIPE: Final = subprocess.PIPE
DEVNULL: Final = subprocess.DEVNULL

P = TypeVar("P")


def resolve_command(command: Sequence[str]) -> list[str]:
    """`command` as a list, its program made absolute if it is a relative path (it contains a
    path separator): relative to the caller's working directory, not to the child's `cwd`."""
    args = list(command)
    if not args:
        raise ValueError("the command is empty")
    program = args[0]
    separators = ("/", "\\") if sys.platform == "win32" else ("/",)
    if any(sep in program for sep in separators) and not os.path.isabs(program):
        args[0] = os.path.abspath(program)
    return args


def describe_exit(returncode: int | None) -> str:
    """An exit status in words: `exited with status 3`, `killed by SIGSEGV`, `still running`."""
    if returncode is None:
        return "still running"
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # gone already (or only zombies left)


class ChildProcess:
    """A command started by `start_process`: its pipes, pid, exit status, and `stop()`."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        stderr_task: asyncio.Task[None] | None,
        tag: str = "",
    ) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        self._stderr_task = stderr_task
        self.stdin: asyncio.StreamWriter = process.stdin
        self.stdout: asyncio.StreamReader = process.stdout
        self.pid: int = process.pid
        self.pgid: int | None = process.pid if _POSIX else None
        """The process group that `stop()` empties (POSIX); None on Windows."""
        self._strays: dict[int, int] = {}  # descendants outside the group: pid -> start time
        self._stopped = False
        self.tag = tag
        """The value of `ACP_PROCESS_TAG` in its environment, inherited by its descendants."""
        self.escaped: dict[int, str] = {}
        """The descendants found outside its process group (pid -> command line): stopped
        with it, and worth a report (they would have outlived it)."""
        self.signalled = False
        """Whether `stop()` or `kill()` had to signal it (then its exit status says so)."""

    @property
    def returncode(self) -> int | None:
        """The command's exit status; None while it runs (negative: killed by that signal)."""
        return self._process.returncode

    def alive(self) -> bool:
        """Whether the command or any process of its group still runs."""
        if self.returncode is None:
            return True
        return self.pgid is not None and bool(group_members(self.pgid) or self._live_strays())

    def cpu_seconds(self) -> float | None:
        """The CPU time its process group has used so far (Linux); None where unknown. A
        kit tells an agent that is slow because it works (imports, on a loaded machine) from
        one that waits, by it."""
        return None if self.pgid is None else group_cpu_seconds(self.pgid)

    def note_descendants(self) -> None:
        """Note the command's descendants that left its process group, so that `stop()`
        stops them too (Linux). `stop()` does it first; call it earlier if the command may
        exit before (say, before closing its stdin yourself): once it is gone, they cannot
        be told from anyone else's processes."""
        if self.pgid is None:
            return
        if self.returncode is None:
            self._strays.update(strays(self.pid, self.pgid))
        if self.tag:  # orphaned or not: they carry the marker
            for pid, start in tagged(self.tag).items():
                stat = proc_stat(pid)
                if stat is not None and stat.pgrp != self.pgid and pid != self.pid:
                    self._strays[pid] = start
        for pid in self._strays:
            if pid not in self.escaped:
                self.escaped[pid] = command_line(pid)

    def exit_status(self) -> int | None:
        """The exit status if the command has exited, even before asyncio reaped it (Linux:
        peeked with `waitid(WNOWAIT)`, which leaves it to be reaped); else None."""
        if self.returncode is not None or not hasattr(os, "waitid"):
            return self.returncode
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped meanwhile: asyncio has it
            return self.returncode
        except OSError:
            return None
        if info is None:
            return None
        if info.si_code == os.CLD_EXITED:
            return info.si_status
        return -info.si_status  # CLD_KILLED, CLD_DUMPED: like Popen's returncode

    def _live_strays(self) -> list[int]:
        live: list[int] = []
        for pid, start in self._strays.items():
            stat = proc_stat(pid)
            if is_live(stat) and stat is not None and stat.start == start:  # not a reused pid
                live.append(pid)
        return live

    def _signal_strays(self, signum: int) -> None:
        for pid in self._live_strays():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    async def wait(self, timeout: float | None = None) -> int | None:
        """Wait until the command has exited (not for its pipes to close); its exit status,
        or None if `timeout` seconds passed first."""
        await self._poll(lambda: self.returncode is not None, timeout)
        return self.returncode

    async def _poll(self, done: Callable[[], bool], timeout: float | None) -> bool:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not done():
            if deadline is not None and loop.time() >= deadline:
                return False
            await asyncio.sleep(_POLL)
        return True

    def kill(self) -> None:
        """SIGKILL the whole group at once (Windows: kill the command); does not wait."""
        self.signalled = True
        if self.pgid is not None:
            _signal_group(self.pgid, signal.SIGKILL)
            self._signal_strays(signal.SIGKILL)
        elif self.returncode is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                self._process.kill()

    def _terminate(self) -> None:
        self.signalled = True
        if self.pgid is not None:
            _signal_group(self.pgid, signal.SIGTERM)
            self._signal_strays(signal.SIGTERM)
            return
        if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
            with contextlib.suppress(OSError, ValueError):
                os.kill(self.pid, signal.CTRL_BREAK_EVENT)
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                self._process.terminate()

    async def stop(
        self,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
        terminate_timeout: float = DEFAULT_TERMINATE_TIMEOUT,
    ) -> int | None:
        """Close stdin, wait for exit, then terminate and kill the group (see the module doc);
        returns the command's exit status. Bounded: at most about `shutdown_timeout +
        terminate_timeout + 7` seconds. Safe to call again."""
        try:
            if not self._stopped:
                self.note_descendants()
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                self.stdin.close()
            exited = await self._poll(lambda: not self.alive(), shutdown_timeout)
            self.note_descendants()  # a daemon started while it was shutting down
            if not exited or self._live_strays():
                _log.info("process %d did not exit at EOF: terminating its group", self.pid)
                self._terminate()
                if not await self._poll(lambda: not self.alive(), terminate_timeout):
                    _log.warning("process %d ignored termination: killing its group", self.pid)
                    self.kill()
                    if not await self._poll(lambda: not self.alive(), _KILL_TIMEOUT):
                        _log.error("process group %d survived SIGKILL", self.pid)
        except BaseException:  # cancelled (or worse) while stopping: no second chance
            self.kill()
            raise
        finally:
            self._stopped = True
        if self._stderr_task is not None:
            # Its pipe is at EOF once the group is gone (unless a process left the group).
            await _settle(self._stderr_task, 1.0)
        return self.returncode


async def _settle(task: asyncio.Future[Any], timeout: float) -> None:
    """Let `task` finish within `timeout` seconds, else cancel it; never raises its error."""
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.cancel()
        await asyncio.wait({task}, timeout=timeout)
    if task.done() and not task.cancelled() and task.exception() is not None:
        _log.debug("task ended with %r", task.exception())


async def _drain_stderr(
    stream: asyncio.StreamReader, on_line: Callable[[str], None] | None
) -> None:
    """Read the child's stderr to its end, line by line (so the child never blocks on it)."""
    failed = False

    def emit(raw: bytes | bytearray) -> None:
        nonlocal failed
        line = raw.decode("utf-8", "replace").rstrip("\r")
        if on_line is None:
            _log.debug("stderr: %s", line)
            return
        try:
            on_line(line)
        except Exception:
            if not failed:
                failed = True
                _log.exception("the stderr line callback failed (later failures: debug log)")
            else:
                _log.debug("the stderr line callback failed again", exc_info=True)

    pending = bytearray()
    while True:
        try:
            chunk = await stream.read(_STDERR_CHUNK)
        except (ConnectionError, OSError):
            break
        if not chunk:
            break
        pending += chunk
        while True:
            end = pending.find(b"\n")
            if end < 0:
                while len(pending) > _STDERR_LINE_MAX:
                    emit(pending[:_STDERR_LINE_MAX])
                    del pending[:_STDERR_LINE_MAX]
                break
            emit(pending[:end])
            del pending[: end + 1]
    if pending:
        emit(pending)


async def start_process(
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stderr: int | IO[Any] | None = None,
    on_stderr_line: Callable[[str], None] | None = None,
) -> ChildProcess:
    """Start `command` with piped stdin/stdout in its own process group (see the module doc).

    `env` replaces the environment (None: inherit); either way `ACP_PROCESS_TAG` is added
    (see the module doc). `stderr`: None inherits the caller's; a
    file object or descriptor, or `DEVNULL`; or `PIPE`, read by a task that passes each line
    (decoded as UTF-8, without its line ending) to `on_stderr_line` (or to this module's debug
    log), so a chatty command can never block on a full pipe. `on_stderr_line` alone implies
    `PIPE`. A relative program path is resolved against the caller's directory first (see
    `resolve_command`). The caller must `stop()` the process (or use `spawn_process`)."""
    args = resolve_command(command)
    if on_stderr_line is not None:
        if stderr is None:
            stderr = PIPE
        elif stderr != PIPE:
            raise ValueError("on_stderr_line needs stderr=PIPE (or stderr left unset)")
    tag = secrets.token_hex(8)
    child_env = dict(os.environ if env is None else env)
    child_env[TAG_VARIABLE] = tag
    options: dict[str, Any] = {}
    if _POSIX:
        options["start_new_session"] = True
    else:  # pragma: no cover - Windows only
        options["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    process = await asyncio.create_subprocess_exec(
        *args,
        stdin=PIPE,
        stdout=PIPE,
        stderr=stderr,
        cwd=cwd,
        env=child_env,
        **options,
    )
    stderr_task: asyncio.Task[None] | None = None
    if stderr == PIPE and process.stderr is not None:
        stderr_task = asyncio.ensure_future(_drain_stderr(process.stderr, on_stderr_line))
    return ChildProcess(process, stderr_task, tag)


@contextlib.asynccontextmanager
async def spawn_process(
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stderr: int | IO[Any] | None = None,
    on_stderr_line: Callable[[str], None] | None = None,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    terminate_timeout: float = DEFAULT_TERMINATE_TIMEOUT,
) -> AsyncGenerator[ChildProcess, None]:
    """`start_process`, and `stop()` it on leaving the context, however it is left."""
    child = await start_process(
        command, cwd=cwd, env=env, stderr=stderr, on_stderr_line=on_stderr_line
    )
    try:
        yield child
    finally:
        await child.stop(shutdown_timeout, terminate_timeout)


class AgentProcess(Generic[P]):
    """A spawned peer: `proxy` calls it, `connection` serves it, `process` is the subprocess."""

    def __init__(self, proxy: P, connection: Connection, process: ChildProcess) -> None:
        self.proxy = proxy
        self.connection = connection
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status; None while the process runs."""
        return self.process.returncode


@contextlib.asynccontextmanager
async def spawn_peer(
    command: Sequence[str],
    wire: Callable[[Reader, Writer], tuple[P, Connection]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stderr: int | IO[Any] | None = None,
    on_stderr_line: Callable[[str], None] | None = None,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    terminate_timeout: float = DEFAULT_TERMINATE_TIMEOUT,
) -> AsyncGenerator[AgentProcess[P], None]:
    """Start `command`, connect to its stdio with `wire(reader, writer)` (which returns the
    proxy and the connection), serve the connection while the context runs; on leaving it,
    close the connection, stop the process group (`ChildProcess.stop`) and let the
    connection finish (bounded)."""
    serving: asyncio.Future[None] | None = None
    connection: Connection | None = None
    try:
        async with spawn_process(
            command,
            cwd=cwd,
            env=env,
            stderr=stderr,
            on_stderr_line=on_stderr_line,
            shutdown_timeout=shutdown_timeout,
            terminate_timeout=terminate_timeout,
        ) as child:
            try:
                proxy, connection = wire(child.stdout, child.stdin)
                serving = asyncio.ensure_future(connection.run())
                yield AgentProcess(proxy, connection, child)
            finally:
                child.note_descendants()  # while the agent runs: it exits at EOF
                if connection is not None:
                    await connection.close()
    finally:
        if serving is not None and connection is not None:
            # The group is gone, so its stdout is at EOF: run() fails what is still pending
            # and gives running handlers `shutdown_grace` seconds.
            await _settle(serving, connection.shutdown_grace + 1.0)
