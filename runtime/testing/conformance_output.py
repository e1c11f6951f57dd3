"""A conformance report for CI, whatever was checked: JUnit XML (one testcase per check),
JSON, and the `-k` selection of checks by id (pytest-like: `initialize and not version`).

    select = compile_selection("session and not load")   # ValueError on a bad expression
    checks = [check for check in CHECKS if select(check.id)]
    Path("report.xml").write_text(junit_xml(report))
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Final

from .conformance_report import CheckResult, Report

Matcher = Callable[[str], bool]
"""Whether a check id is selected."""

_TOKEN: Final = re.compile(r"\s*(\(|\)|[^\s()]+)")
_KEYWORDS: Final = frozenset({"and", "or", "not"})
# Characters XML 1.0 cannot carry at all (a peer's stray control bytes): shown as U+FFFD.
_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def compile_selection(expr: str) -> Matcher:
    """The matcher for a `-k` expression: words match as case-insensitive substrings of a
    check id, combined with `and`, `or`, `not` and parentheses (`not` binds tightest, then
    `and`, then `or`, as in pytest). An empty expression selects everything.

    ValueError (saying where) when the expression does not parse."""
    tokens = [m.group(1) for m in _TOKEN.finditer(expr)]
    if not tokens:
        return lambda check_id: True
    parser = _Parser(tokens, expr)
    matcher = parser.disjunction()
    if parser.pos != len(tokens):
        raise ValueError(f"-k {expr!r}: unexpected {tokens[parser.pos]!r}")
    return matcher


class _Parser:
    def __init__(self, tokens: list[str], expr: str) -> None:
        self.tokens = tokens
        self.expr = expr
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ValueError(f"-k {self.expr!r}: the expression ends too early")
        self.pos += 1
        return token

    def disjunction(self) -> Matcher:
        parts = [self.conjunction()]
        while self.peek() == "or":
            self.take()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else (lambda i: any(p(i) for p in parts))

    def conjunction(self) -> Matcher:
        parts = [self.negation()]
        while self.peek() == "and":
            self.take()
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else (lambda i: all(p(i) for p in parts))

    def negation(self) -> Matcher:
        if self.peek() == "not":
            self.take()
            inner = self.negation()
            return lambda i: not inner(i)
        token = self.take()
        if token == "(":
            inner = self.disjunction()
            if self.take() != ")":
                raise ValueError(f"-k {self.expr!r}: a '(' is not closed")
            return inner
        if token == ")" or token in _KEYWORDS:
            raise ValueError(f"-k {self.expr!r}: expected a word, got {token!r}")
        word = token.lower()
        return lambda i: word in i.lower()


# -- JUnit XML ------------------------------------------------------------------------------
def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _body(result: CheckResult) -> str:
    """The text of a failure: the rule, the offending message, the transcript and stderr."""
    lines = [f"{result.check.doc}: {result.check.rule}"]
    if result.offending:
        lines.append(f"offending: {result.offending}")
    lines += [f"warning: {warning}" for warning in result.warnings]
    if result.transcript:
        lines += ["", "transcript:", *result.transcript]
    if result.stderr:
        lines += ["", "stderr (tail):", *result.stderr]
    return _xml("\n".join(lines))


def junit_xml(report: Report, suite: str = "acp-conformance") -> str:
    """The report as JUnit XML: one testcase per check (classname `suite.tier`), a failed
    check a `<failure>` with the offending message, a MUST check that could not run an
    `<error>`, a skipped, untestable or unexercised one otherwise `<skipped>`. A target that
    could not be checked at all is one more `<error>` testcase."""
    cases: list[ET.Element] = []
    failures = errors = skipped = 0
    for r in report.results:
        case = ET.Element(
            "testcase",
            {
                "classname": f"{suite}.{r.check.tier}",
                "name": r.check.id,
                "time": f"{r.duration:.3f}",
            },
        )
        message = _xml(r.detail or r.status)
        if r.status == "failed" and r.check.tier != "info":
            failures += 1
            kind = f"{r.check.level} {r.check.doc}"
            ET.SubElement(case, "failure", {"message": message, "type": kind}).text = _body(r)
        elif r.status == "not testable" and r.counts_against:
            errors += 1
            text = _xml(r.blocked or r.detail)
            ET.SubElement(case, "error", {"message": text, "type": "not testable"}).text = _body(r)
        elif r.status in ("skipped", "not testable", "not exercised"):
            skipped += 1
            ET.SubElement(case, "skipped", {"message": f"{r.status}: {message}"})
        if r.detail or r.warnings:
            out = ET.SubElement(case, "system-out")
            out.text = _xml("\n".join([r.detail, *[f"warning: {w}" for w in r.warnings]]).strip())
        cases.append(case)
    if report.cannot_run:
        errors += 1
        case = ET.Element("testcase", {"classname": suite, "name": "start", "time": "0"})
        ET.SubElement(case, "error", {"message": _xml(report.cannot_run), "type": "cannot run"})
        cases.append(case)
    attributes = {
        "name": suite,
        "tests": str(len(cases)),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": str(skipped),
        "time": f"{report.elapsed:.3f}",
    }
    root = ET.Element("testsuites", {k: v for k, v in attributes.items() if k != "skipped"})
    testsuite = ET.SubElement(root, "testsuite", attributes)
    ET.SubElement(
        ET.SubElement(testsuite, "properties"),
        "property",
        {"name": "target", "value": _xml(report.target)},
    )
    testsuite.extend(cases)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def report_json(report: Report, strict: bool = False) -> str:
    """The report as JSON (`Report.to_dict`): each failure with its transcript and stderr."""
    return json.dumps(report.to_dict(strict), indent=2)
