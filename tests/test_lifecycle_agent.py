"""examples/lifecycle_agent.py, the full-lifecycle agent on the session layer: at most 60
non-blank lines, imports included, and check-agent finds no fault in it (run as a user runs it,
with its sessions in a SQLite file)."""

from __future__ import annotations

import sys
from pathlib import Path

from agent.testing import Options, check_command

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "lifecycle_agent.py"


def test_it_fits_in_60_non_blank_lines() -> None:
    lines = [line for line in EXAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) <= 60, len(lines)


def test_check_agent_finds_no_fault(tmp_path: Path) -> None:
    command = [sys.executable, str(EXAMPLE), "--store", f"sqlite:{tmp_path / 'sessions.db'}"]
    report = check_command(command, Options(timeout=20))
    failed = {r.check.id for r in report.results if r.status in ("failed", "not testable")}
    assert failed == set(), str(report)
    served = {"session-load", "session-list", "session-resume", "session-close", "session-delete", "config-set"}
    assert {r.check.id for r in report.results if r.status == "passed"} >= served, str(report)
    assert (tmp_path / "sessions.db").is_file()  # the sessions were kept in the store
