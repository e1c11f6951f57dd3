"""What the conformance commands share (`check-agent`, and `check-client` on the same layer):
the generated bindings they run on (made once, cached), parsing the options every one takes
(`-k`, `--env`, `--junit-xml`), and printing a report with its exit code.

A command: `module = load_conformance(schema, unstable, "client")` (the client-role package
checks agents; the agent-role package checks clients), build its options, run, then
`finish(report, output=..., strict=...)`, which prints, writes the JUnit file and exits
0 (conformant), 1 (not) or 2 (cannot be checked).
"""

from __future__ import annotations

import compileall
import dataclasses
import hashlib
import importlib
import logging
import os
import py_compile
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, NoReturn

import typer

from . import __version__
from .errors import CodegenError
from .report import exit_with_problems
from .resources import runtime_dir, templates_dir

PACKAGE_PREFIX = "acp_check_"
Role = Literal["agent", "client"]

# The options both commands declare alike (the role-specific ones, and those whose help names
# the peer, stay in check_agent.py / check_client.py).
SCHEMA_OPTION: Any = typer.Option(
    None, "--schema", "-s", help="Schema the bindings are generated from (default: bundled v1)."
)
UNSTABLE_OPTION: Any = typer.Option(False, "--unstable", help="Use the unstable schema.")
JSON_OPTION: Any = typer.Option(
    False, "--json", help="Print the report as JSON (failures with their transcript and stderr)."
)
JUNIT_XML_OPTION: Any = typer.Option(
    None, "--junit-xml", metavar="PATH", help="Also write the report as JUnit XML (one testcase per check)."
)
LIST_OPTION: Any = typer.Option(False, "--list", help="List the checks and exit.")
STRICT_OPTION: Any = typer.Option(False, "--strict", help="Fail on failed SHOULD checks too.")


def env_option(peer: str) -> Any:
    """`--env KEY=VALUE` (repeatable), for the `peer` the command starts."""
    return typer.Option(None, "--env", metavar="KEY=VALUE", help=f"Set in the {peer}'s environment (repeatable).")


def cache_root() -> Path:
    """$ACP_CODEGEN_CACHE, else $XDG_CACHE_HOME/acp-codegen, else ~/.cache/acp-codegen."""
    given = os.environ.get("ACP_CODEGEN_CACHE")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "acp-codegen"


def bindings_key(schema: str | None, unstable: bool, role: Role = "client") -> str:
    """A digest of everything the bindings are made from: generator version, role, schema
    files, templates and runtime sources."""
    from .load import locate  # imported here: `acp-codegen --version` does not need the pipeline

    files = locate(schema, unstable)
    digest = hashlib.sha256(f"{__version__}\0{unstable}\0{role}\0".encode())
    inputs = [files.schema, files.meta, files.stable_schema, files.stable_meta]
    inputs += sorted(templates_dir().glob("*.jinja")) + sorted(runtime_dir().rglob("*.py"))
    for path in inputs:
        if path is not None and path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _write_package(root: Path, package: str, schema: str | None, unstable: bool, role: Role) -> None:
    """Generate the bindings into root/package, atomically (a rename at the end), with their
    bytecode (written even under PYTHONDONTWRITEBYTECODE: each check run imports them)."""
    target = root / package
    if (target / "__init__.py").is_file():
        return
    from .generate import Target, generate_files  # imported here: a cached package does not need it

    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    try:
        out = staging / package
        files = generate_files(Target(role, out, schema, unstable, package))
        for rel, text in files.items():
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        compileall.compile_dir(out, quiet=2, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        try:
            os.replace(out, target)
        except OSError:
            if not (target / "__init__.py").is_file():  # not a concurrent run that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_conformance(
    schema: str | None, unstable: bool, role: Role = "client", module: str = "testing.conformance"
) -> ModuleType:
    """`module` (`testing.conformance`) of the generated `role` package for (schema,
    unstable), from the cache or freshly made (exits 2 with the problems if the schema is bad)."""
    package = PACKAGE_PREFIX + ("" if role == "client" else role + "_") + bindings_key(schema, unstable, role)
    root = cache_root()
    try:
        try:
            _write_package(root, package, schema, unstable, role)
        except OSError:  # no writable cache: a private temporary one, for this process only
            root = Path(tempfile.mkdtemp(prefix="acp-codegen-check-"))
            _write_package(root, package, schema, unstable, role)
    except CodegenError as exc:
        exit_with_problems(exc)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    loaded = importlib.import_module(f"{package}.{module}")
    # The peer side's own log lines (a dropped invalid notification, ...) are the report's
    # business, not stderr's.
    quiet = logging.getLogger(package)
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    return loaded


# -- options ------------------------------------------------------------------------------
def fail_usage(message: str, fix: str = "") -> NoReturn:
    """A bad option: one line on stderr, exit 2."""
    typer.echo(f"error: {message}" + (f" (fix: {fix})" if fix else ""), err=True)
    raise typer.Exit(2)


def parse_env(pairs: list[str] | None) -> dict[str, str]:
    """`--env KEY=VALUE` options as a mapping (exit 2 on one without `=`)."""
    env: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail_usage(f"--env {pair!r} is not KEY=VALUE", "--env ANTHROPIC_API_KEY=sk-...")
        env[key] = value
    return env


def child_env(extra: dict[str, str]) -> dict[str, str] | None:
    """The environment for the peer: ours plus `--env` (None: simply ours)."""
    return dict(os.environ, **extra) if extra else None


def parse_selection(
    module: ModuleType, expr: str | None, extra: Sequence[Any] = ()
) -> Callable[[str], bool] | None:
    """The `-k` matcher (exit 2 on a bad expression, or one selecting none of the module's
    checks and `extra`); None without `-k`."""
    if not expr:
        return None
    try:
        matcher: Callable[[str], bool] = module.compile_selection(expr)
    except ValueError as exc:
        fail_usage(str(exc), "-k 'initialize or session and not load'")
    if not any(matcher(check.id) for check in (*module.CHECKS, *extra)):
        fail_usage(f"-k {expr!r} selects no check", "see the check ids: acp-codegen check-agent --list")
    return matcher


def parse_cwd(cwd: str | None) -> str | None:
    """`--cwd DIR`: an existing directory, made absolute (exit 2 otherwise)."""
    if cwd is None:
        return None
    if not os.path.isdir(cwd):
        fail_usage(f"--cwd {cwd!r} is not a directory")
    return os.path.realpath(cwd)


def positive(name: str, value: float) -> float:
    if value <= 0:
        fail_usage(f"{name} must be positive")
    return value


def list_checks(module: ModuleType, extra: Sequence[Any] = ()) -> NoReturn:
    """`--list`: every check id, tier and title (the module's, then `extra`); exit 0."""
    for check in (*module.CHECKS, *extra):
        typer.echo(f"{check.id:<28} {check.tier:<10} {check.title}")
    raise typer.Exit(0)


@dataclasses.dataclass(frozen=True)
class Output:
    """How the report is shown: `--json` on stdout instead of lines, `--junit-xml PATH`."""

    as_json: bool = False
    junit_xml: str | None = None


def finish(module: ModuleType, report: Any, output: Output, strict: bool) -> NoReturn:
    """Print the report (lines, or JSON), write the JUnit file, exit with the report's code."""
    if output.junit_xml:
        try:
            Path(output.junit_xml).write_text(module.junit_xml(report), encoding="utf-8")
        except OSError as exc:
            typer.echo(f"error: cannot write --junit-xml {output.junit_xml}: {exc}", err=True)
            raise typer.Exit(2) from None
    if output.as_json:
        if report.cannot_run:
            typer.echo(f"error: cannot check {report.target}: {report.cannot_run}", err=True)
        typer.echo(module.report_json(report, strict))
    else:
        for line in report.lines(strict):
            typer.echo(line)
    raise typer.Exit(report.exit_code(strict))
