"""The `acp-codegen` command line (Typer). Problems are printed here, in one place."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Literal, NoReturn

import typer

from . import __version__
from .config import load_targets
from .errors import CodegenError
from .generate import Target, check, write

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Generate typed, dependency-free Python bindings for the Agent Client Protocol (ACP).",
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

SCHEMA_HELP = (
    "Bundled schema name (v1 = ACP 1.21.0, the default; v2 = 2.0.0-alpha.3), a directory "
    "holding schema.json + meta.json, or a schema.json path with meta.json beside it."
)


def _report(exc: CodegenError) -> NoReturn:
    for problem in exc.problems:
        typer.echo(f"error: {problem.line()}", err=True)
    raise typer.Exit(2)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"acp-codegen {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """Generate ACP bindings: `acp-codegen agent --out myagent/acp/`."""


def run_target(target: Target, check_only: bool, force: bool) -> int:
    """Generate (or check) one target; returns the exit code."""
    try:
        if check_only:
            report = check(target)
            if report:
                typer.echo(f"{target.out}: out of date; regenerate with: {target.command()}", err=True)
                for block in report:
                    typer.echo(block, err=True)
                return 1
            typer.echo(f"{target.out}: up to date")
            return 0
        result = write(target, force=force)
    except CodegenError as exc:
        _report(exc)
    typer.echo(
        f"{target.out}: {len(result.written)} written, {len(result.unchanged)} unchanged, {len(result.removed)} removed"
    )
    return 0


def _role_command(role: Literal["agent", "client"]) -> None:
    peer = "client" if role == "agent" else "agent"

    def command(
        out: Path = typer.Option(..., "--out", "-o", help="Directory to write the package into."),
        schema: str | None = typer.Option(None, "--schema", "-s", help=SCHEMA_HELP),
        unstable: bool = typer.Option(
            False, "--unstable", help="Include the unstable types and methods (schema.unstable.json)."
        ),
        package: str | None = typer.Option(
            None, "--package", help="Import name of the package (default: the --out folder name)."
        ),
        check_only: bool = typer.Option(
            False, "--check", help="Write nothing; exit 1 with a diff if --out is out of date."
        ),
        force: bool = typer.Option(
            False, "--force", help="Overwrite or remove files in --out that acp-codegen did not generate."
        ),
    ) -> None:
        target = Target(role, out, schema, unstable, package)
        raise typer.Exit(run_target(target, check_only, force))

    command.__doc__ = (
        f"Generate bindings for writing an ACP {role}: types, the {role} base class, "
        f"a typed proxy for calling the {peer}, dispatch and the stdio runtime."
    )
    app.command(role)(command)


_role_command("agent")
_role_command("client")


@app.command("generate")
def generate_command(
    config: Path = typer.Option(Path("pyproject.toml"), "--config", help="The pyproject.toml to read."),
    schema: str | None = typer.Option(None, "--schema", "-s", help="Override every target's schema."),
    unstable: bool | None = typer.Option(None, "--unstable/--stable", help="Override every target's unstable flag."),
    check_only: bool = typer.Option(False, "--check", help="Write nothing; exit 1 if any target is out of date."),
    force: bool = typer.Option(False, "--force", help="Overwrite files acp-codegen did not generate."),
) -> None:
    """Generate every target listed under [tool.acp-codegen] in pyproject.toml."""
    try:
        targets = load_targets(config)
    except CodegenError as exc:
        _report(exc)
    status = 0
    for target in targets:
        if schema is not None:
            target = replace(target, schema=schema)
        if unstable is not None:
            target = replace(target, unstable=unstable)
        status = max(status, run_target(target, check_only, force))
    raise typer.Exit(status)


def entry() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    entry()
