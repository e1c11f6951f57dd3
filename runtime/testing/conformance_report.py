"""What a conformance run reports: one result per check, the whole report, and the assertion
helper for tests. (`conformance` is the public façade.)"""

from __future__ import annotations

import dataclasses
from typing import Any

from .conformance_checks import STATUSES, Check, Status
from .runners import Line

Outcome = tuple[Status, str, Line | None, list[str]]
"""What a probe settles a check with: status, detail, the offending line, warnings."""


@dataclasses.dataclass
class CheckResult:
    check: Check
    status: Status
    detail: str = ""
    offending: str | None = None
    """The offending message (a line the agent sent), when there is one."""
    warnings: list[str] = dataclasses.field(default_factory=list[str])

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.check.id,
            "title": self.check.title,
            "level": self.check.level,
            "doc": self.check.doc,
            "rule": self.check.rule,
            "status": self.status,
            "detail": self.detail,
            "offending": self.offending,
            "warnings": list(self.warnings),
        }


@dataclasses.dataclass
class Report:
    """The result of every check, in the order of `CHECKS`."""

    target: str
    results: list[CheckResult]

    def result(self, check_id: str) -> CheckResult:
        for result in self.results:
            if result.check.id == check_id:
                return result
        raise KeyError(check_id)

    def failures(self, strict: bool = False) -> list[CheckResult]:
        """The failed checks that fail the run: MUST ones (and SHOULD ones if `strict`)."""
        levels = ("MUST", "SHOULD") if strict else ("MUST",)
        return [r for r in self.results if r.status == "failed" and r.check.level in levels]

    def ok(self, strict: bool = False) -> bool:
        return not self.failures(strict)

    def counts(self) -> dict[Status, int]:
        return {status: sum(r.status == status for r in self.results) for status in STATUSES}

    def summary(self) -> str:
        counts = self.counts()
        return (
            f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} "
            f"skipped, {counts['not testable']} not testable"
        )

    def lines(self) -> list[str]:
        out: list[str] = []
        for r in self.results:
            text = f"{r.status.upper():<12} [{r.check.level}] {r.check.id}: {r.check.title}"
            out.append(text + (f" -- {r.detail}" if r.detail else ""))
            if r.status == "failed":
                out.append(f"    rule ({r.check.doc}): {r.check.rule}")
            if r.offending:
                out.append(f"    offending: {r.offending}")
            out += [f"    warning: {warning}" for warning in r.warnings]
        out.append(self.summary())
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "results": [r.to_dict() for r in self.results],
            "counts": dict(self.counts()),
            "ok": self.ok(),
            "ok_strict": self.ok(strict=True),
        }


def assert_conforms(report: Report, strict: bool = False) -> None:
    """Raise AssertionError (the whole report as its message) unless every MUST check passed
    (every SHOULD one too if `strict`): one line for pytest."""
    if not report.ok(strict):
        failed = ", ".join(r.check.id for r in report.failures(strict))
        raise AssertionError(f"{report.target} fails {failed}\n{report}")
