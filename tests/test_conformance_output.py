"""The conformance report layer, shared by check-agent and check-client: tiers and verdicts,
the one-line tier summary, the `-k` matcher, JUnit XML. No agent runs here."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from agent.testing import Check, CheckResult, Report, compile_selection, junit_xml  # generated/agent

MUST = Check("a-must", "t", "MUST", "d", "r")
GATED = Check("b-gated", "t", "MUST", "d", "r", capability="loadSession")
SHOULD = Check("c-should", "t", "SHOULD", "d", "r")
INFO = Check("d-info", "t", "INFO", "d", "r")


def report(*statuses: str, cannot_run: str = "") -> Report:
    results = [CheckResult(check, status) for check, status in zip((MUST, GATED, SHOULD, INFO), statuses, strict=True)]  # type: ignore[arg-type]
    return Report("agent", results, cannot_run)


def test_tiers_verdict_and_exit_codes() -> None:
    assert [c.tier for c in (MUST, GATED, SHOULD, INFO)] == ["MUST", "capability", "SHOULD", "info"]
    should_failed = report("passed", "skipped", "failed", "failed")
    assert should_failed.exit_code() == 0 and should_failed.exit_code(strict=True) == 1
    assert (
        should_failed.tier_summary() == "MUST 1/1 · capability 0/0 (1 not advertised) · SHOULD 0/1 (1 failed) · info 1"
    )
    untested = report("passed", "not testable", "not testable", "not testable")  # only MUST tiers count
    assert untested.exit_code() == 1 and [r.check.id for r in untested.failures()] == ["b-gated"]
    assert report("passed", "passed", "passed", "passed", cannot_run="it exited").exit_code() == 2
    unexercised = report("not exercised", "passed", "passed", "passed")  # no pass, no failure
    assert unexercised.exit_code() == 0 and "(1 not exercised)" in unexercised.tier_summary()


def test_blockers_say_why_and_group_checks_by_cause() -> None:
    blocked = report("not testable", "not testable", "not testable", "passed")
    for result in blocked.results[:3]:
        result.blocked = "blocked by authentication: pass `--auth-method ID`"
    assert blocked.blockers() == ["a-must, b-gated not run: blocked by authentication: pass `--auth-method ID`"]
    assert blocked.lines()[-2].endswith("not conformant: a-must, b-gated (0.0 s)")


@pytest.mark.parametrize(
    ("expr", "selected"),
    [
        ("initialize", ["initialize", "initialize-version"]),
        ("INITIALIZE and not version", ["initialize"]),
        ("session and not (load or modes)", ["session-new"]),
        ("cancel or eof", ["cancel", "exit-on-eof"]),
        (
            "",
            [
                "initialize",
                "initialize-version",
                "session-new",
                "session-load",
                "session-modes",
                "cancel",
                "exit-on-eof",
            ],
        ),
    ],
)
def test_selection_is_pytest_like(expr: str, selected: list[str]) -> None:
    ids = ["initialize", "initialize-version", "session-new", "session-load", "session-modes", "cancel", "exit-on-eof"]
    matcher = compile_selection(expr)
    assert [i for i in ids if matcher(i)] == selected


@pytest.mark.parametrize("expr", ["and x", "(a", "a b", "not", "a or", "a )"])
def test_a_bad_selection_says_where(expr: str) -> None:
    with pytest.raises(ValueError, match=r"^-k "):
        compile_selection(expr)


def test_junit_xml_is_junit_with_one_testcase_per_check() -> None:
    failing = report("failed", "not testable", "skipped", "passed", cannot_run="it exited (stderr: \x00boom)")
    failing.results[0].detail, failing.results[0].offending = "bad answer", '{"id":1}'
    failing.results[0].transcript = ["-> {}", "<- \x1b[31m"]  # control characters XML cannot hold
    failing.results[1].blocked = "blocked by initialize"
    suite = ET.fromstring(junit_xml(failing).split("\n", 1)[1]).find("testsuite")
    assert suite is not None
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "5", "failures": "1", "errors": "2", "skipped": "1",
    }  # fmt: skip
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert list(cases) == ["a-must", "b-gated", "c-should", "d-info", "start"]
    failure = cases["a-must"].find("failure")
    assert failure is not None and failure.get("message") == "bad answer"
    assert '{"id":1}' in (failure.text or "") and "\ufffd[31m" in (failure.text or "")
    error = cases["b-gated"].find("error")
    assert error is not None and error.get("message") == "blocked by initialize"
