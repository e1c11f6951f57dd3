"""`acp-codegen check-agent -- COMMAND...`: the conformance checks against any agent executable;
`acp-codegen check-agent --url URL`: against an agent served remotely (WebSocket or Streamable HTTP).

The checks themselves live in the generated package (`testing/conformance.py`): this command
generates client-role bindings from the chosen schema once (cached, `check_cli`), imports them
and runs `conformance.check_command` on the agent's stdio (or `conformance_remote.check_url`).
"""

from __future__ import annotations

import importlib
import shutil
import urllib.parse

import typer

from .check_cli import (
    JSON_OPTION,
    JUNIT_XML_OPTION,
    LIST_OPTION,
    SCHEMA_OPTION,
    STRICT_OPTION,
    UNSTABLE_OPTION,
    Output,
    child_env,
    env_option,
    fail_usage,
    finish,
    list_checks,
    load_conformance,
    parse_cwd,
    parse_env,
    parse_selection,
    positive,
)


def check_agent_command(
    command: list[str] = typer.Argument(None, help="The agent command line, after `--`."),
    schema: str | None = SCHEMA_OPTION,
    unstable: bool = UNSTABLE_OPTION,
    as_json: bool = JSON_OPTION,
    junit_xml: str | None = JUNIT_XML_OPTION,
    select: str | None = typer.Option(
        None, "-k", metavar="EXPR", help="Run only the checks whose id matches (`initialize and not version`)."
    ),
    list_only: bool = LIST_OPTION,
    strict: bool = STRICT_OPTION,
    timeout: float = typer.Option(
        5.0, "--timeout", help="Seconds of silence to wait for any one answer after start-up."
    ),
    startup_timeout: float = typer.Option(
        30.0,
        "--startup-timeout",
        help="Seconds of silence to start, answer initialize, open a session or answer its first call.",
    ),
    prompt: str = typer.Option("Hello", "--prompt", help="Text of the prompt the turn checks send."),
    cancel_prompt: str | None = typer.Option(
        None,
        "--cancel-prompt",
        help="Prompt the cancel checks send and interrupt: one whose turn keeps running "
        "(without it, a turn that ends before its cancel is reported not exercised).",
    ),
    auth_method: str | None = typer.Option(
        None, "--auth-method", metavar="ID", help="Authenticate with this advertised method before sessions."
    ),
    env: list[str] | None = env_option("agent"),
    cwd: str | None = typer.Option(
        None, "--cwd", metavar="DIR", help="The agent's working directory (and the sessions' cwd)."
    ),
    concurrency: int = typer.Option(6, "--concurrency", help="How many agents run at once."),
    url: str | None = typer.Option(
        None,
        "--url",
        help="Check the agent served at this URL instead: ws:// or wss:// (WebSocket), http:// or https:// "
        "(Streamable HTTP). Needs acp-codegen[remote].",
    ),
) -> None:
    """Check that an ACP agent follows the protocol: `acp-codegen check-agent -- python agent.py`.

    Every check starts the agent afresh over stdio (with --url, `acp-codegen check-agent --url
    ws://127.0.0.1:8000/acp`: opens a new connection; the stdio-only checks are skipped as not
    applicable). One line per check, then the tier summary.
    Exit 0 when every MUST check passed (--strict: every SHOULD one too), 1 when one failed or
    could not run, 2 when the agent cannot be checked at all.
    """
    conformance = load_conformance(schema, unstable, "client") if list_only else None
    if conformance is not None:
        list_checks(conformance)
    if url is not None and command:
        fail_usage("give either --url or an agent command, not both")
    if url is None and not command:
        fail_usage("no agent command", "acp-codegen check-agent -- python my_agent.py")
    if url is not None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() not in ("ws", "wss", "http", "https") or not parts.hostname:
            fail_usage(f"{url!r} is no ws://, wss://, http:// or https:// URL with a host")
    elif shutil.which(command[0]) is None:
        fail_usage(f"agent command {command[0]!r} not found or not executable")
    positive("--timeout", timeout)
    positive("--startup-timeout", startup_timeout)
    if concurrency < 1:
        fail_usage("--concurrency must be at least 1")
    extra_env = parse_env(env)
    workdir = parse_cwd(cwd)
    conformance = load_conformance(schema, unstable, "client")
    options = conformance.Options(
        timeout=timeout,
        startup_timeout=startup_timeout,
        prompt=prompt,
        cancel_prompt=cancel_prompt,
        auth_method=auth_method,
        concurrency=concurrency,
        select=parse_selection(conformance, select),
        session_cwd=workdir,
    )
    if url is not None:
        remote = importlib.import_module(conformance.__name__.rpartition(".")[0] + ".conformance_remote")
        try:
            report = remote.check_url(url, options)
        except remote.RemoteUnavailable as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        finish(conformance, report, Output(as_json, junit_xml), strict)
        return
    try:
        report = conformance.check_command(command, options, cwd=workdir, env=child_env(extra_env))
    except OSError as exc:  # the command does not exist, is not executable, ...
        typer.echo(f"error: cannot start the agent {command[0]!r}: {exc}", err=True)
        raise typer.Exit(2) from None
    finish(conformance, report, Output(as_json, junit_xml), strict)
