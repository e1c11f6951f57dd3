"""Errors as values: every stage collects `Problem`s and the CLI prints them in one place.

A problem says what is wrong, where (file + JSON pointer) and how to fix it, so that a user
never sees a traceback for bad input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input, e.g. a dangling `$ref`."""

    what: str
    file: str = ""
    pointer: str = ""
    fix: str = ""

    def line(self) -> str:
        where = self.file
        if self.pointer:
            where = f"{where}#{self.pointer}" if where else f"#{self.pointer}"
        text = f"{where}: {self.what}" if where else self.what
        if self.fix:
            text = f"{text} (fix: {self.fix})"
        return text


@dataclass
class CodegenError(Exception):
    """Raised by a stage that cannot go on; carries every problem found so far."""

    problems: list[Problem] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(p.line() for p in self.problems)


def fail(what: str, file: Path | str = "", pointer: str = "", fix: str = "") -> CodegenError:
    return CodegenError([Problem(what, str(file), pointer, fix)])
