"""The conformance kit: in-memory streams, the scripted client, the protocol checks (in-process
and over stdio), the broken agents of tests/fixtures/agents (one fault each: each fails exactly
the check it breaks), the official SDK's example agent, and `acp-codegen check-agent`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from agent import RequestError, run_agent, types  # generated/agent, on sys.path via conftest
from agent.testing import (
    CHECKS,
    MemoryStream,
    Options,
    Report,
    ScriptedClient,
    assert_conforms,
    check_agent,
    check_agent_async,
    check_command,
    compile_selection,
    junit_xml,
    memory_streams,
    unknown_warnings,
)
from budget import FULL
from overlap import Background, selected

ROOT = Path(__file__).resolve().parent.parent
AGENTS = Path(__file__).resolve().parent / "fixtures" / "agents"
ECHO_AGENT = ROOT / "examples" / "echo_agent.py"
for path in (AGENTS, ROOT / "examples"):
    sys.path.insert(0, str(path))

from echo_agent import EchoAgent  # noqa: E402
from in_process_agents import (  # noqa: E402
    NO_BACKEND_TIMEOUT,
    AlwaysCancelled,
    IgnoresCancel,
    NoBackend,
    NoCredentials,
    Plain,
    ReplayAfterLoad,
    StateAfterAnswers,
)

ALL_IDS = {check.id for check in CHECKS}
# Beside the project, when present (or beside the folder of its worktrees).
DOCS = next(
    (d / "shared" / "acp-docs" / "v1" for d in (ROOT.parent, ROOT.parent.parent) if (d / "shared").is_dir()), ROOT
)


def failed(report: Report) -> set[str]:
    return {r.check.id for r in report.results if r.status == "failed"}


def statuses(report: Report) -> dict[str, str]:
    return {r.check.id: r.status for r in report.results}


# -- in-memory streams and the scripted client ------------------------------------------------
def test_memory_stream_delivers_in_order_then_eof() -> None:
    async def main() -> list[bytes]:
        stream = MemoryStream(high_water=4)
        stream.write(b"ab")
        stream.write(b"cdef")  # over the high-water mark: drain waits for the reader
        drained = asyncio.ensure_future(stream.drain())
        await asyncio.sleep(0)
        assert not drained.done()
        chunks = [await stream.read(3)]
        await asyncio.wait_for(drained, 1)  # 3 bytes left: under the mark again
        stream.close()
        chunks += [await stream.read(), await stream.read()]
        with pytest.raises(ConnectionResetError):
            stream.write(b"late")
        return chunks

    assert asyncio.run(main()) == [b"abc", b"def", b""]


async def _drive(script: dict[str, Any], prompt: str, fs: bool) -> tuple[ScriptedClient, Any]:
    (agent_reader, agent_writer), (client_reader, client_writer) = memory_streams()
    server = asyncio.ensure_future(run_agent(EchoAgent(), agent_reader, agent_writer))
    async with ScriptedClient(client_reader, client_writer, script) as client:
        init = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": fs}}}
        assert (await client.call("initialize", init, 2)).ok
        session_id = (await client.call("session/new", {"cwd": str(ROOT), "mcpServers": []}, 2)).get("sessionId")
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": prompt}]}
        reply = await client.call("session/prompt", params, 2)
    await asyncio.wait_for(server, 2)
    return client, reply


def _chunks(client: ScriptedClient) -> list[str]:
    return [
        line.get("params")["update"]["content"]["text"] for line in client.received if line.method == "session/update"
    ]


def test_scripted_client_answers_from_the_script_and_records_in_order() -> None:
    path = str(ROOT / "README.md")

    def read(params: types.ReadTextFileRequest) -> types.ReadTextFileResponse:
        assert params.path == path  # the decoded, typed params
        return types.ReadTextFileResponse(content="scripted content")

    client, reply = asyncio.run(_drive({"fs/read_text_file": read}, f"read {path}", fs=True))
    assert reply.ok and reply.get("stopReason") == "end_turn"
    assert _chunks(client) == ["scripted content"]
    methods = [line.method or ("response" if line.is_response else "?") for line in client.received]
    # initialize, session/new answers; the agent's fs request, then its update, then the prompt's answer
    assert methods == ["response", "response", "fs/read_text_file", "session/update", "response"]
    assert client.sent_method(reply.id) == "session/prompt"
    assert [line.index for line in client.lines] == list(range(len(client.lines)))


def test_scripted_client_answers_plain_json_and_errors() -> None:
    async def permission(params: types.RequestPermissionRequest) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": params.options[0].option_id}}

    client, _ = asyncio.run(_drive({"session/request_permission": permission}, "permission", fs=False))
    assert _chunks(client) == ["permission: selected allow-once"]
    error = RequestError(-32002, "Resource not found")
    client, _ = asyncio.run(_drive({"fs/read_text_file": error}, f"read {ROOT}/x", fs=True))
    assert _chunks(client) == ["read failed: -32002 Resource not found"]


def test_unscripted_request_gets_method_not_found() -> None:
    client, reply = asyncio.run(_drive({}, f"read {ROOT}/README.md", fs=True))
    assert reply.ok
    assert _chunks(client) == ["read failed: -32601 Method not found"]
    answer = next(line for line in client.sent if line.is_response)
    assert answer.get("error")["code"] == -32601


# -- reports ---------------------------------------------------------------------------------
def test_recorded_lines_are_parsed_as_the_connection_parses_them() -> None:
    """NaN and Infinity are not JSON: a line holding one is recorded as not JSON (framing check)."""
    (reader, writer), _ = memory_streams()
    scripted = ScriptedClient(reader, writer)
    scripted._record("in", b'{"jsonrpc":"2.0","method":"x","params":{"v":NaN}}')
    scripted._record("in", b'{"jsonrpc":"2.0","method":"x","params":{"v":1.5}}')
    bad, good = scripted.received
    assert bad.message is None and bad.error is not None and "NaN" in bad.error
    assert good.error is None and good.method == "x"


def _plain(markdown: str) -> str:
    """Doc text without markup: links become their text, no bold, no code quotes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown).replace("**", "").replace("`", "")
    return re.sub(r"\s+", " ", text)


@pytest.mark.skipif(not (DOCS / "overview.mdx").is_file(), reason="the ACP docs are not beside the project")
def test_every_check_quotes_its_doc_pages_and_names_real_sections() -> None:
    for check in CHECKS:
        assert (
            check.level in ("MUST", "SHOULD", "INFO")
            and check.area.startswith("ACP-")
            or check.id == "session-modes-unknown"
        )
        text = ""
        for cited in check.doc.split("; "):  # "page § section, § section; page § section"
            page, _, sections = cited.partition(" § ")
            markdown = (DOCS / page).read_text(encoding="utf-8")
            headings = {m.group(2).replace("`", "") for m in re.finditer(r'^(#+ |title: ")(.*?)"?$', markdown, re.M)}
            for section in sections.split(", § "):
                assert section in headings, (check.id, page, section)
            text += _plain(markdown)
        # Our notes: "(JSON-RPC ...)", "(the sequence ...)" and anything in square brackets.
        quoted = re.sub(r" ?\[[^\]]*\]", "", check.rule).split(" (JSON-RPC")[0].split(" (the sequence")[0]
        for sentence in re.split(r"(?<=[.:]) ", quoted):
            assert sentence.rstrip(".:") in text, (check.id, sentence)


def test_unknown_fields_and_variants_are_reported_with_wire_paths() -> None:
    raw = {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "hi", "shiny": 1},
            "messageId": "m",
        },
        "newRoot": True,
    }
    ctx = types.DecodeContext(strict=True)
    decoded = types.SessionNotification.from_dict(raw, ctx)
    assert unknown_warnings(decoded, raw, "params", "session/update") == [
        "session/update: params.newRoot: unknown field",
        "session/update: params.update.content.shiny: unknown field",
    ]
    raw = {"sessionId": "s", "update": {"sessionUpdate": "brand_new", "x": 1}}
    # SessionUpdate is a closed union: strict mode rejects an unknown tag (issue 9 kind 4), the
    # lenient default keeps it as UnknownSessionUpdate.
    with pytest.raises(types.DecodeError):
        types.SessionNotification.from_dict(raw, ctx)
    decoded = types.SessionNotification.from_dict(raw, types.DecodeContext())
    found = unknown_warnings(decoded, raw, "params", "u")
    assert found == ["u: params.update: unknown SessionUpdate variant 'brand_new'"]


# -- the check runs, overlapped ---------------------------------------------------------------
# The cancel check cancels a turn that really runs (the echo agents' `slow` command), the case
# update_after_cancel breaks; the others still pass it.
CANCEL_SLOW = Options(cancel_prompt="slow")

# A loaded CI machine may start a Python agent slowly: a passing run never waits for a timeout,
# so a generous one costs nothing and keeps these tests from flaking; so does the wait for an
# agent to exit at EOF (the SDK's agent still imports pydantic when its stdin closes). (The
# settle time, which every passing turn waits out, stays the default: update_after_cancel writes
# its late update right behind the answer.)
PATIENT = Options(timeout=20, cancel_prompt="slow", eof_timeout=10)

# Upstream's example agent starts in about a CPU-second (the SDK's imports), once per check:
# under the ci profile only the checks it fails and the core of a turn (the SDK echo agent,
# tests/sdk_echo_agent.py, goes through every check; tests/budget.py), all under the slow one.
SDK_EXAMPLE_CORE = "initialize or agent-info or ext-method or session-new or prompt-turn"
SDK_EXAMPLE = PATIENT if FULL else replace(PATIENT, select=compile_selection(SDK_EXAMPLE_CORE))

# Each check starts a fresh agent process (`python AGENT.py`, as a user's agent starts): a dozen
# per run.
Command = Callable[..., list[str]]  # the `agent_command` fixture (conftest.py)


BROKEN = {
    "version_echo": "initialize-version",
    "update_after_cancel": "cancel",
    "stdout_noise": "stdio-framing",
    "unknown_method_result": "unknown-method",
    "crash_on_bad_params": "invalid-params",
    "invalid_update": "schema-strict",
    "fs_without_capability": "no-fs-without-capability",
}

BROKEN_IN_PROCESS = [
    ("version_echo", "VersionEchoAgent", "initialize-version"),
    ("update_after_cancel", "UpdateAfterCancelAgent", "cancel"),
    ("invalid_update", "InvalidUpdateAgent", "schema-strict"),
]
# The broken agents checked over stdio: under the ci profile those without an in-process run of
# the same class above (check_command's own path is covered by those, the echo, SDK and auth
# agents); under the slow profile all of them (tests/budget.py).
BROKEN_STDIO = sorted(name for name in BROKEN if FULL or name not in {m for m, _, _ in BROKEN_IN_PROCESS})

# What the echo agent does not advertise (skipped), and what needs a prompt that keeps running.
# The echo agent serves every session method through the session layer; what it does not advertise:
NOT_ADVERTISED = {"authenticate", "session-additional-directories", "prompt-image", "prompt-audio"}
# ...and what the layer serves but an agent that advertises nothing (Plain) leaves unchecked too:
LAYER_CHECKS = {
    "session-resume", "session-list", "session-list-cwd", "session-close", "session-close-prompt",
    "session-delete", "session-delete-unknown", "config-options", "config-set",
}  # fmt: skip
# The echo agents keep sessions in memory: a restarted agent cannot load them (info tier).
IN_MEMORY = {"info-load-after-restart": "not exercised"}


def check_agent_in_a_loop() -> Report:
    async def inside() -> Report:
        return await check_agent_async(EchoAgent)

    return asyncio.run(inside())


class Runs(Background[Report]):
    """The module's check runs, all started at once, each in a thread of its own (so its own
    event loop, as each test had it): a run spends nearly all its time waiting (settle windows,
    agents starting and exiting), a second each, so one after another they left a core idle."""

    def __init__(self, silent_pids: Path) -> None:
        super().__init__("conformance", workers=20)
        self.silent_pids = silent_pids  # where the silent agent and its grandchild write their pids


ACTIVE: list[Runs] = []  # the `runs` fixture's, while it lives


# The run each test of this module asserts on: its key in `Runs`, from the test's name and parameters.
RUN_OF_TEST: dict[str, Callable[[dict[str, Any]], str]] = {
    "test_silent_agent_and_its_grandchild_are_gone_afterwards": lambda _: "silent",
    "test_an_agent_that_exits_at_once_cannot_be_checked": lambda _: "exits-at-once",
    "test_echo_agent_passes_every_check_in_process": lambda _: "in-process",
    "test_junit_xml_has_one_testcase_per_check": lambda _: "in-process",
    "test_broken_agent_in_process_fails_exactly_its_check": lambda p: f"in-process:{p['module']}",
    "test_check_agent_async_runs_inside_an_event_loop": lambda _: "async",
    "test_a_prompt_that_fails_is_not_testable_not_passed": lambda _: "no-credentials",
    "test_modes_and_load_are_skipped_when_not_advertised": lambda _: "plain",
    "test_state_updates_after_an_answer_fail_nothing": lambda _: "state-after-answers",
    "test_a_replayed_entry_after_the_load_answer_fails_session_load": lambda _: "replay-after-load",
    "test_an_ignored_cancel_fails_cancel": lambda _: "ignores-cancel",
    "test_an_agent_without_its_backend_fails_nothing": lambda _: "no-backend",
    "test_a_turn_that_always_ends_cancelled_proves_no_cancel": lambda _: "always-cancelled",
    "test_an_answered_notification_fails_its_check_not_framing": lambda _: "answered",
    "test_official_sdk_example_agent": lambda _: "sdk",
    "test_official_sdk_echo_agent_passes": lambda _: "sdk-echo",
    "test_an_agent_demanding_authentication_is_blocked_not_passed": lambda _: "auth",
    "test_broken_agent_fails_exactly_the_check_it_breaks": lambda p: f"stdio:{p['name']}",
}


def selected_runs(request: pytest.FixtureRequest) -> set[str]:
    """The keys of the runs that the selected tests of this module need."""
    return {
        RUN_OF_TEST[item.originalname](item.callspec.params if hasattr(item, "callspec") else {})
        for item in selected(request)
        if item.originalname in RUN_OF_TEST
    }


@pytest.fixture(scope="module")
def runs(
    agent_command: Command, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Runs]:
    """Every check run the selected tests below assert on (each test's own call, unchanged),
    started together."""
    runs = Runs(tmp_path_factory.mktemp("silent") / "pids")
    ACTIVE.append(runs)
    wanted = selected_runs(request)

    def start(key: str, run: Callable[[], Callable[[], Report]]) -> None:
        if key in wanted:  # `run` makes the call (and starts its agent server) only then
            runs.start(key, run())

    # First the silent agent, so it starts before the others.
    env = dict(os.environ, SILENT_AGENT_PIDS=str(runs.silent_pids))
    silent = [sys.executable, str(AGENTS / "silent.py")]
    quick = Options(timeout=0.5, startup_timeout=0.5, eof_timeout=0.2)
    start("silent", lambda: partial(check_command, silent, quick, env=env))
    start("exits-at-once", lambda: partial(check_command, [sys.executable, "-c", "pass"]))
    start("in-process", lambda: partial(check_agent, EchoAgent, CANCEL_SLOW))
    for module, name, _ in BROKEN_IN_PROCESS:
        make = getattr(__import__(module), name)
        start(f"in-process:{module}", lambda make=make: partial(check_agent, make, CANCEL_SLOW))
    start("async", lambda: check_agent_in_a_loop)
    start("no-credentials", lambda: partial(check_agent, NoCredentials))
    start("plain", lambda: partial(check_agent, Plain))
    start("state-after-answers", lambda: partial(check_agent, StateAfterAnswers, CANCEL_SLOW))
    start("replay-after-load", lambda: partial(check_agent, ReplayAfterLoad, CANCEL_SLOW))
    start("ignores-cancel", lambda: partial(check_agent, IgnoresCancel, CANCEL_SLOW))
    answered = agent_command(AGENTS / "notification_answered.py", "_base")
    start("answered", lambda: partial(check_command, answered, replace(PATIENT, select=compile_selection(WIRE))))
    turns = Options(select=compile_selection("cancel or turn"))
    start("always-cancelled", lambda: partial(check_agent, AlwaysCancelled, turns))
    start("no-backend", lambda: partial(check_agent, NoBackend, Options(timeout=NO_BACKEND_TIMEOUT)))
    # The longest runs first: the SDK's server imports for ~0.7 s here, while the runs above go on.
    sdk = ROOT / "tests" / "fixtures" / "sdk-examples" / "echo_agent.py"  # upstream's, verbatim
    start("sdk", lambda: partial(check_command, agent_command(sdk, "acp", "acp.schema"), SDK_EXAMPLE))
    sdk_echo = ROOT / "tests" / "sdk_echo_agent.py"
    start("sdk-echo", lambda: partial(check_command, agent_command(sdk_echo, "acp", "acp.schema"), PATIENT))
    for name in [*BROKEN_STDIO, "auth_required"]:
        script = AGENTS / f"{name}.py"
        key = "auth" if name == "auth_required" else f"stdio:{name}"
        start(key, lambda script=script: partial(check_command, agent_command(script, "_base"), PATIENT))
    yield runs
    ACTIVE.remove(runs)
    runs.close()


def no_runs_meanwhile() -> None:
    """CliRunner swaps sys.stdout, sys.stderr and os.environ for the whole process: a test using
    it waits until no check run is left in the background."""
    for active in ACTIVE:
        active.finish()


def not_passed(report: Report) -> dict[str, str]:
    return {r.check.id: r.status for r in report.results if r.status != "passed"}


# -- in-process -----------------------------------------------------------------------------
def test_echo_agent_passes_every_check_in_process(runs: Runs) -> None:
    report = runs.result("in-process")  # check_agent(EchoAgent, CANCEL_SLOW)
    assert [r.check.id for r in report.results] == [check.id for check in CHECKS]
    assert len(report.results) >= 40
    assert not_passed(report) == dict.fromkeys(NOT_ADVERTISED, "skipped") | IN_MEMORY, str(report)
    assert report.result("cancel").detail == "stopReason cancelled"  # a real cancellation
    assert report.result("session-load").detail == "2 updates replayed"  # the user block and its echo
    assert report.result("no-fs-without-capability").detail.startswith("none in ")  # turns did run
    assert (
        report.tier_summary()
        == "MUST 18/18 · capability 12/12 (4 not advertised) · SHOULD 10/10 · info 6"
    )
    assert report.exit_code(strict=True) == 0
    assert_conforms(report, strict=True)


def test_junit_xml_has_one_testcase_per_check(runs: Runs) -> None:
    report = runs.result("in-process")
    report.results[0].status, report.results[0].detail = "failed", "a failure"  # a copy would do as well
    try:
        root = ET.fromstring(junit_xml(report).split("\n", 1)[1])  # (after the XML declaration)
    finally:
        report.results[0].status, report.results[0].detail = "passed", ""
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == str(len(CHECKS)) and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == [check.id for check in CHECKS]
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("message") == "a failure"
    assert len(suite.findall("testcase/skipped")) == len(NOT_ADVERTISED) + len(IN_MEMORY)  # not exercised too


@pytest.mark.parametrize(("module", "name", "check"), BROKEN_IN_PROCESS)
def test_broken_agent_in_process_fails_exactly_its_check(module: str, name: str, check: str, runs: Runs) -> None:
    report = runs.result(f"in-process:{module}")  # check_agent(<module>.<name>, CANCEL_SLOW)
    assert failed(report) == {check}, str(report)
    assert report.result(check).offending
    assert report.result(check).transcript  # the check's own wire lines, for --json
    with pytest.raises(AssertionError, match=check):
        assert_conforms(report)


def test_check_agent_async_runs_inside_an_event_loop(runs: Runs) -> None:
    assert failed(runs.result("async")) == set()  # awaits check_agent_async in asyncio.run


def test_a_prompt_that_fails_is_not_testable_not_passed(runs: Runs) -> None:
    report = runs.result("no-credentials")  # check_agent(NoCredentials)
    assert report.result("prompt-turn").status == "not testable"
    assert "-32000" in report.result("prompt-turn").detail
    assert "--auth-method" in report.result("prompt-turn").blocked
    assert report.result("cancel").status == "not testable"
    assert report.result("no-fs-without-capability").status == "not testable"  # no turn to watch
    assert failed(report) == set()
    assert report.exit_code() == 1  # MUST checks that could not run count against the verdict


def test_modes_and_load_are_skipped_when_not_advertised(runs: Runs) -> None:
    result = not_passed(runs.result("plain"))  # check_agent(Plain)
    gone = {"session-modes", "session-modes-unknown", "session-load", "session-load-fresh", "info-load-after-restart"}
    assert result == dict.fromkeys(NOT_ADVERTISED | LAYER_CHECKS | gone, "skipped") | {"cancel": "not exercised"}


def test_state_updates_after_an_answer_fail_nothing(runs: Runs) -> None:
    report = runs.result("state-after-answers")  # check_agent(StateAfterAnswers, CANCEL_SLOW)
    assert failed(report) == set(), str(report)
    assert report.result("session-load").status == report.result("prompt-turn").status == "passed"


def test_a_replayed_entry_after_the_load_answer_fails_session_load(runs: Runs) -> None:
    report = runs.result("replay-after-load")  # check_agent(ReplayAfterLoad, CANCEL_SLOW)
    assert failed(report) == {"session-load"}, str(report)  # a fresh session has nothing to replay
    assert '"sessionUpdate":"agent_message_chunk"' in (report.result("session-load").offending or "")


def test_an_ignored_cancel_fails_cancel(runs: Runs) -> None:
    report = runs.result("ignores-cancel")  # check_agent(IgnoresCancel, CANCEL_SLOW)
    assert failed(report) == {"cancel"}, str(report)
    assert (
        report.result("cancel").detail
        == "the turn went on after session/cancel and ended with 'end_turn', not cancelled"
    )


def test_an_agent_without_its_backend_fails_nothing(runs: Runs) -> None:
    """claude-agent-acp's and claude-code-acp's answers without credentials (see NoBackend)."""
    report = runs.result("no-backend")  # check_agent(NoBackend, Options(timeout=NO_BACKEND_TIMEOUT))
    assert failed(report) == set(), str(report)
    assert report.result("session-new").status == "passed"  # its second session/new: SLOW_SESSION
    for check in ("session-close-prompt", "cancel"):  # no turn to interrupt: -32603 or not
        assert report.result(check).status == "not testable"
        assert report.result(check).detail.startswith("a plain prompt is refused")
    assert report.result("session-load-fresh").status == "not exercised"  # nothing stored yet


def test_a_turn_that_always_ends_cancelled_proves_no_cancel(runs: Runs) -> None:
    report = runs.result("always-cancelled")  # check_agent(AlwaysCancelled, -k "cancel or turn")
    assert report.result("prompt-turn").detail == "stopReason cancelled"
    cancel = report.result("cancel")  # sent 0.2 s in, before the answer: no pass all the same
    assert cancel.status == "not exercised" and "so does a plain prompt" in cancel.detail


# -- over stdio -----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", BROKEN_STDIO)
def test_broken_agent_fails_exactly_the_check_it_breaks(name: str, runs: Runs) -> None:
    report = runs.result(f"stdio:{name}")  # check_command(agent_command(<name>.py, "_base"), PATIENT)
    assert failed(report) == {BROKEN[name]}, str(report)
    assert set(not_passed(report)) - NOT_ADVERTISED - set(IN_MEMORY) == {BROKEN[name]}, str(report)


WIRE = "stdio-framing or notification or jsonrpc"


@pytest.mark.slow
def test_an_answered_notification_fails_its_check_not_framing(runs: Runs) -> None:
    """codex-acp answers an unknown `_` notification with an id-less error: one fault, failed
    by the MUST (FP-4: a reply without an `id` key is still a reply), not by the SHOULD too."""
    report = runs.result("answered")  # check_command(notification_answered.py, PATIENT, -k WIRE)
    assert not_passed(report) == {"notification-no-response": "failed"}, str(report)
    assert report.result("unknown-notification").warnings  # noted there, not failed twice
    assert report.result("notification-no-response").offending == (
        '{"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found", '
        '"data": "_acp_conformance/unknown_notification"}}'
    )
    assert report.result("stdio-framing").warnings  # the line is noted there, not failed


@pytest.mark.slow
def test_an_agent_demanding_authentication_is_blocked_not_passed(runs: Runs) -> None:
    report = runs.result("auth")  # check_command(agent_command(auth_required.py, "_base"), PATIENT)
    assert failed(report) == set()
    assert report.result("session-new").status == report.result("prompt-turn").status == "not testable"
    hint = "blocked by authentication: pass `--auth-method ID` and the agent's env"
    assert report.result("session-new").blocked.startswith(hint)
    assert any(hint in line and "session-new" in line for line in report.lines())
    assert report.exit_code() == 1 and not report.ok()


@pytest.mark.slow
def test_official_sdk_example_agent(runs: Runs) -> None:
    """Upstream's example echo agent (tests/fixtures/sdk-examples/echo_agent.py): three real deviations."""
    report = runs.result("sdk")  # check_command(agent_command(sdk-examples/echo_agent.py), SDK_EXAMPLE)
    # It answers initialize with the version it was asked for, 65535 included (MUST), with no
    # agentInfo (SHOULD), and the SDK's Agent base class answers any `_` request with result
    # null instead of -32601 (SHOULD). (Under the ci profile, SDK_EXAMPLE_CORE's checks only.)
    assert failed(report) == {"initialize-version", "agent-info", "unknown-ext-method"}, str(report)
    version = report.result("initialize-version").offending
    assert version == '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":65535}}'
    assert report.result("unknown-ext-method").offending == '{"jsonrpc":"2.0","id":1,"result":null}'
    assert not report.ok()
    if not FULL:  # the SDK_EXAMPLE_CORE checks only
        assert {r.check.id for r in report.results if r.status == "passed"} >= {"session-new", "prompt-turn"}
        return
    gone = {"session-modes", "session-modes-unknown", "session-load", "session-load-fresh", "prompt-resource"}
    gone.add("info-load-after-restart")
    assert set(not_passed(report)) - NOT_ADVERTISED - LAYER_CHECKS - gone == failed(report) | {"cancel"}
    assert not report.ok()


@pytest.mark.slow
def test_official_sdk_echo_agent_passes(runs: Runs) -> None:
    report = runs.result("sdk-echo")  # check_command(agent_command(tests/sdk_echo_agent.py, ...), PATIENT)
    assert not_passed(report) == dict.fromkeys(NOT_ADVERTISED | LAYER_CHECKS, "skipped") | IN_MEMORY, str(report)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")
def test_silent_agent_and_its_grandchild_are_gone_afterwards(runs: Runs) -> None:
    report = runs.result("silent")  # check_command(silent.py, Options(timeout=0.5, ...), env=...)
    assert failed(report) == {"initialize", "exit-on-eof"}
    assert report.result("initialize").detail == "initialize failed: no answer within 0.5 s of silence"
    assert report.result("session-new").status == "not testable"
    assert report.elapsed < 10  # one agent waited for, the others blocked by its initialize
    started = [int(pid) for pid in runs.silent_pids.read_text().split()]
    assert len(started) == 2  # the agent and its grandchild
    deadline = time.monotonic() + 5  # the grandchild's zombie is reaped by init, asynchronously
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in started)


def test_an_agent_that_cannot_start_cannot_be_checked_and_nothing_waits(tmp_path: Path) -> None:
    report = check_command([str(tmp_path / "no-such-agent")])
    assert report.result("initialize").status == "failed"
    assert report.result("initialize").detail.startswith("cannot start the agent:")
    assert report.result("session-new").detail.startswith("the agent cannot be checked: cannot start it")
    assert report.exit_code() == 2 and report.cannot_run


@pytest.mark.slow
def test_an_agent_that_exits_at_once_cannot_be_checked(runs: Runs) -> None:
    report = runs.result("exits-at-once")  # check_command([sys.executable, "-c", "pass"])
    assert failed(report) == {"initialize"}
    assert report.result("initialize").detail.startswith("initialize failed: the agent closed the connection")
    assert report.result("exit-on-eof").status == "passed"
    assert report.cannot_run.startswith("it exited before answering initialize")
    assert report.exit_code() == 2


def test_strict_reports_unknown_fields_on_its_fast_path() -> None:
    """schema-strict decodes a clean message without walking it (issue 30 §2's flood speed);
    one with an unknown field or variant still gets its warning, by wire path."""
    from agent.testing.conformance_messages import strict
    from agent.testing.scripted import Line

    clean = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}}}  # fmt: skip
    odd = json.loads(json.dumps(clean))
    odd["params"]["update"]["content"]["shiny"] = 1

    class Client:
        received = [Line(i, json.dumps(m).encode(), m) for i, m in enumerate((clean, odd, clean))]

        def sent_method(self, msg_id: object) -> None:
            return None

    class Run:
        client = Client()

    outcome = strict([Run()])  # type: ignore[list-item]  # the attributes strict reads
    assert outcome[0] == "passed"
    assert outcome[3] == ["session/update: params.update.content.shiny: unknown field"]
