"""`acp-codegen check-client -- CLIENT_CMD...`: the conformance checks against any ACP client
executable that spawns its agent from a command line (`{agent}` in it).

The checks live in the generated package (`testing/client_conformance.py`): this command
generates agent-role bindings from the chosen schema once (cached, `check_cli`), imports them
and runs `client_conformance.check_client_command`; the output layer is check-agent's.
"""

from __future__ import annotations

import shutil
import sys

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

MODULE = "testing.client_conformance"
REMOTE_MODULE = "testing.client_remote"


def check_client_command(
    command: list[str] = typer.Argument(None, help="The client command line, after `--`, with {agent} in it."),
    schema: str | None = SCHEMA_OPTION,
    unstable: bool = UNSTABLE_OPTION,
    as_json: bool = JSON_OPTION,
    junit_xml: str | None = JUNIT_XML_OPTION,
    select: str | None = typer.Option(
        None, "-k", metavar="EXPR", help="Report only the checks whose id matches (`permission and not cancel`)."
    ),
    list_only: bool = LIST_OPTION,
    strict: bool = STRICT_OPTION,
    timeout: float = typer.Option(5.0, "--timeout", help="Seconds the client has to answer any one request."),
    startup_timeout: float = typer.Option(
        30.0, "--startup-timeout", help="Seconds the client may take to start the agent and send its first line."
    ),
    idle: float = typer.Option(
        5.0, "--idle", help="Seconds of silence after which a client that does not exit by itself is stopped."
    ),
    max_time: float = typer.Option(120.0, "--max-time", help="Seconds the whole run may take at most."),
    env: list[str] | None = env_option("client"),
    cwd: str | None = typer.Option(None, "--cwd", metavar="DIR", help="The client's working directory."),
    stdin: str = typer.Option(
        "",
        "--input",
        metavar="TEXT",
        help="Written to the client's own stdin, then EOF (an interactive client's prompt).",
    ),
    listen: str | None = typer.Option(
        None,
        "--listen",
        metavar="HOST:PORT",
        help="Check a remote client: serve the probe agent at HOST:PORT over WebSocket, then Streamable HTTP, "
        "running the client command once per profile with {url} in it.",
    ),
) -> None:
    """Check that an ACP client follows the protocol: `acp-codegen check-client -- acpx --agent "{agent}" exec hi`.

    The client spawns the probe agent where its command line says {agent} (a whole argument:
    the probe's words; inside one: the shell-quoted command). The probe answers initialize
    and session/new, and in the first prompt turn streams every kind of update and sends
    the requests the client's capabilities allow, then what it must refuse or tolerate.
    What the client never gives the chance to check is "not exercised", never passed. Exit 0
    when no MUST check failed (--strict: no SHOULD one either), 1 when one did, 2 when the
    client cannot be checked at all (it never started the agent).
    """
    if sys.platform == "win32":
        fail_usage("check-client needs a POSIX system (the probe agent talks over a Unix socket)")
    conformance = load_conformance(schema, unstable, "agent", MODULE) if list_only else None
    if conformance is not None:  # the remote checks too: they run with --listen
        list_checks(conformance, conformance.REMOTE_CHECKS)
    if not command:
        fail_usage("no client command", 'acp-codegen check-client -- acpx --agent "{agent}" exec hello')
    if listen is not None:
        _check_remote(
            command,
            listen,
            timeout,
            startup_timeout,
            idle,
            max_time,
            env,
            cwd,
            stdin,
            select,
            schema,
            unstable,
            strict,
            Output(as_json, junit_xml),
        )
        return
    if not any("{agent}" in arg for arg in command):
        fail_usage(
            "the client command has no {agent}",
            'put it where the client takes its agent command: acpx --agent "{agent}" exec hello',
        )
    extra_env, workdir = _checked_inputs(command, timeout, startup_timeout, idle, max_time, env, cwd)
    conformance = load_conformance(schema, unstable, "agent", MODULE)
    options = conformance.ClientOptions(timeout=timeout, startup_timeout=startup_timeout, idle=idle, max_time=max_time)
    try:
        report = conformance.check_client_command(
            command,
            options,
            cwd=workdir,
            env=child_env(extra_env),
            select=parse_selection(conformance, select),
            stdin=stdin.encode(),
        )
    except OSError as exc:  # the command does not exist, is not executable, ...
        typer.echo(f"error: cannot start the client {command[0]!r}: {exc}", err=True)
        raise typer.Exit(2) from None
    finish(conformance, report, Output(as_json, junit_xml), strict)


def _checked_inputs(
    command: list[str],
    timeout: float,
    startup_timeout: float,
    idle: float,
    max_time: float,
    env: list[str] | None,
    cwd: str | None,
) -> tuple[dict[str, str], str | None]:
    """What both ways of checking a client refuse alike (exit 2): a command that cannot be
    found, a timing that is not positive, a bad `--env` or `--cwd`. The extra env and the
    working directory."""
    if shutil.which(command[0]) is None:
        fail_usage(f"client command {command[0]!r} not found or not executable")
    for name, value in (
        ("--timeout", timeout),
        ("--startup-timeout", startup_timeout),
        ("--idle", idle),
        ("--max-time", max_time),
    ):
        positive(name, value)
    return parse_env(env), parse_cwd(cwd)


def _check_remote(
    command: list[str],
    listen: str,
    timeout: float,
    startup_timeout: float,
    idle: float,
    max_time: float,
    env: list[str] | None,
    cwd: str | None,
    stdin: str,
    select: str | None,
    schema: str | None,
    unstable: bool,
    strict: bool,
    output: Output,
) -> None:
    """check-client --listen: the probe agent served on asgi_app, the client given {url}."""
    if not any("{url}" in arg for arg in command):
        fail_usage(
            "with --listen, the client command needs {url}",
            "put it where the client takes its agent's URL: my-editor --agent-url {url}",
        )
    extra_env, workdir = _checked_inputs(command, timeout, startup_timeout, idle, max_time, env, cwd)
    conformance = load_conformance(schema, unstable, "agent", MODULE)
    remote = load_conformance(schema, unstable, "agent", REMOTE_MODULE)
    try:
        remote.parse_listen(listen)
    except ValueError as exc:
        fail_usage(str(exc))
    options = conformance.ClientOptions(timeout=timeout, startup_timeout=startup_timeout, idle=idle, max_time=max_time)
    try:
        report = remote.check_client_listen(
            command,
            listen,
            options,
            cwd=workdir,
            env=child_env(extra_env),
            select=parse_selection(conformance, select, conformance.REMOTE_CHECKS),
            stdin=stdin.encode(),
        )
    except ImportError as exc:
        typer.echo(
            f"error: check-client --listen needs uvicorn and hypercorn ({exc}): pip install 'acp-codegen[remote]'",
            err=True,
        )
        raise typer.Exit(2) from None
    except OSError as exc:  # the address cannot be bound, the client cannot be started
        typer.echo(f"error: cannot check the client on {listen}: {exc}", err=True)
        raise typer.Exit(2) from None
    finish(conformance, report, output, strict)
