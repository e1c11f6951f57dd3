"""check-agent's info-load-after-restart (issue 27 §9) against tests/fixtures/agents/restart_agent.py
over stdio: an agent whose sessions survive its restart passes; one that keeps them in memory is
recorded `not exercised`; one whose replay after the restart differs from the live turn is
`failed`. All at the info tier: none of them changes the exit code."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from agent.testing import Options, Report, check_agent, check_command, compile_selection

AGENT = Path(__file__).parent / "fixtures" / "agents" / "restart_agent.py"
ONLY = Options(select=compile_selection("info-load-after-restart"), timeout=20)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Report]]:
    keeps, lossy = tmp_path_factory.mktemp("keeps"), tmp_path_factory.mktemp("lossy")
    variants = {"keeps": ["--state", str(keeps)], "forgets": []}
    with ThreadPoolExecutor(2) as pool:  # independent runs at once
        futures = {k: pool.submit(check_command, [sys.executable, str(AGENT), *v], ONLY) for k, v in variants.items()}
        # in-process, a fresh agent object per run is the restart (cheaper than processes)
        sys.path.insert(0, str(AGENT.parent))
        from restart_agent import RestartAgent

        done = {"lossy": check_agent(lambda: RestartAgent(str(lossy), lossy=True), ONLY)}
        yield done | {key: future.result() for key, future in futures.items()}


def test_a_session_kept_across_a_restart_passes(reports: dict[str, Report]) -> None:
    result = reports["keeps"].result("info-load-after-restart")
    assert (result.status, result.detail) == ("passed", "4 updates replayed by a restarted agent"), result
    assert result.warnings == []


def test_an_agent_that_forgets_on_restart_is_recorded_not_failed(reports: dict[str, Report]) -> None:
    report = reports["forgets"]
    result = report.result("info-load-after-restart")
    assert result.status == "not exercised" and result.check.tier == "info", result
    assert "-32002" in result.detail and "only while it runs" in result.detail
    assert report.exit_code(strict=True) == 0  # info: never counted against the agent


def test_a_replay_that_differs_after_a_restart_is_reported(reports: dict[str, Report]) -> None:
    report = reports["lossy"]
    result = report.result("info-load-after-restart")
    assert result.status == "failed", result
    assert "live ('agent_message_chunk', 'echo: restart'), replayed ('agent_message_chunk', 'echo: ')" in result.detail
    assert report.exit_code(strict=True) == 0
