"""Output formats of `acp-codegen diff`: text (default), json and markdown.

All three list the same changes in the same stable order (methods by wire name, then types by name;
within a target by kind, then member) and say for each whether it breaks an agent and/or a client.

The JSON document (`--format json`), version 1::

    {
      "format": "acp-codegen-diff/1",
      "old": {"schema": "v1.20.0/", "release": "1.20.0", "unstable": false},
      "new": {"schema": "v1", "release": "1.21.0", "unstable": false},
      "summary": {"changes": 38, "breaking": {"agent": 0, "client": 1}},
      "changes": [
        {
          "section": "methods" | "types",
          "kind": "field-added",            # one of codegen.diff.KINDS
          "target": "ClientCapabilities",   # a type name, or a method's wire name
          "member": "auth",                 # field wire name / enum value / variant, or null
          "old": null,                      # the old shape, as text, or null
          "new": "AuthCapabilities, optional",
          "breaking": {"agent": false, "client": false},
          "reason": "",                     # why it breaks; "" when it breaks nobody
          "message": "field auth added: AuthCapabilities, optional"
        }
      ]
    }

Keys are only ever added within a format version; consumers should ignore keys they do not know.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Literal

from .diff import SIDES, Change, DiffReport

Format = Literal["text", "json", "markdown"]
FORMAT_ID = "acp-codegen-diff/1"

# How each kind of change reads (`message`).
TEMPLATES = {
    "method-added": "added: {new}",
    "method-removed": "removed (was: {old})",
    "method-kind-changed": "{old} -> {new}",
    "method-params-changed": "params type {old} -> {new}",
    "method-result-changed": "result type {old} -> {new}",
    "method-notification-changed": "params type when sent as a notification {old} -> {new}",
    "method-side-changed": "handled by {old} -> {new}",
    "method-stability-changed": "{old} -> {new}",
    "type-added": "added ({new})",
    "type-removed": "removed (was: {old})",
    "type-kind-changed": "kind {old} -> {new}",
    "type-stability-changed": "{old} -> {new}",
    "alias-type-changed": "aliased type {old} -> {new}",
    "field-added": "field {member} added: {new}",
    "field-removed": "field {member} removed (was: {old})",
    "field-renamed": "field {member}: Python attribute {old} -> {new}",
    "field-required-changed": "field {member}: {old} -> {new}",
    "field-nullable-changed": "field {member}: {old} -> {new}",
    "field-type-changed": "field {member}: type {old} -> {new}",
    "enum-value-added": 'value "{member}" added',
    "enum-value-removed": 'value "{member}" removed',
    "enum-open-changed": "{old} -> {new}",
    "union-tag-changed": "tag property {old} -> {new}",
    "variant-added": "variant {member} added: {new}",
    "variant-removed": "variant {member} removed (was: {old})",
    "variant-tag-changed": "variant {member}: {old} -> {new}",
    "variant-type-changed": "variant {member}: type {old} -> {new}",
}
_HEADINGS = {"methods": "Methods", "types": "Types"}


def message(change: Change) -> str:
    """One line saying what changed, e.g. `field auth added: AuthCapabilities, optional`."""
    text = TEMPLATES[change.kind].format(member=change.member, old=change.old, new=change.new)
    if change.kind in ("variant-added", "variant-removed") and change.member in (change.old, change.new):
        text = f"variant {change.member} {change.kind.split('-')[1]}"  # untagged: the member is its type
    return text


def _mark(change: Change) -> str:
    if change.kind.endswith("-added"):
        return "+"
    return "-" if change.kind.endswith("-removed") else "~"


def _who(change: Change) -> str:
    return " and ".join(side for side in SIDES if side in change.breaking)


def _count(report: DiffReport, side: str) -> int:
    return len(report.breaking(side))


def _changes(report: DiffReport) -> str:
    return f"{len(report.changes)} change{'' if len(report.changes) == 1 else 's'}"


def _title(report: DiffReport) -> str:
    unstable = " (unstable)" if report.new.unstable else ""
    return (
        f"ACP schema diff{unstable}: {report.old.release} ({report.old.label}) -> "
        f"{report.new.release} ({report.new.label})"
    )


def render_text(report: DiffReport) -> str:
    lines = [_title(report)]
    if not report.changes:
        return "\n".join([*lines, "no API changes", ""])
    lines.append(
        f"{_changes(report)}; breaking for agents: {_count(report, 'agent')}, for clients: {_count(report, 'client')}"
    )
    for section, heading in _HEADINGS.items():
        changes = [c for c in report.changes if c.section == section]
        if changes:
            lines += ["", f"{heading}:"]
        for c in changes:
            line = f"  {_mark(c)} {c.target}: {message(c)}"
            if c.breaking:
                line += f"  [BREAKING for {_who(c)}: {c.reason}]"
            lines.append(line)
    return "\n".join(lines) + "\n"


def render_json(report: DiffReport) -> str:
    doc = {
        "format": FORMAT_ID,
        "old": {"schema": report.old.label, "release": report.old.release, "unstable": report.old.unstable},
        "new": {"schema": report.new.label, "release": report.new.release, "unstable": report.new.unstable},
        "summary": {
            "changes": len(report.changes),
            "breaking": {side: _count(report, side) for side in SIDES},
        },
        "changes": [
            {
                "section": c.section,
                "kind": c.kind,
                "target": c.target,
                "member": c.member,
                "old": c.old,
                "new": c.new,
                "breaking": {side: side in c.breaking for side in SIDES},
                "reason": c.reason,
                "message": message(c),
            }
            for c in report.changes
        ],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: DiffReport) -> str:
    old, new = report.old, report.new
    unstable = " (with unstable)" if new.unstable else ""
    lines = [f"### ACP schema changes{unstable}: {old.release} → {new.release}", ""]
    if not report.changes:
        return "\n".join([*lines, "No API changes.", ""])
    lines.append(
        f"{_changes(report)} · breaking for agents: **{_count(report, 'agent')}** · "
        f"breaking for clients: **{_count(report, 'client')}**"
    )
    for section, heading in _HEADINGS.items():
        changes = [c for c in report.changes if c.section == section]
        if not changes:
            continue
        what = "Method" if section == "methods" else "Type"
        lines += ["", f"#### {heading}", "", f"| | {what} | Change | Breaks agent | Breaks client |", "|" + "---|" * 5]
        for c in changes:
            text = _cell(message(c)) + (f" — _{_cell(c.reason)}_" if c.reason else "")
            flags = " | ".join("**yes**" if side in c.breaking else "" for side in SIDES)
            lines.append(f"| {_mark(c)} | `{_cell(c.target)}` | {text} | {flags} |")
    return "\n".join(lines) + "\n"


RENDERERS: dict[Format, Callable[[DiffReport], str]] = {
    "text": render_text,
    "json": render_json,
    "markdown": render_markdown,
}


def render(report: DiffReport, fmt: Format = "text") -> str:
    return RENDERERS[fmt](report)
