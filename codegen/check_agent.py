"""`acp-codegen check-agent -- COMMAND...`: the conformance checks against any agent executable.

The checks themselves live in the generated package (`testing/conformance.py`): this command
generates client-role bindings from the chosen schema once (cached, `check_cli`), imports them
and runs `conformance.check_command` on the agent's stdio.
"""

from __future__ import annotations

import shutil

import typer

from .check_cli import (
    Output,
    child_env,
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
    schema: str | None = typer.Option(
        None, "--schema", "-s", help="Schema the bindings are generated from (default: bundled v1)."
    ),
    unstable: bool = typer.Option(False, "--unstable", help="Use the unstable schema."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the report as JSON (failures with their transcript and stderr)."
    ),
    junit_xml: str | None = typer.Option(
        None, "--junit-xml", metavar="PATH", help="Also write the report as JUnit XML (one testcase per check)."
    ),
    select: str | None = typer.Option(
        None, "-k", metavar="EXPR", help="Run only the checks whose id matches (`initialize and not version`)."
    ),
    list_only: bool = typer.Option(False, "--list", help="List the checks and exit."),
    strict: bool = typer.Option(False, "--strict", help="Fail on failed SHOULD checks too."),
    timeout: float = typer.Option(5.0, "--timeout", help="Seconds to wait for any one answer after start-up."),
    startup_timeout: float = typer.Option(
        30.0, "--startup-timeout", help="Seconds an agent may take to start and answer initialize."
    ),
    prompt: str = typer.Option("Hello", "--prompt", help="Text of the prompt the turn checks send."),
    cancel_prompt: str | None = typer.Option(
        None,
        "--cancel-prompt",
        help="Prompt the cancel check sends and cancels: one whose turn keeps running "
        "(without it, cancel is reported not exercised).",
    ),
    auth_method: str | None = typer.Option(
        None, "--auth-method", metavar="ID", help="Authenticate with this advertised method before sessions."
    ),
    env: list[str] | None = typer.Option(
        None, "--env", metavar="KEY=VALUE", help="Set in the agent's environment (repeatable)."
    ),
    cwd: str | None = typer.Option(
        None, "--cwd", metavar="DIR", help="The agent's working directory (and the sessions' cwd)."
    ),
    concurrency: int = typer.Option(4, "--concurrency", help="How many agents run at once."),
) -> None:
    """Check that an ACP agent follows the protocol: `acp-codegen check-agent -- python agent.py`.

    Every check starts the agent afresh over stdio. One line per check, then the tier summary.
    Exit 0 when every MUST check passed (--strict: every SHOULD one too), 1 when one failed or
    could not run, 2 when the agent cannot be checked at all.
    """
    conformance = load_conformance(schema, unstable, "client") if list_only else None
    if conformance is not None:
        list_checks(conformance)
    if not command:
        fail_usage("no agent command", "acp-codegen check-agent -- python my_agent.py")
    if shutil.which(command[0]) is None:
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
    try:
        report = conformance.check_command(command, options, cwd=workdir, env=child_env(extra_env))
    except OSError as exc:  # the command does not exist, is not executable, ...
        typer.echo(f"error: cannot start the agent {command[0]!r}: {exc}", err=True)
        raise typer.Exit(2) from None
    finish(conformance, report, Output(as_json, junit_xml), strict)
