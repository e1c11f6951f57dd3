"""Issue 30's false passes, closed: agents with one planted fault each (tests/fixtures/agents/
planted_faults.py, on the generated package) fail exactly the check they break, and the
legal-but-unusual variants fail nothing. All checked in-process, at once, in one module-scoped
fixture (each run mostly waits: the replay watch's 2 s of silence)."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from agent.testing import Report, check_agent

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "agents"))

import planted_faults  # noqa: E402

FAULTS = {
    "VersionAbove": "initialize-version",  # FP-1
    "ReplaysNothing": "session-load",  # FP-2
    "ReplaysLate": "session-load",  # FP-2, 1 s after the answer
}
LEGAL = ["Planted", "PromptsFail", "SlowReplay", "StateAfterLoad"]


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    names = [*FAULTS, *LEGAL]
    with ThreadPoolExecutor(len(names)) as pool:
        done = pool.map(lambda name: check_agent(getattr(planted_faults, name)), names)
        return dict(zip(names, done, strict=True))


def failed(report: Report) -> set[str]:
    return {r.check.id for r in report.results if r.status == "failed"}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_a_planted_fault_fails_exactly_its_check(name: str, reports: dict[str, Report]) -> None:
    report = reports[name]
    assert failed(report) == {FAULTS[name]}, str(report)
    assert report.result(FAULTS[name]).offending  # the line that shows it
    blocked = [r.check.id for r in report.results if r.status == "not testable"]
    assert not blocked, str(report)  # no collateral


def test_a_version_above_the_one_asked_is_named(reports: dict[str, Report]) -> None:
    result = reports["VersionAbove"].result("initialize-version")
    assert result.detail.startswith("answered version 2 to an initialize asking for 1")
    assert '"protocolVersion":2' in (result.offending or "").replace(" ", "")


def test_a_late_replay_is_caught_past_the_settle_window(reports: dict[str, Report]) -> None:
    result = reports["ReplaysLate"].result("session-load")
    assert "came after the session/load response" in result.detail
    assert "agent_message_chunk" in (result.offending or "") or "user_message_chunk" in (
        result.offending or ""
    )


@pytest.mark.parametrize("name", LEGAL)
def test_a_legal_variant_fails_nothing(name: str, reports: dict[str, Report]) -> None:
    assert failed(reports[name]) == set(), str(reports[name])


def test_a_load_after_a_failed_prompt_is_not_exercised(reports: dict[str, Report]) -> None:
    report = reports["PromptsFail"]
    load = report.result("session-load")
    assert load.status == "not exercised" and "the prompt before the load failed" in load.detail
    assert report.result("session-load-fresh").status == "passed"


def test_a_full_legal_replay_passes(reports: dict[str, Report]) -> None:
    for name in ("Planted", "SlowReplay", "StateAfterLoad"):
        load = reports[name].result("session-load")
        assert load.status == "passed" and load.detail == "2 updates replayed", name
