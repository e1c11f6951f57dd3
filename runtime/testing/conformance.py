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
from typing import Any, Final

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
from .conformance_probes import CoreProbes
from .conformance_probes_restart import RestartProbes
from .conformance_probes_turn import NOTES
from .conformance_probes_wire import WireProbes
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
from .conformance_traffic import (
    client_calls,
    config_booleans,
    error_messages,
    exit_on_eof,
    response_shape,
    stderr_volume,
    unanswered_notifications,
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


class Runner(RestartProbes, CoreProbes, WireProbes):
    """Every probe of the kit, on one harness."""


Probe = Callable[[], Awaitable[tuple[Outcome, ...]]]


def _single(probe: Callable[[], Awaitable[Outcome]]) -> Probe:
    async def run() -> tuple[Outcome, ...]:
        return (await probe(),)

    return run


def _probes(runner: Runner) -> list[tuple[tuple[str, ...], Probe]]:
    """Every probe and the checks it settles, the gate (initialize) first. A probe with no
    checks of its own makes traffic for the message-level checks."""

    def content(check_id: str) -> Probe:
        return _single(lambda: runner.prompt_content(check_id))

    return [
        (
            ("initialize", "agent-info", "auth-methods-unique", "auth-no-terminal"),
            runner.initialize,
        ),
        (("initialize-version",), _single(runner.initialize_version)),
        (("session-new", "auth-not-required"), runner.session_new),
        (("authenticate",), _single(runner.authenticate)),
        (("jsonrpc-id",), _single(runner.jsonrpc_id)),
        (("prompt-turn",), _single(runner.prompt_turn)),
        (("cancel",), _single(runner.cancel)),
        (("session-modes", "session-modes-unknown"), runner.modes),
        (("config-options", "config-set"), runner.config_options),
        (("session-load", "info-load-after-restart"), runner.session_load_restart),
        (("session-load-fresh",), _single(runner.session_load_fresh)),
        (("session-resume",), _single(runner.session_resume)),
        (("session-list", "session-list-cwd"), runner.session_list),
        (("session-close",), _single(runner.session_close)),
        (("session-close-prompt",), _single(runner.session_close_prompt)),
        (("session-delete", "session-delete-unknown"), runner.session_delete),
        (("session-additional-directories",), _single(runner.additional_directories)),
        *(((check_id,), content(check_id)) for check_id in CONTENT_CHECKS),
        (("unknown-method",), _single(runner.unknown_method)),
        (("ext-method-answered", "unknown-ext-method"), runner.ext_method),
        (("invalid-params",), _single(runner.invalid_params)),
        (("unknown-notification",), _single(runner.unknown_notification)),
        (
            ("info-unknown-session", "info-not-envelope", "info-malformed-line"),
            runner.informational,
        ),
    ]


CONTENT_CHECKS: Final = (
    "prompt-image",
    "prompt-audio",
    "prompt-resource",
    "prompt-resource-link",
    "prompt-meta",
)
CAPABILITY_CHECKS: Final = (
    "no-fs-without-capability",
    "no-terminal-without-capability",
    "no-elicitation-without-capability",
)
UNINITIALIZED: Final[Outcome] = ("not testable", "initialize did not pass", None, [])
# About the agent process, whether or not it initialized.
PROCESS_CHECKS: Final = ("info-stderr", "exit-on-eof")
# Checked over every line of every run, once all probes have run.
MESSAGE_CHECKS: Final = (
    "stdio-framing",
    "schema-strict",
    "jsonrpc-response",
    "error-message",
    "notification-no-response",
    "config-no-boolean",
    "info-stderr",
    *CAPABILITY_CHECKS,
)


# The probes whose agents other checks look at: the first initialize (the gate, and an
# agent for exit-on-eof), session-new (one with live sessions), prompt-turn (the turn with
# the client capabilities off).
NEEDED_BY: Final = {
    "initialize": ("*",),
    "session-new": ("exit-on-eof",),
    "prompt-turn": CAPABILITY_CHECKS,
}


def _wanted(check_ids: tuple[str, ...], selected: Matcher) -> bool:
    """Whether a probe runs: it settles a selected check, or makes traffic one needs (every
    probe does for the checks over all messages)."""
    needed_by = NEEDED_BY.get(check_ids[0], ())
    if "*" in needed_by:
        return True
    return any(map(selected, check_ids + needed_by + MESSAGE_CHECKS))


def _message_outcomes(runner: Runner) -> dict[str, Outcome]:
    runs = runner.runs
    script = runner.script
    return {
        "stdio-framing": framing(runs),
        "schema-strict": strict(runs, frozenset(runner.info_lines)),
        "jsonrpc-response": response_shape(runs),
        "error-message": error_messages(runs),
        "notification-no-response": unanswered_notifications(runs, runner.raw_runs),
        "config-no-boolean": config_booleans(runs),
        "info-stderr": stderr_volume(runs),
        "no-fs-without-capability": client_calls(runs, script.__contains__, "fs/", runner.turns),
        "no-terminal-without-capability": client_calls(
            runs,
            lambda _: any(name.startswith("terminal/") for name in script),
            "terminal/",
            runner.turns,
        ),
        "no-elicitation-without-capability": client_calls(
            runs, lambda _: False, "elicitation/", runner.turns
        ),
        "exit-on-eof": exit_on_eof(runner.eof_runs, runner.options.eof_timeout),
    }


async def run_checks(opener: Opener, target: str, options: Options | None = None) -> Report:
    """Run the (selected) checks, each probe on fresh agents from `opener`; the report."""
    options = options or Options()
    began = time.monotonic()
    selected: Matcher = options.select or (lambda check_id: True)
    files = tempfile.mkdtemp(prefix="acp-conformance-")
    try:
        files = os.path.realpath(files)
        with open(os.path.join(files, NOTES), "w", encoding="utf-8") as notes:
            notes.write("Notes the conformance kit asks agents to read.\n")
        os.mkdir(os.path.join(files, "extra-root"))
        runner = Runner(opener, options, options.session_cwd or files, files)
        probes = [(ids, probe) for ids, probe in _probes(runner) if _wanted(ids, selected)]
        for ids, _ in probes:
            runner.scheduled.update(ids)
        await asyncio.gather(*(runner.run_checks(ids, probe) for ids, probe in probes))
        for check_id, outcome in _message_outcomes(runner).items():
            if runner.gate_blocked and check_id not in PROCESS_CHECKS:  # nothing to judge
                outcome = UNINITIALIZED
                runner.blocked[check_id] = runner.gate_blocked
                runner.blocked_by[check_id] = "initialize"
            elif outcome[0] == "not testable":  # no turn or no session: what blocked those
                source = "prompt-turn" if check_id in CAPABILITY_CHECKS else "session-new"
                runner.blocked[check_id] = runner.blocked.get(source, "")
                runner.blocked_by[check_id] = source
            if not runner.done[check_id].done():
                runner.done[check_id].set_result(outcome)
        results = _root_causes([_result(runner, check) for check in CHECKS if selected(check.id)])
        found = [note for run in (*runner.runs, *runner.raw_runs) for note in run.process_notes()]
        report = Report(target, results, runner.cannot_run, time.monotonic() - began)
        report.notes = list(dict.fromkeys(found))
        return report
    finally:
        shutil.rmtree(files, ignore_errors=True)


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
        blocked=runner.blocked.get(check.id, "") if status == "not testable" else "",
        blocked_by=runner.blocked_by.get(check.id, "") if status == "not testable" else "",
        transcript=_transcript(runs) if status in ("failed", "not testable") else [],
        stderr=[line for run in runs for line in run.stderr][-20:],
    )


def _root_causes(results: list[CheckResult]) -> list[CheckResult]:
    """Keep a result's `blocked_by` only where that check did not pass (failed, or untested
    itself): then the root cause counts against the run, and this result does not."""
    status = {r.check.id: r.status for r in results}
    for r in results:
        if r.blocked_by and status.get(r.blocked_by) not in ("failed", "not testable"):
            r.blocked_by = ""
    return results


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
