"""`acp-codegen check-agent -- COMMAND...`: the conformance checks against any agent executable;
`acp-codegen check-agent --url URL`: against an agent served remotely (WebSocket or Streamable HTTP).

The checks themselves live in the generated package (`testing/conformance.py`,
`testing/conformance_remote.py`):
this command generates client-role bindings from the chosen schema once, keeps them in a
cache keyed by everything they are made from, imports them and runs
`conformance.check_command` on the agent's stdio (or `conformance_remote.check_url`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import shutil
import sys
import tempfile
import urllib.parse
from pathlib import Path
from types import ModuleType
from typing import Any

import typer

from . import __version__
from .errors import CodegenError
from .report import exit_with_problems
from .resources import runtime_dir, templates_dir

PACKAGE_PREFIX = "acp_check_"


def cache_root() -> Path:
    """$ACP_CODEGEN_CACHE, else $XDG_CACHE_HOME/acp-codegen, else ~/.cache/acp-codegen."""
    given = os.environ.get("ACP_CODEGEN_CACHE")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "acp-codegen"


def bindings_key(schema: str | None, unstable: bool) -> str:
    """A digest of everything the bindings are made from: generator version, schema files,
    templates and runtime sources."""
    from .load import locate  # imported here: `acp-codegen --version` does not need the pipeline

    files = locate(schema, unstable)
    digest = hashlib.sha256(f"{__version__}\0{unstable}\0".encode())
    inputs = [files.schema, files.meta, files.stable_schema, files.stable_meta]
    inputs += sorted(templates_dir().glob("*.jinja")) + sorted(runtime_dir().rglob("*.py"))
    for path in inputs:
        if path is not None and path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _write_package(root: Path, package: str, schema: str | None, unstable: bool) -> None:
    """Generate the client bindings into root/package, atomically (a rename at the end)."""
    from .generate import Target, generate_files  # imported here: `--version` does not need the pipeline

    target = root / package
    if (target / "__init__.py").is_file():
        return
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    try:
        out = staging / package
        files = generate_files(Target("client", out, schema, unstable, package))
        for rel, text in files.items():
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        try:
            os.replace(out, target)
        except OSError:
            if not (target / "__init__.py").is_file():  # not a concurrent run that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_bindings(schema: str | None, unstable: bool, module_name: str = "conformance") -> ModuleType:
    """A module of the generated client package for (schema, unstable), from the cache or
    freshly made."""
    package = PACKAGE_PREFIX + bindings_key(schema, unstable)
    root = cache_root()
    try:
        _write_package(root, package, schema, unstable)
    except OSError:  # no writable cache: a private temporary one, for this process only
        root = Path(tempfile.mkdtemp(prefix="acp-codegen-check-"))
        _write_package(root, package, schema, unstable)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module = importlib.import_module(f"{package}.testing.{module_name}")
    # The client side's own log lines (a dropped invalid notification, ...) are the report's
    # business, not stderr's.
    quiet = logging.getLogger(package)
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    return module


def check_agent_command(
    command: list[str] = typer.Argument(None, help="The agent command line, after `--`."),
    schema: str | None = typer.Option(
        None, "--schema", "-s", help="Schema the bindings are generated from (default: bundled v1)."
    ),
    unstable: bool = typer.Option(False, "--unstable", help="Use the unstable schema."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    strict: bool = typer.Option(False, "--strict", help="Fail on failed SHOULD checks too."),
    timeout: float = typer.Option(5.0, "--timeout", help="Seconds to wait for any one answer."),
    prompt: str = typer.Option("Hello", "--prompt", help="Text of the prompt the turn checks send."),
    cancel_prompt: str | None = typer.Option(
        None, "--cancel-prompt", help="Prompt the cancel check sends and cancels (one that runs long)."
    ),
    url: str | None = typer.Option(
        None,
        "--url",
        help="Check the agent served at this URL instead: ws:// or wss:// (WebSocket), http:// or https:// "
        "(Streamable HTTP). Needs acp-codegen[remote].",
    ),
) -> None:
    """Check that an ACP agent follows the protocol: `acp-codegen check-agent -- python agent.py`,
    or `acp-codegen check-agent --url ws://127.0.0.1:8000/acp` for one served remotely.

    Every check starts the agent afresh over stdio (with --url: opens a new connection; the
    stdio-only checks are skipped as not applicable). One line per check, then `N passed, M
    failed, ...`. Exit 0 only when every MUST check passed (--strict: every SHOULD one too),
    1 otherwise, 2 when the agent cannot be checked at all.
    """
    if url is not None and command:
        typer.echo("error: give either --url or an agent command, not both", err=True)
        raise typer.Exit(2)
    if url is None and not command:
        typer.echo("error: no agent command (fix: acp-codegen check-agent -- python my_agent.py)", err=True)
        raise typer.Exit(2)
    if timeout <= 0:
        typer.echo("error: --timeout must be positive", err=True)
        raise typer.Exit(2)
    if url is not None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() not in ("ws", "wss", "http", "https") or not parts.hostname:
            typer.echo(f"error: {url!r} is no ws://, wss://, http:// or https:// URL with a host", err=True)
            raise typer.Exit(2)
        _check_url(url, schema, unstable, as_json, strict, timeout, prompt, cancel_prompt)
        return
    if shutil.which(command[0]) is None:
        typer.echo(f"error: agent command {command[0]!r} not found or not executable", err=True)
        raise typer.Exit(2)
    try:
        conformance = load_bindings(schema, unstable)
    except CodegenError as exc:
        exit_with_problems(exc)
    options = conformance.Options(timeout=timeout, prompt=prompt, cancel_prompt=cancel_prompt)
    try:
        report = conformance.check_command(command, options)
    except OSError as exc:  # the command does not exist, is not executable, ...
        typer.echo(f"error: cannot start the agent {command[0]!r}: {exc}", err=True)
        raise typer.Exit(2) from None
    _print_report(report, as_json, strict)


def _check_url(
    url: str,
    schema: str | None,
    unstable: bool,
    as_json: bool,
    strict: bool,
    timeout: float,
    prompt: str,
    cancel_prompt: str | None,
) -> None:
    try:
        remote = load_bindings(schema, unstable, "conformance_remote")
    except CodegenError as exc:
        exit_with_problems(exc)
    conformance = importlib.import_module(remote.__name__.rpartition(".")[0] + ".conformance")
    options = conformance.Options(timeout=timeout, prompt=prompt, cancel_prompt=cancel_prompt)
    try:
        report = remote.check_url(url, options)
    except remote.RemoteUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _print_report(report, as_json, strict)


def _print_report(report: Any, as_json: bool, strict: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for line in report.lines():
            typer.echo(line)
    raise typer.Exit(0 if report.ok(strict) else 1)
