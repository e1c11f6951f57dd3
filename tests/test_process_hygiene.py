"""No leftovers, and crash reports that say how: a daemon that escaped the process group
(setsid and a double fork, no parent link left) is found by its inherited marker, stopped,
and named in the report, for an agent (check-agent) and a client (check-client); an agent
killed by SIGSEGV is reported with the signal; a peer's control bytes reach a text report
escaped (issue 30 § 4)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from agent import process
from agent.testing.client_conformance import ClientOptions, check_client_command
from agent.testing.conformance import Options, check_command
from agent.testing.conformance_output import compile_selection
from agent.testing.conformance_report import Report, printable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="found through /proc (Linux)"),
]

ROOT = Path(__file__).resolve().parent.parent
HYGIENE = ROOT / "tests" / "fixtures" / "hygiene"
DAEMONIZE = [sys.executable, str(HYGIENE / "daemonize.py")]
ECHO_AGENT = str(ROOT / "examples" / "echo_agent.py")
ECHO_CLIENT = str(ROOT / "examples" / "echo_client.py")


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def escaped_note(report: Report, pid: int) -> str:
    notes = [note for note in report.notes if note.startswith(f"process {pid} ")]
    assert notes, report.notes
    return notes[0]


def test_describe_exit_and_printable() -> None:
    assert process.describe_exit(-signal.SIGSEGV) == "killed by SIGSEGV"
    assert process.describe_exit(3) == "exited with status 3"
    assert process.describe_exit(None) == "still running"
    assert printable("a\x1b[2Jb\x07\nc\u202e\x9b") == "a\\x1b[2Jb\\x07\\nc\\u202e\\x9b"


def test_orphaned_daemon_is_found_by_its_marker_and_stopped(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"

    async def body() -> tuple[int, int, dict[int, str]]:
        command = [*DAEMONIZE, str(pidfile), "/bin/sh", "-c", "read line"]
        async with process.spawn_process(command, shutdown_timeout=0.5, terminate_timeout=0.3) as child:
            while not pidfile.exists():
                await asyncio.sleep(0.01)
            daemon = int(pidfile.read_text())
            assert os.getpgid(daemon) != child.pgid  # escaped its group ...
            assert daemon not in process.strays(child.pid, child.pid)  # ... and its parent links
        return child.pid, daemon, child.escaped

    pid, daemon, escaped = asyncio.run(asyncio.wait_for(body(), 30))
    assert not alive(daemon)  # it ignored SIGTERM: killed
    assert daemon in escaped and "daemonize.py" in escaped[daemon]
    assert process.group_members(pid) == []


def test_check_agent_escaping_daemon_and_crash(tmp_path: Path) -> None:
    """One run per agent, only the initialize checks (every agent run starts a daemon)."""
    pidfile = tmp_path / "agent-daemon.pid"
    options = Options(timeout=3.0, startup_timeout=10.0, eof_timeout=1.0, select=compile_selection("initialize"))
    report = check_command([*DAEMONIZE, str(pidfile), sys.executable, ECHO_AGENT], options)
    daemon = int(pidfile.read_text())
    assert not alive(daemon)
    assert "found and stopped" in escaped_note(report, daemon)
    assert report.exit_code() == 0, str(report)  # a finding, not a protocol failure

    crash = check_command([sys.executable, str(HYGIENE / "crash_agent.py")], options)
    assert crash.exit_code() == 2
    assert any("killed by SIGSEGV" in note for note in crash.notes), crash.notes
    text = "\n".join(crash.lines())
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2J\\x07" in text  # its stderr, shown escaped


def test_check_client_escaping_daemon(tmp_path: Path) -> None:
    pidfile = tmp_path / "client-daemon.pid"
    command = [*DAEMONIZE, str(pidfile), sys.executable, ECHO_CLIENT, "{agent}"]
    report = check_client_command(command, ClientOptions(timeout=3.0, idle=1.0))
    daemon = int(pidfile.read_text())
    assert not alive(daemon)
    assert "started by client process" in escaped_note(report, daemon)
    assert not [r for r in report.results if r.status == "failed"], str(report)
