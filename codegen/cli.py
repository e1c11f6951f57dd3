"""The `acp-codegen` command line (Typer). Problems are printed here, in one place.

Start-up is kept short: the pipeline (the IR, Jinja, the diff) is imported inside the command
that needs it, and datamodel-code-generator only when a class model is built, so `--version`
and `--help` cost little more than Typer itself.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer
from typer.core import TyperCommand

if TYPE_CHECKING or importlib.util.find_spec("typer._click"):  # Typer 0.2x carries its own click
    from typer._click.core import Context
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
else:  # pragma: no cover - earlier Typers use click itself
    from click.core import Context
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from . import __version__
from .check_agent import check_agent_command
from .check_client import check_client_command
from .errors import CodegenError
from .format import FORMATTERS, Formatter
from .report import exit_with_problems

if TYPE_CHECKING:
    from .generate import Target
    from .templates import CustomTemplates

# The same choices as `codegen.diff_format.Format` (tests/test_format.py checks they match);
# spelled out here so that parsing the command line does not import the diff and the IR.
Format = Literal["text", "json", "markdown"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Generate typed, dependency-free Python bindings for the Agent Client Protocol (ACP).",
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

SCHEMA_FORMS = (
    "a bundled schema name (v1 = ACP 1.21.0, v2 = 2.0.0-alpha.3), a directory holding schema.json + meta.json, "
    "or a schema.json path with meta.json beside it"
)
SCHEMA_HELP = f"The schema: {SCHEMA_FORMS}. Default: v1."


FORMATTER_HELP = (
    f"Code formatter for the output: {' or '.join(FORMATTERS)} (default ruff; both are pinned and give "
    "byte-identical output)."
)

TEMPLATES_HELP = (
    "A directory of custom templates: each file replaces the bundled template or runtime source of the same "
    "name (see `acp-codegen templates --list`); the rest stay bundled."
)


def _custom(templates: str | None) -> CustomTemplates | None:
    from .templates import CustomTemplates

    return None if templates is None else CustomTemplates(Path(templates), templates)


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


def run_target(
    target: Target,
    check_only: bool,
    force: bool,
    files: dict[str, str] | None = None,
) -> int:
    """Generate (or check) one target; returns the exit code. `files`: already generated.
    The check's report (the diff) is the command's output: stdout, so that `> stale.diff` keeps it."""
    from .generate import check, preflight, write

    try:
        if files is None:
            preflight([target], check_only, force)  # before any schema work
        if check_only:
            report = check(target, files=files)
            if report:
                typer.echo(f"{target.out}: out of date; regenerate with: {target.command()}")
                for block in report:
                    typer.echo(block)
                return 1
            typer.echo(f"{target.out}: up to date")
            return 0
        result = write(target, force=force, files=files)
    except CodegenError as exc:
        exit_with_problems(exc)
    typer.echo(
        f"{target.out}: {len(result.written)} written, {len(result.unchanged)} unchanged, {len(result.removed)} removed"
    )
    for rel in result.kept:
        typer.echo(f"warning: {target.out / rel}: no longer generated but edited since, so left in place", err=True)
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
            False,
            "--force",
            help="Write into an --out folder of other files; overwrite or remove files acp-codegen did not generate.",
        ),
        formatter: Formatter = typer.Option("ruff", "--formatter", help=FORMATTER_HELP),
        templates: str | None = typer.Option(None, "--templates", metavar="DIR", help=TEMPLATES_HELP),
    ) -> None:
        from .generate import Target

        target = Target(role, out, schema, unstable, package, formatter=formatter, templates=_custom(templates))
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
    formatter: Formatter | None = typer.Option(
        None, "--formatter", help="Override the configured formatter: " + FORMATTER_HELP
    ),
    templates: str | None = typer.Option(
        None, "--templates", metavar="DIR", help="Override the configured templates: " + TEMPLATES_HELP
    ),
) -> None:
    """Generate every target listed under [tool.acp-codegen] in pyproject.toml."""
    from dataclasses import replace

    from .config import load_targets
    from .generate import generate_all, preflight

    try:
        targets = load_targets(config)
    except CodegenError as exc:
        exit_with_problems(exc)
    if schema is not None:
        targets = [replace(target, schema=schema) for target in targets]
    if unstable is not None:
        targets = [replace(target, unstable=unstable) for target in targets]
    if formatter is not None:
        targets = [replace(target, formatter=formatter) for target in targets]
    if templates is not None:
        targets = [replace(target, templates=_custom(templates)) for target in targets]
    try:
        preflight(targets, check_only, force)  # every target's own problems, before any schema work
        # Every target is generated before any is written or checked, so bad input leaves all of
        # them untouched; targets reading the same schema share one load + IR build.
        generated = generate_all(targets)
    except CodegenError as exc:
        exit_with_problems(exc)
    status = 0
    for target, files in zip(targets, generated, strict=True):
        status = max(status, run_target(target, check_only, force, files))
    raise typer.Exit(status)


class _PlainUsage(TyperCommand):
    """A usage line that names the arguments plainly, `[OPTIONS] OLD NEW` (Typer 0.2x writes a
    required one `{OLD}`)."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "").upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces


@app.command("diff", cls=_PlainUsage)
def diff_command(
    old: str = typer.Argument(..., metavar="OLD", help=f"The schema to compare from: {SCHEMA_FORMS}."),
    new: str = typer.Argument(..., metavar="NEW", help="The schema to compare to, in any of the forms OLD takes."),
    unstable: bool = typer.Option(False, "--unstable", help="Compare the unstable schemas (schema.unstable.json)."),
    fmt: Format = typer.Option("text", "--format", "-f", help="Output format: text, json or markdown."),
    fail_on_breaking: bool = typer.Option(
        False, "--fail-on-breaking", help="Exit 1 if any change is breaking (for the --for side, else for either)."
    ),
    side: Literal["agent", "client"] | None = typer.Option(
        None, "--for", help="With --fail-on-breaking: count only changes breaking this side (agent or client)."
    ),
) -> None:
    """What changed in the API between two schema versions, and whether it breaks agents or clients."""
    from .diff import diff_schemas
    from .diff_format import render

    try:
        report = diff_schemas(old, new, unstable)
    except CodegenError as exc:
        exit_with_problems(exc)
    typer.echo(render(report, fmt), nl=False)
    raise typer.Exit(1 if fail_on_breaking and report.breaking(side) else 0)


@app.command("templates")
def templates_command(
    list_: bool = typer.Option(False, "--list", help="Print the names a custom templates directory may override."),
    copy: str | None = typer.Option(
        None, "--copy", metavar="NAME", help="Copy the bundled template or runtime source NAME into DIR."
    ),
    dest: Path | None = typer.Argument(None, metavar="DIR", help="With --copy: the directory to copy into."),
    force: bool = typer.Option(False, "--force", help="With --copy: overwrite DIR/NAME if it exists."),
) -> None:
    """List the bundled templates, or copy one out as the start of a custom templates directory."""
    from .templates import bundled_names, copy_template

    if copy is None:
        if dest is not None:
            typer.echo("error: DIR is only used with --copy NAME DIR", err=True)
            raise typer.Exit(2)
        for name in bundled_names():
            typer.echo(name)
        raise typer.Exit(0)
    if dest is None:
        typer.echo("error: --copy NAME needs the directory to copy into: --copy NAME DIR", err=True)
        raise typer.Exit(2)
    try:
        target = copy_template(copy, dest, force)
    except CodegenError as exc:
        exit_with_problems(exc)
    typer.echo(f"copied {copy} to {target}; use it with --templates {dest}")


app.command("check-agent")(check_agent_command)
app.command("check-client")(check_client_command)


# One command per process, building hundreds of thousands of objects that live to its end (the
# class model's parse, the IR, the rendered text): with the default thresholds the cyclic GC
# rescans them ~430 times (three full passes), ~0.2 s of a 2 s `generate --check`.
_GC_THRESHOLDS = (50_000, 20, 100)


def entry() -> None:
    before = gc.get_threshold()
    gc.set_threshold(*_GC_THRESHOLDS)
    try:
        sys.exit(_run())
    except Exception as exc:  # a bug in acp-codegen, not bad input: still no traceback by default
        if os.environ.get("ACP_CODEGEN_DEBUG"):
            raise
        typer.echo(
            f"error: internal error in acp-codegen {__version__}: {type(exc).__name__}: {exc} "
            "(fix: please report it with the command you ran; ACP_CODEGEN_DEBUG=1 shows the traceback)",
            err=True,
        )
        sys.exit(3)
    finally:  # a caller that runs `entry` in-process (tests) keeps its own settings
        gc.set_threshold(*before)


def _run() -> int:
    """The command line, run: its exit status. Typer's own error printing is not used (see `_usage_error`)."""
    try:
        status = app(standalone_mode=False, prog_name="acp-codegen")
    except (UsageError, ClickException) as exc:
        return _usage_error(exc)
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        return 1
    except KeyboardInterrupt:
        return 130
    return status if isinstance(status, int) else 0


def _usage_error(exc: ClickException) -> int:
    """A command line Typer cannot parse: its usage and hint, then our one `error:` spelling
    (Typer's own printing says `Error:`)."""
    if isinstance(exc, NoArgsIsHelpError):  # no arguments at all: the help, as Typer prints it
        exc.show()
        return exc.exit_code
    ctx = exc.ctx if isinstance(exc, UsageError) else None
    if ctx is not None:
        typer.echo(ctx.get_usage(), err=True)
        if ctx.command.get_help_option(ctx) is not None:
            typer.echo(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", err=True)
        typer.echo("", err=True)
    typer.echo(f"error: {exc.format_message()}", err=True)
    return exc.exit_code


if __name__ == "__main__":
    entry()
