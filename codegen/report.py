"""Bad input, printed: the one place `CodegenError`s become `error:` lines and exit code 2."""

from __future__ import annotations

from typing import NoReturn

import typer

from .errors import CodegenError

MAX_SHOWN = 50  # problems printed; a broken schema can have thousands


def exit_with_problems(exc: CodegenError) -> NoReturn:
    """Print every problem as one `error: FILE#POINTER: WHAT (fix: HOW)` line; exit 2."""
    for problem in exc.problems[:MAX_SHOWN]:
        typer.echo(f"error: {problem.line()}", err=True)
    if len(exc.problems) > MAX_SHOWN:
        typer.echo(f"error: ... and {len(exc.problems) - MAX_SHOWN} more problems", err=True)
    raise typer.Exit(2)
