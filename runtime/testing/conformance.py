"""Protocol conformance checks for any ACP agent: in-process, or any executable over stdio.

    from myagent.acp.testing import assert_conforms, check_agent

    def test_my_agent_follows_the_protocol() -> None:
        assert_conforms(check_agent(MyAgent))            # in-process: no subprocess

    report = check_command(["node", "agent.js"])         # any agent, over stdio

Every check cites the page and section of the ACP docs it enforces and its level (MUST,
SHOULD, or INFO, which never fails a run). Each check drives a fresh agent (a new `Agent`
instance, or a new process) with a `ScriptedClient`, so one fault shows up in the check it
breaks and nowhere else; the message-level checks (framing, strict decoding) then read every
line the agents sent in all those runs. A check is `passed`, `failed` (with the offending
message), `skipped` (the agent does not advertise the feature) or `not testable` (with the
reason: a prompt that fails for want of credentials is not a pass). Every wait is bounded by
`Options.timeout`, and processes are started in their own process group, which is killed
when a run ends: a silent or stuck agent costs seconds and leaves nothing behind.

Standard library only.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..connection import Reader, Writer
from .conformance_checks import (
    CHECKS,
    CHECKS_BY_ID,
    DEFAULT_SCRIPT,
    UNSUPPORTED_VERSION,
    Options,
    Outcome,
    script_of,
)
from .conformance_messages import framing, strict, unknown_warnings
from .conformance_output import Matcher, compile_selection, junit_xml, report_json
from .conformance_probes import Runner
from .conformance_report import (
    EXIT_CANNOT_RUN,
    EXIT_NOT_CONFORMANT,
    EXIT_OK,
    STATUSES,
    TIERS,
    Check,
    CheckResult,
    Level,
    Report,
    Status,
    Tier,
    assert_conforms,
)
from .runners import AgentRun, Opener, Serve, in_process, over_stdio

# The generated package this kit belongs to (it lives in its `testing` subpackage).
_PACKAGE = __package__.rpartition(".")[0] if __package__ else ""

__all__ = [
    "CHECKS",
    "EXIT_CANNOT_RUN",
    "EXIT_NOT_CONFORMANT",
    "EXIT_OK",
    "TIERS",
    "Matcher",
    "Tier",
    "compile_selection",
    "junit_xml",
    "report_json",
    "CHECKS_BY_ID",
    "DEFAULT_SCRIPT",
    "STATUSES",
    "UNSUPPORTED_VERSION",
    "Check",
    "CheckResult",
    "Level",
    "Options",
    "Outcome",
    "Report",
    "Status",
    "assert_conforms",
    "check_agent",
    "check_agent_async",
    "check_command",
    "run_checks",
    "unknown_warnings",
]


async def run_checks(opener: Opener, target: str, options: Options | None = None) -> Report:
    """Run every check, each on a fresh agent from `opener`; the report."""
    options = options or Options()
    began = time.monotonic()
    cwd = tempfile.mkdtemp(prefix="acp-conformance-")
    try:
        runner = Runner(opener, options, options.session_cwd or os.path.realpath(cwd))
        probes: list[Awaitable[None]] = [
            runner.run_check("initialize", runner.initialize),
            runner.run_check("initialize-version", runner.initialize_version),
            runner.run_check("session-new", runner.session_new),
            runner.run_checks(("session-modes", "session-modes-unknown"), runner.modes),
            runner.run_check("session-load", runner.session_load),
            runner.run_check("prompt-turn", runner.prompt_turn),
            runner.run_check("cancel", runner.cancel),
            runner.run_check(
                "unknown-method", lambda: runner.unknown_method("acp_conformance/no_such_method")
            ),
            runner.run_check(
                "unknown-ext-method",
                lambda: runner.unknown_method("_acp_conformance/no_such_method"),
            ),
            runner.run_check("invalid-params", runner.invalid_params),
            runner.run_check("unknown-notification", runner.unknown_notification),
        ]
        await asyncio.gather(*probes)
        runner.done["stdio-framing"].set_result(framing(runner.runs))
        runner.done["schema-strict"].set_result(strict(runner.runs))
        runner.done["exit-on-eof"].set_result(runner.exit_on_eof())
        selected = options.select or (lambda check_id: True)
        results = [_result(runner, check) for check in CHECKS if selected(check.id)]
        return Report(target, results, elapsed=time.monotonic() - began)
    finally:
        shutil.rmtree(cwd, ignore_errors=True)


def _transcript(runs: Sequence[AgentRun], limit: int = 200) -> list[str]:
    """The wire lines of a check's agents, `-> ` sent and `<- ` received (the last `limit`)."""
    out: list[str] = []
    for number, run in enumerate(runs, 1):
        if len(runs) > 1:
            out.append(f"# agent {number} of {len(runs)}")
        out += [
            ("-> " if line in run.client.sent else "<- ") + line.text() for line in run.client.lines
        ]
    return out[-limit:]


def _result(runner: Runner, check: Check) -> CheckResult:
    status, detail, offending, warnings = runner.done[check.id].result()
    runs = runner.check_runs[check.id]
    if not runs and offending is not None:  # a message-level check: the run that sent it
        runs = [run for run in runner.runs if offending in run.client.received][:1]
    started = runner.started.get(check.id)
    finished = runner.finished.get(check.id, started)
    return CheckResult(
        check,
        status,
        detail,
        None if offending is None else offending.text(),
        warnings,
        duration=0.0 if started is None or finished is None else finished - started,
        transcript=_transcript(runs) if status in ("failed", "not testable") else [],
        stderr=[line for run in runs for line in run.stderr][-20:],
    )


def check_command(
    argv: Sequence[str],
    options: Options | None = None,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Report:
    """Run every check against an agent executable (any language) over its stdio."""
    if not argv:
        raise ValueError("no agent command given")
    opener = over_stdio(argv, script_of(options), cwd=cwd, env=env)
    return asyncio.run(run_checks(opener, " ".join(argv), options))


def check_agent(make_agent: Callable[[], Any], options: Options | None = None) -> Report:
    """Run every check against an `Agent` of this package, in-process (no subprocess).

    `make_agent()` returns a fresh agent (the class itself will do); it is called once per
    check. Only in the agent-role package, which has `run_agent`. Inside a running event
    loop (an async test), await `check_agent_async` instead."""
    return asyncio.run(check_agent_async(make_agent, options))


async def check_agent_async(
    make_agent: Callable[[], Any], options: Options | None = None
) -> Report:
    """`check_agent`, for a caller already in an event loop."""
    try:
        role = importlib.import_module(f"{_PACKAGE}.agent")
    except ImportError:
        raise TypeError(
            "check_agent needs the agent-role package; use check_command for an executable"
        ) from None

    def serve() -> Serve:
        agent = make_agent()

        async def run(reader: Reader, writer: Writer) -> None:
            await role.run_agent(agent, reader, writer, shutdown_grace=0.2)

        return run

    name = getattr(make_agent, "__qualname__", type(make_agent).__name__)
    return await run_checks(in_process(serve, script_of(options)), name, options)
