"""What a conformance run reports, for any peer (agent or client checks alike): the rules
(`Check`), one result per rule (`CheckResult`), the whole report (`Report`) with its tier
summary, verdict and exit code, and the assertion helper for tests. Nothing here knows what
is checked; `conformance_output` writes a report as JUnit XML or JSON.

Tiers, as the protocol's own test kit (acp-tck) has them: `MUST` (mandatory), `capability`
(MUST, when the peer advertises the feature), `SHOULD` (advisory) and `info` (recorded, never
failed). A MUST or capability check that could not run (`not testable`) counts against the
verdict as a failure does: a conformance tool must not pass what it never tested. One fault,
one failure: a check that could not judge because an earlier check's fault blocked it is
reported `blocked by <check>` (`blocked_by`), and only its root cause counts.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Final, Literal

Level = Literal["MUST", "SHOULD", "INFO"]
Tier = Literal["MUST", "capability", "SHOULD", "info"]
TIERS: Final[tuple[Tier, ...]] = ("MUST", "capability", "SHOULD", "info")
Status = Literal["passed", "failed", "skipped", "not testable", "not exercised"]
STATUSES: Final[tuple[Status, ...]] = (
    "passed",
    "failed",
    "skipped",
    "not testable",
    "not exercised",
)
"""`skipped`: the feature is not advertised; `not testable`: the check could not run (with the
reason); `not exercised`: it ran, but the case it is about did not come up (a turn that ended
before its cancel arrived), so it is no pass."""

# What a terminal would act on rather than show: C0/C1 controls (ESC, BEL, CR, ...), DEL, and
# the bidirectional overrides; a peer's bytes in a text report are shown escaped instead.
_UNPRINTABLE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with its control characters escaped (`\x1b`, `\n`, `\u202e`), for a terminal."""
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


EXIT_OK: Final = 0
EXIT_NOT_CONFORMANT: Final = 1
EXIT_CANNOT_RUN: Final = 2


@dataclasses.dataclass(frozen=True)
class Check:
    """One protocol rule: what is checked, and where the docs say so."""

    id: str
    title: str
    level: Level
    doc: str
    """The page and section of the ACP docs (protocol v1) the rule comes from."""
    rule: str
    """The sentence enforced, as the docs put it."""
    capability: str | None = None
    """The advertised capability that gates the check (a MUST then is the `capability` tier)."""
    area: str = ""
    """The acp-tck requirement(s) it covers (`ACP-INIT-003`), for cross-reference."""

    @property
    def tier(self) -> Tier:
        if self.level == "INFO":
            return "info"
        if self.level == "SHOULD":
            return "SHOULD"
        return "capability" if self.capability else "MUST"


@dataclasses.dataclass
class CheckResult:
    check: Check
    status: Status
    detail: str = ""
    offending: str | None = None
    """The offending message (a line the peer sent), when there is one."""
    warnings: list[str] = dataclasses.field(default_factory=list[str])
    duration: float = 0.0
    """Seconds the check took (its own peers, from start to settle)."""
    blocked: str = ""
    """For `not testable`: the short cause and the fix, shown in the summary (e.g. `blocked by
    authentication: pass --auth-method ID and the agent's env`)."""
    blocked_by: str = ""
    """For `not testable`: the check whose fault kept this one from judging (it failed, or is
    itself untested). One fault, one failure: the root cause counts against the run, this
    result does not."""
    transcript: list[str] = dataclasses.field(default_factory=list[str])
    """The check's wire lines, `-> ` sent and `<- ` received (kept for failures)."""
    stderr: list[str] = dataclasses.field(default_factory=list[str])
    """The tail of the peer's stderr during the check (kept for failures)."""

    @property
    def counts_against(self) -> bool:
        """Whether this result fails the run (SHOULD failures only under `strict`)."""
        tier = self.check.tier
        if self.blocked_by:  # its root cause counts instead
            return False
        if tier in ("MUST", "capability"):
            return self.status in ("failed", "not testable")
        return False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.check.id,
            "title": self.check.title,
            "level": self.check.level,
            "tier": self.check.tier,
            "capability": self.check.capability,
            "doc": self.check.doc,
            "rule": self.check.rule,
            "area": self.check.area,
            "status": self.status,
            "detail": self.detail,
            "offending": self.offending,
            "warnings": list(self.warnings),
            "duration": round(self.duration, 3),
        }
        if self.blocked:
            out["blocked"] = self.blocked
        if self.blocked_by:
            out["blocked_by"] = self.blocked_by
        if self.status in ("failed", "not testable"):
            out["transcript"] = list(self.transcript)
            out["stderr"] = list(self.stderr)
        return out


@dataclasses.dataclass
class Report:
    """The result of every check (in the order of the kit's check list)."""

    target: str
    results: list[CheckResult]
    cannot_run: str = ""
    """Why the target could not be checked at all (exit 2): e.g. it exited before answering
    `initialize`, with its stderr tail. Empty when it could be checked."""
    elapsed: float = 0.0
    """Wall seconds for the whole run."""
    notes: list[str] = dataclasses.field(default_factory=list[str])
    """Findings about the processes under test that no protocol rule covers, so they do not
    change the verdict: a crash (with its exit status or signal), a process that escaped the
    peer's process group (it was found and stopped)."""

    def result(self, check_id: str) -> CheckResult:
        for result in self.results:
            if result.check.id == check_id:
                return result
        raise KeyError(check_id)

    def failures(self, strict: bool = False) -> list[CheckResult]:
        """The results that fail the run: failed or untested MUST and capability checks (and
        failed SHOULD ones if `strict`)."""
        return [
            r
            for r in self.results
            if r.counts_against or (strict and r.check.tier == "SHOULD" and r.status == "failed")
        ]

    def ok(self, strict: bool = False) -> bool:
        return not self.cannot_run and not self.failures(strict)

    def exit_code(self, strict: bool = False) -> int:
        """0 conformant, 1 not, 2 the target could not be checked at all."""
        if self.cannot_run:
            return EXIT_CANNOT_RUN
        return EXIT_OK if self.ok(strict) else EXIT_NOT_CONFORMANT

    def counts(self) -> dict[Status, int]:
        return {status: sum(r.status == status for r in self.results) for status in STATUSES}

    def tier_summary(self) -> str:
        """`MUST 21/21 · capability 9/9 (4 not advertised) · SHOULD 11/12 · info 4`: per tier,
        passed of those that apply (the not advertised ones are counted apart)."""
        parts: list[str] = []
        for tier in TIERS:
            results = [r for r in self.results if r.check.tier == tier]
            if not results:
                continue
            count = {status: sum(r.status == status for r in results) for status in STATUSES}
            if tier == "info":
                parts.append(f"info {len(results) - count['skipped'] - count['not testable']}")
                continue
            applies = len(results) - count["skipped"]
            text = f"{tier} {count['passed']}/{applies}"
            blocked = sum(bool(r.blocked_by) for r in results)
            count["not testable"] -= blocked  # named apart: they count under their cause
            notes = [
                f"{count[status]} {'not advertised' if status == 'skipped' else status}"
                for status in ("failed", "not testable", "not exercised", "skipped")
                if count[status]
            ]
            if blocked:
                notes.insert(1 if count["failed"] else 0, f"{blocked} blocked")
            parts.append(text + (f" ({', '.join(notes)})" if notes else ""))
        return " · ".join(parts)

    def blockers(self) -> list[str]:
        """Why checks that count could not run: each distinct cause, with the checks it blocked."""
        causes: dict[str, list[str]] = {}
        for r in self.results:
            if r.status == "not testable" and (r.counts_against or r.blocked_by):
                causes.setdefault(r.blocked or r.detail, []).append(r.check.id)
        return [f"{_ids(ids)} not run: {cause}" for cause, ids in causes.items()]

    def summary(self) -> str:
        counts = self.counts()
        text = (
            f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} "
            f"skipped, {counts['not testable']} not testable"
        )
        if counts["not exercised"]:
            text += f", {counts['not exercised']} not exercised"
        blocked = sum(bool(r.blocked_by) for r in self.results)
        if blocked:
            text += f" ({blocked} of them blocked by an earlier failure)"
        return text

    def verdict(self, strict: bool = False) -> str:
        if self.cannot_run:
            return f"cannot check {self.target}: {self.cannot_run}"
        if self.ok(strict):
            return "conformant" + (" (strict)" if strict else "")
        return "not conformant: " + _ids([r.check.id for r in self.failures(strict)])

    def lines(self, strict: bool = False) -> list[str]:
        out: list[str] = []
        if self.cannot_run:
            out.append(f"error: cannot check {self.target}: {self.cannot_run}")
        for r in self.results:
            text = f"{r.status.upper():<13} [{r.check.tier}] {r.check.id}: {r.check.title}"
            text += (f" -- {r.detail}" if r.detail else "") + f" ({r.duration:.2f} s)"
            out.append(text)
            if r.status == "failed":
                out.append(f"    rule ({r.check.doc}): {r.check.rule}")
            if r.offending:
                out.append(f"    offending: {r.offending}")
            out += [f"    warning: {warning}" for warning in r.warnings]
        out += self.blockers()
        out += [f"note: {note}" for note in self.notes]
        out.append(f"{self.tier_summary()} -- {self.verdict(strict)} ({self.elapsed:.1f} s)")
        out.append(self.summary())
        return [printable(line) for line in out]  # a peer's bytes never reach the terminal raw

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self, strict: bool = False) -> dict[str, Any]:
        return {
            "target": self.target,
            "results": [r.to_dict() for r in self.results],
            "counts": dict(self.counts()),
            "tiers": self.tier_summary(),
            "blockers": self.blockers(),
            "cannot_run": self.cannot_run,
            "notes": list(self.notes),
            "elapsed": round(self.elapsed, 3),
            "ok": self.ok(),
            "ok_strict": self.ok(strict=True),
            "exit_code": self.exit_code(strict),
        }


def _ids(ids: list[str], most: int = 6) -> str:
    """Check ids for a summary line: all of a few, else the first ones and how many."""
    if len(ids) <= most:
        return ", ".join(ids)
    return f"{', '.join(ids[: most - 1])} and {len(ids) - most + 1} more"


def assert_conforms(report: Report, strict: bool = False) -> None:
    """Raise AssertionError (the whole report as its message) unless every MUST check passed
    (every SHOULD one too if `strict`): one line for pytest."""
    if not report.ok(strict):
        failed = ", ".join(r.check.id for r in report.failures(strict)) or report.cannot_run
        raise AssertionError(f"{report.target} fails {failed}\n{report}")
