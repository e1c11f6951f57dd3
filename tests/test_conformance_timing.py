"""check-agent times by silence, not by total (issue 30 §2): a stream that flows never times out,
a session's first call gets the start-up budget, an agent that computes while it starts (a loaded
machine) is slow, not silent, and one that waits is silent. Each agent here is slower than the
run's timeout in total and breaks no rule: a verdict that changes with them would change with the
machine's load. The controls show each budget is what makes the difference."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from agent.testing import Options, Report, check_agent, check_command, compile_selection

AGENTS = Path(__file__).resolve().parent / "fixtures" / "agents"
sys.path.insert(0, str(AGENTS))

from in_process_agents import LazyBackend, SlowStream  # noqa: E402


def statuses(report: Report, *ids: str) -> dict[str, str]:
    return {check_id: report.result(check_id).status for check_id in ids}


def test_a_stream_longer_than_the_timeout_never_times_out() -> None:
    # 6 chunks 0.3 s apart: 1.8 s in all, never 1 s without a line.
    report = check_agent(SlowStream, Options(timeout=1.0, select=compile_selection("prompt-turn")))
    assert statuses(report, "prompt-turn") == {"prompt-turn": "passed"}, str(report)


def test_a_sessions_first_call_gets_the_startup_budget() -> None:
    # Its first set_mode and first prompt take 1.5 s each: past the 1 s timeout, within the 3 s budget.
    chosen = compile_selection("session-modes or prompt-turn")
    report = check_agent(LazyBackend, Options(timeout=1.0, startup_timeout=3.0, select=chosen))
    assert statuses(report, "session-modes", "prompt-turn") == {
        "session-modes": "passed",
        "prompt-turn": "passed",
    }, str(report)
    # The control: with no more start-up budget than the timeout, the first call times out.
    report = check_agent(LazyBackend, Options(timeout=1.0, startup_timeout=1.0, select=chosen))
    assert report.result("session-modes").status != "passed", str(report)
    assert "silence" in report.result("session-modes").detail, str(report)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the CPU an agent uses is read from Linux's /proc")
@pytest.mark.parametrize(("how", "seconds", "verdict"), [("busy", "1.5", "passed"), ("asleep", "4", "failed")])
def test_an_agent_that_computes_while_it_starts_is_slow_not_silent(how: str, seconds: str, verdict: str) -> None:
    # With a 1 s start-up budget: 1.5 s of computing before it reads its first line (imports on
    # a loaded machine) extends the budget; 4 s asleep does not (its interpreter's own start-up
    # may extend it once or twice, never for 4 s).
    argv = [sys.executable, str(AGENTS / "slow_start.py")]
    env = dict(os.environ, SLOW_START=how, SLOW_START_SECONDS=seconds)
    options = Options(timeout=1.0, startup_timeout=1.0, select=compile_selection("initialize and not version"))
    report = check_command(argv, options, env=env)
    result = report.result("initialize")
    assert result.status == verdict, str(report)
    if verdict == "failed":
        assert "no answer within 1 s of silence" in result.detail, str(report)
