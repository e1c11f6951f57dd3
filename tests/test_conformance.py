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
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from agent import RequestError, run_agent, types  # generated/agent, on sys.path via conftest
from agent.testing import (
    CHECKS,
    CheckResult,
    MemoryStream,
    Options,
    Report,
    ScriptedClient,
    assert_conforms,
    check_agent,
    check_agent_async,
    check_command,
    memory_streams,
    unknown_warnings,
)
from overlap import Background, selected
from typer.testing import CliRunner

from codegen.cli import app

ROOT = Path(__file__).resolve().parent.parent
AGENTS = Path(__file__).resolve().parent / "fixtures" / "agents"
ECHO_AGENT = ROOT / "examples" / "echo_agent.py"
for path in (AGENTS, ROOT / "examples"):
    sys.path.insert(0, str(path))

from echo_agent import EchoAgent  # noqa: E402

ALL_IDS = {check.id for check in CHECKS}
DOCS = ROOT.parent / "shared" / "acp-docs" / "v1"  # beside the project, when present


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
def _report(status_by_level: dict[str, str]) -> Report:
    by_level = {check.level: check for check in CHECKS}
    results = [CheckResult(by_level[level], status) for level, status in status_by_level.items()]  # type: ignore[arg-type]
    return Report("t", results)


def test_recorded_lines_are_parsed_as_the_connection_parses_them() -> None:
    """NaN and Infinity are not JSON: a line holding one is recorded as not JSON (framing check)."""
    (reader, writer), _ = memory_streams()
    scripted = ScriptedClient(reader, writer)
    scripted._record("in", b'{"jsonrpc":"2.0","method":"x","params":{"v":NaN}}')
    scripted._record("in", b'{"jsonrpc":"2.0","method":"x","params":{"v":1.5}}')
    bad, good = scripted.received
    assert bad.message is None and bad.error is not None and "NaN" in bad.error
    assert good.error is None and good.method == "x"


def test_exit_rule_must_fails_should_only_with_strict_info_never() -> None:
    should_failed = _report({"MUST": "passed", "SHOULD": "failed", "INFO": "failed"})
    assert should_failed.ok() and not should_failed.ok(strict=True)
    info_failed = _report({"MUST": "skipped", "SHOULD": "not testable", "INFO": "failed"})
    assert info_failed.ok(strict=True)
    assert not _report({"MUST": "failed"}).ok()
    assert should_failed.summary() == "1 passed, 2 failed, 0 skipped, 0 not testable"


def _plain(markdown: str) -> str:
    """Doc text without markup: links become their text, no bold, no code quotes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown).replace("**", "").replace("`", "")
    return re.sub(r"\s+", " ", text)


@pytest.mark.skipif(not DOCS.is_dir(), reason="the ACP docs are not beside the project")
def test_every_check_quotes_its_doc_page_and_names_a_real_section() -> None:
    for check in CHECKS:
        page, _, sections = check.doc.partition(" § ")
        markdown = (DOCS / page).read_text(encoding="utf-8")
        assert check.level in ("MUST", "SHOULD", "INFO")
        for section in sections.split(", § "):
            assert re.search(rf"^(#+ |title: \"){re.escape(section)}\"?$", markdown, re.M), (check.id, section)
        quoted = check.rule.split(" (JSON-RPC")[0].split(" (the sequence")[0]  # our notes in parentheses
        text = _plain(markdown)
        for sentence in re.split(r"(?<=\.) ", quoted):
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
}

BROKEN_IN_PROCESS = [
    ("version_echo", "VersionEchoAgent", "initialize-version"),
    ("update_after_cancel", "UpdateAfterCancelAgent", "cancel"),
    ("invalid_update", "InvalidUpdateAgent", "schema-strict"),
]


class NoCredentials(EchoAgent):
    async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
        raise RequestError.auth_required()


class Plain(EchoAgent):
    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        response = await super().initialize(params)
        response.agent_capabilities.load_session = False
        return response

    async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
        response = await super().session_new(params)
        response.modes = types.UNSET
        return response


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
    "test_an_agent_that_exits_at_once_fails_initialize": lambda _: "exits-at-once",
    "test_echo_agent_passes_every_check_in_process": lambda _: "in-process",
    "test_broken_agent_in_process_fails_exactly_its_check": lambda p: f"in-process:{p['module']}",
    "test_check_agent_async_runs_inside_an_event_loop": lambda _: "async",
    "test_a_prompt_that_fails_is_not_testable_not_passed": lambda _: "no-credentials",
    "test_modes_and_load_are_skipped_when_not_advertised": lambda _: "plain",
    "test_official_sdk_example_agent": lambda _: "sdk",
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
    start("silent", lambda: partial(check_command, silent, Options(timeout=0.5, eof_timeout=0.2), env=env))
    start("exits-at-once", lambda: partial(check_command, [sys.executable, "-c", "pass"]))
    start("in-process", lambda: partial(check_agent, EchoAgent, CANCEL_SLOW))
    for module, name, _ in BROKEN_IN_PROCESS:
        make = getattr(__import__(module), name)
        start(f"in-process:{module}", lambda make=make: partial(check_agent, make, CANCEL_SLOW))
    start("async", lambda: check_agent_in_a_loop)
    start("no-credentials", lambda: partial(check_agent, NoCredentials))
    start("plain", lambda: partial(check_agent, Plain))
    # The longest run first: the SDK's server imports for ~0.7 s here, while the runs above go on.
    sdk = AGENTS / "sdk_example_agent.py"
    start("sdk", lambda: partial(check_command, agent_command(sdk, "acp", "acp.schema"), PATIENT))
    for name in sorted(BROKEN):
        script = AGENTS / f"{name}.py"
        start(f"stdio:{name}", lambda script=script: partial(check_command, agent_command(script, "_base"), PATIENT))
    yield runs
    ACTIVE.remove(runs)
    runs.close()


def no_runs_meanwhile() -> None:
    """CliRunner swaps sys.stdout, sys.stderr and os.environ for the whole process: a test using
    it waits until no check run is left in the background."""
    for active in ACTIVE:
        active.finish()


# -- in-process -----------------------------------------------------------------------------
def test_echo_agent_passes_every_check_in_process(runs: Runs) -> None:
    report = runs.result("in-process")  # check_agent(EchoAgent, CANCEL_SLOW)
    assert statuses(report) == dict.fromkeys(ALL_IDS, "passed"), str(report)
    assert report.result("cancel").detail == "stopReason cancelled"  # a real cancellation
    assert report.result("session-load").detail == "2 updates replayed"  # the user block and its echo
    assert_conforms(report, strict=True)


@pytest.mark.parametrize(("module", "name", "check"), BROKEN_IN_PROCESS)
def test_broken_agent_in_process_fails_exactly_its_check(module: str, name: str, check: str, runs: Runs) -> None:
    report = runs.result(f"in-process:{module}")  # check_agent(<module>.<name>, CANCEL_SLOW)
    assert failed(report) == {check}, str(report)
    assert report.result(check).offending
    with pytest.raises(AssertionError, match=check):
        assert_conforms(report)


def test_check_agent_async_runs_inside_an_event_loop(runs: Runs) -> None:
    assert failed(runs.result("async")) == set()  # awaits check_agent_async in asyncio.run


def test_a_prompt_that_fails_is_not_testable_not_passed(runs: Runs) -> None:
    report = runs.result("no-credentials")  # check_agent(NoCredentials)
    assert report.result("prompt-turn").status == "not testable"
    assert "-32000" in report.result("prompt-turn").detail
    assert report.result("cancel").status == "not testable"
    assert failed(report) == set()


def test_modes_and_load_are_skipped_when_not_advertised(runs: Runs) -> None:
    result = statuses(runs.result("plain"))  # check_agent(Plain)
    assert {k for k, v in result.items() if v != "passed"} == {"session-modes", "session-modes-unknown", "session-load"}
    assert result["session-load"] == result["session-modes"] == "skipped"


# -- over stdio -----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_agent_fails_exactly_the_check_it_breaks(name: str, runs: Runs) -> None:
    report = runs.result(f"stdio:{name}")  # check_command(agent_command(<name>.py, "_base"), PATIENT)
    assert failed(report) == {BROKEN[name]}, str(report)
    assert all(status in ("passed", "failed") for status in statuses(report).values()), str(report)


@pytest.mark.slow
def test_official_sdk_example_agent(runs: Runs) -> None:
    """Upstream's example echo agent: two real deviations (see the fixture's docstring)."""
    report = runs.result("sdk")  # check_command(agent_command(sdk_example_agent.py, "acp", ...), PATIENT)
    # It answers initialize with the version it was asked for, 65535 included (MUST), and the
    # SDK's Agent base class answers any `_` request with result null instead of -32601 (SHOULD).
    assert failed(report) == {"initialize-version", "unknown-ext-method"}, str(report)
    version = report.result("initialize-version").offending
    assert version == '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":65535}}'
    assert report.result("unknown-ext-method").offending == '{"jsonrpc":"2.0","id":1,"result":null}'
    skipped = {k for k, v in statuses(report).items() if v == "skipped"}
    assert skipped == {"session-modes", "session-modes-unknown", "session-load"}
    assert not report.ok()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")
def test_silent_agent_and_its_grandchild_are_gone_afterwards(runs: Runs) -> None:
    report = runs.result("silent")  # check_command(silent.py, Options(timeout=0.5, eof_timeout=0.2), env=...)
    assert failed(report) == {"initialize", "exit-on-eof"}
    assert report.result("initialize").detail == "initialize failed: no answer within 0.5 s"
    assert report.result("session-new").status == "not testable"
    started = [int(pid) for pid in runs.silent_pids.read_text().split()]
    assert len(started) == 2  # the agent and its grandchild
    deadline = time.monotonic() + 5  # the grandchild's zombie is reaped by init, asynchronously
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in started)


def test_an_agent_that_cannot_start_fails_initialize_and_nothing_waits(tmp_path: Path) -> None:
    report = check_command([str(tmp_path / "no-such-agent")])
    assert report.result("initialize").status == "failed"
    assert report.result("initialize").detail.startswith("cannot start the agent:")
    assert report.result("session-new").detail == "initialize did not pass"
    assert not report.ok()


@pytest.mark.slow
def test_an_agent_that_exits_at_once_fails_initialize(runs: Runs) -> None:
    report = runs.result("exits-at-once")  # check_command([sys.executable, "-c", "pass"])
    assert failed(report) == {"initialize"}
    assert report.result("initialize").detail.startswith("initialize failed: the agent closed the connection")
    assert report.result("exit-on-eof").status == "passed"


# -- the CLI --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def cli_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("acp-codegen-cache")


def _cli(cache: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["check-agent", *args], env={"ACP_CODEGEN_CACHE": str(cache)})


@pytest.mark.slow
def test_cli_echo_agent_passes_every_check(cli_cache: Path, agent_command: Command) -> None:
    no_runs_meanwhile()
    result = _cli(cli_cache, "--timeout", "20", "--", *agent_command(ECHO_AGENT, "echo_agent"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1] == f"{len(CHECKS)} passed, 0 failed, 0 skipped, 0 not testable"
    assert sum(line.startswith("PASSED") for line in lines) == len(CHECKS)
    assert [p.name for p in cli_cache.iterdir()] == [next(cli_cache.iterdir()).name]  # one cached package


@pytest.mark.slow
def test_cli_json_and_exit_code_for_a_broken_agent(cli_cache: Path, agent_command: Command) -> None:
    no_runs_meanwhile()
    agent = agent_command(AGENTS / "version_echo.py", "_base")
    result = _cli(cli_cache, "--json", "--timeout", "20", "--", *agent)
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert [r["id"] for r in data["results"] if r["status"] == "failed"] == ["initialize-version"]
    assert data["ok"] is False and data["counts"]["failed"] == 1


def test_cli_without_a_runnable_command_exits_2(tmp_path: Path) -> None:
    no_runs_meanwhile()
    assert _cli(tmp_path).exit_code == 2
    result = _cli(tmp_path, "--", str(tmp_path / "no-such-agent"))
    assert result.exit_code == 2 and "not found" in result.output
    assert not list(tmp_path.iterdir())  # nothing generated for a command that cannot run
