"""Test tooling for this package, kept out of its top level: what a test of your agent or
client imports, never what the agent or client itself needs.

- `memory_streams()` (`memstream`): two connected in-memory ends for an agent and a client in
  one event loop, no OS pipe and no subprocess;
- `ScriptedClient`, `Line`, `Reply` (`scripted`): a client peer that answers from a script and
  records every line in wire order;
- `in_process`, `over_stdio`, `agent_process` (`runners`): a fresh agent under test, in this
  event loop or as a process;
- the conformance kit (`conformance` and its `conformance_*` parts): `check_agent`,
  `check_command`, `assert_conforms`, `Report`, `Options`, and for CI `junit_xml`,
  `report_json` and `compile_selection` (the `-k` matcher);
- the client checks (`client_conformance` and its parts: `client_checks`, `client_verdicts`,
  the probe agent in `probe`, `probe_scenario`, `probe_relay`): `check_client`,
  `check_client_command`, `assert_client_conforms`, `ClientOptions`, `CLIENT_CHECKS`.

Every public name is importable from here::

    from myagent.acp.testing import ScriptedClient, assert_conforms, check_agent, memory_streams

Standard library only.
"""

from __future__ import annotations

from .client_checks import CLIENT_CHECKS, ClientOptions
from .client_conformance import (
    assert_client_conforms,
    check_client,
    check_client_async,
    check_client_command,
)
from .conformance import (
    CHECKS,
    CHECKS_BY_ID,
    DEFAULT_SCRIPT,
    EXIT_CANNOT_RUN,
    EXIT_NOT_CONFORMANT,
    EXIT_OK,
    STATUSES,
    TIERS,
    UNSUPPORTED_VERSION,
    Check,
    CheckResult,
    Level,
    Matcher,
    Options,
    Outcome,
    Report,
    Status,
    Tier,
    assert_conforms,
    check_agent,
    check_agent_async,
    check_command,
    compile_selection,
    junit_xml,
    report_json,
    run_checks,
    unknown_warnings,
)
from .memstream import MemoryStream, memory_streams
from .runners import AgentRun, Opener, Serve, StderrTail, agent_process, in_process, over_stdio
from .scripted import Answer, Line, Reply, ScriptedClient, as_list, as_object

__all__ = [
    "CLIENT_CHECKS",
    "ClientOptions",
    "assert_client_conforms",
    "check_client",
    "check_client_async",
    "check_client_command",
    "CHECKS",
    "CHECKS_BY_ID",
    "DEFAULT_SCRIPT",
    "EXIT_CANNOT_RUN",
    "EXIT_NOT_CONFORMANT",
    "EXIT_OK",
    "STATUSES",
    "TIERS",
    "UNSUPPORTED_VERSION",
    "AgentRun",
    "Answer",
    "Check",
    "CheckResult",
    "Level",
    "Line",
    "Matcher",
    "MemoryStream",
    "Opener",
    "Options",
    "Outcome",
    "Reply",
    "Report",
    "ScriptedClient",
    "Serve",
    "StderrTail",
    "Status",
    "Tier",
    "agent_process",
    "as_list",
    "as_object",
    "assert_conforms",
    "check_agent",
    "check_agent_async",
    "check_command",
    "compile_selection",
    "in_process",
    "junit_xml",
    "memory_streams",
    "over_stdio",
    "report_json",
    "run_checks",
    "unknown_warnings",
]
