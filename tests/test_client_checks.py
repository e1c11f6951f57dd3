"""check-client: the client conformance checks against the echo client, the official SDK's
example client, the broken clients of tests/fixtures/clients (one fault each: each fails exactly
its own check), an in-process client, and `acp-codegen check-client`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent.testing.client_conformance import (  # generated/agent, on sys.path via conftest
    CHECKS,
    PROBE_RELAY,
    REMOTE_CHECKS,
    ClientOptions,
    assert_client_conforms,
    check_client,
    check_client_command,
    expand_agent,
)
from agent.testing.conformance_report import Report
from client import Client, connect, types  # the golden client package
from overlap import Background, selected
from typer.testing import CliRunner

from codegen.cli import app

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = Path(__file__).resolve().parent / "fixtures" / "clients"
# The official SDK's example client, verbatim with its LICENSE (also a peer of tests/test_sdk_examples.py).
SDK_EXAMPLES = Path(__file__).resolve().parent / "fixtures" / "sdk-examples"
FAULTY = CLIENTS / "faulty_client.py"
OPTIONS = ClientOptions(timeout=3.0, idle=3.0)
FAULTS = {
    "load": "client-session-load",
    "relative-cwd": "client-session-cwd",
    "no-permission-answer": "client-permission-answered",
    "bad-option": "client-permission-option",
    "non-json": "client-stdio-framing",
    "pending-after-cancel": "client-cancel-permission",
    "fs-not-served": "client-fs-read",  # advertised, answered -32601
}
RUNS = {
    "echo": ([sys.executable, str(ROOT / "examples" / "echo_client.py"), "{agent}"], b""),
    "sdk": ([sys.executable, str(SDK_EXAMPLES / "client.py"), "{agent}"], b"hello\n"),
    **{fault: ([sys.executable, str(FAULTY), fault, "{agent}"], b"") for fault in (*FAULTS, "cancel", "stays")},
}


def failed(report: Report) -> set[str]:
    return {r.check.id for r in report.results if r.status == "failed"}


def status(report: Report, check_id: str) -> str:
    return report.result(check_id).status


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest) -> Iterator[Background[Report]]:
    """Every client run of the selected tests, started together (they mostly wait)."""
    names = {name for item in selected(request) for name in RUNS if f"[{name}]" in item.name}
    names |= {"echo"} if any("echo" in item.name for item in selected(request)) else set()
    names |= {"sdk"} if any("sdk" in item.name for item in selected(request)) else set()
    names |= {"cancel"} if any("cancel_done_right" in item.name for item in selected(request)) else set()
    names |= {"stays"} if any("never_exits" in item.name for item in selected(request)) else set()
    background: Background[Report] = Background("client-checks", max(1, len(names)))
    for name in sorted(names):
        argv, stdin = RUNS[name]
        background.start(name, lambda argv=argv, stdin=stdin: check_client_command(argv, OPTIONS, stdin=stdin))
    yield background
    background.close()


def test_expand_agent() -> None:
    probe = ["python", "/x y/probe_relay.py", "--channel", "/s"]
    assert expand_agent(["c", "{agent}", "run"], probe) == ["c", *probe, "run"]
    assert expand_agent(["acpx", "--agent={agent}"], probe)[1] == "--agent=python '/x y/probe_relay.py' --channel /s"
    assert expand_agent(["sh", "-c", "exec {agent} 2>/dev/null"], probe)[2].startswith("exec python '/x y/")
    with pytest.raises(ValueError, match="no \\{agent\\}"):
        expand_agent(["acpx", "exec"], probe)


@pytest.mark.slow
def test_echo_client_passes_every_check_it_exercises(runs: Background[Report]) -> None:
    report = runs.result("echo")
    assert_client_conforms(report, strict=True)
    assert not failed(report)
    assert status(report, "client-fs-read") == status(report, "client-fs-write") == "passed"
    assert status(report, "client-terminal") == "skipped"  # it does not advertise terminal
    # It answers permission requests at once, so no cancel ever finds one pending.
    assert status(report, "client-cancel-permission") == "not exercised"
    assert sum(r.status == "passed" for r in report.results) >= 17


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(FAULTS))
def test_broken_client_fails_exactly_its_check(runs: Background[Report], fault: str) -> None:
    report = runs.result(fault)
    assert failed(report) == {FAULTS[fault]}, str(report)
    assert report.exit_code() == 1


@pytest.mark.slow
def test_cancel_done_right_passes(runs: Background[Report]) -> None:
    report = runs.result("cancel")
    assert not failed(report), str(report)
    assert status(report, "client-cancel-permission") == "passed"


@pytest.mark.slow
def test_client_that_never_exits_is_stopped(runs: Background[Report]) -> None:
    """Idle for OPTIONS.idle seconds after its turn, it is stopped (SIGTERM ignored: killed)."""
    report = runs.result("stays")
    assert not failed(report), str(report)
    assert report.elapsed < OPTIONS.idle + 10


@pytest.mark.slow
def test_sdk_example_client(runs: Background[Report]) -> None:
    """The official SDK's example client refuses session/request_permission with -32601, a
    method every client must answer (tool-calls.mdx: the Client responds with the user's
    decision); everything else it exercises passes."""
    report = runs.result("sdk")
    assert failed(report) == {"client-permission-answered"}, str(report)
    assert "-32601" in report.result("client-permission-answered").detail


@pytest.mark.slow
def test_no_probe_process_is_left(runs: Background[Report]) -> None:
    runs.finish()
    left = []
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if PROBE_RELAY.encode() in cmdline or str(FAULTY).encode() in cmdline:
            left.append(pid)
    assert not left


class InProcessClient(Client):
    """A small client with fs and a terminal, run in-process by `check_client`."""

    def __init__(self) -> None:
        self.terminals: dict[str, bytes] = {}

    async def session_update(self, params: types.SessionNotification) -> None:
        return None

    async def session_request_permission(
        self, params: types.RequestPermissionRequest
    ) -> types.RequestPermissionResponse:
        return types.RequestPermissionResponse(
            outcome=types.SelectedPermissionOutcome(option_id=params.options[1].option_id)
        )

    async def fs_read_text_file(self, params: types.ReadTextFileRequest) -> types.ReadTextFileResponse:
        text = Path(params.path).read_text(encoding="utf-8")
        if isinstance(params.line, int):
            limit = params.limit if isinstance(params.limit, int) else None
            lines = text.splitlines(keepends=True)[params.line - 1 :]
            text = "".join(lines if limit is None else lines[:limit])
        return types.ReadTextFileResponse(content=text)

    async def fs_write_text_file(self, params: types.WriteTextFileRequest) -> types.WriteTextFileResponse:
        Path(params.path).write_text(params.content, encoding="utf-8")
        return types.WriteTextFileResponse()

    async def terminal_create(self, params: types.CreateTerminalRequest) -> types.CreateTerminalResponse:
        args = params.args if isinstance(params.args, list) else []
        process = await asyncio.create_subprocess_exec(params.command, *args, stdout=asyncio.subprocess.PIPE)
        output, _ = await process.communicate()
        self.terminals[f"t{len(self.terminals)}"] = output
        return types.CreateTerminalResponse(terminal_id=f"t{len(self.terminals) - 1}")

    async def terminal_wait_for_exit(
        self, params: types.WaitForTerminalExitRequest
    ) -> types.WaitForTerminalExitResponse:
        return types.WaitForTerminalExitResponse(exit_code=0)

    async def terminal_output(self, params: types.TerminalOutputRequest) -> types.TerminalOutputResponse:
        output = self.terminals[params.terminal_id].decode()
        return types.TerminalOutputResponse(
            output=output, truncated=False, exit_status=types.TerminalExitStatus(exit_code=0)
        )

    async def terminal_release(self, params: types.ReleaseTerminalRequest) -> types.ReleaseTerminalResponse:
        self.terminals.pop(params.terminal_id)
        return types.ReleaseTerminalResponse()


async def run_in_process_client(reader: Any, writer: Any) -> None:
    proxy, connection = connect(InProcessClient(), reader, writer)
    serving = asyncio.ensure_future(connection.run())
    caps = types.ClientCapabilities(
        fs=types.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
    )
    with tempfile.TemporaryDirectory() as tmp:
        await proxy.initialize(
            protocol_version=1, client_capabilities=caps, client_info=types.Implementation(name="t", version="1")
        )
        session = await proxy.session_new(cwd=os.path.realpath(tmp), mcp_servers=[])
        await proxy.session_prompt(session_id=session.session_id, prompt=[types.TextContent(text="hi")])
    await connection.close()
    await asyncio.wait({serving}, timeout=1.0)


def test_in_process_client_every_capability() -> None:
    report = check_client(run_in_process_client, ClientOptions(timeout=3.0, idle=1.0))
    assert_client_conforms(report, strict=True)
    assert status(report, "client-terminal") == "passed"
    assert status(report, "client-fs-write") == "passed"
    assert status(report, "client-unadvertised") == "not exercised"  # it advertises everything
    assert report.elapsed < 5


@pytest.fixture
def golden_bindings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI on the golden agent package: no generation into a cache (check-agent's tests
    cover making and caching the bindings, which both commands share)."""
    import agent.testing.client_conformance as golden

    import codegen.check_client

    monkeypatch.setattr(codegen.check_client, "load_conformance", lambda *args: golden)


@pytest.mark.slow
@pytest.mark.usefixtures("golden_bindings")
def test_cli_json_junit_and_selection(tmp_path: Path) -> None:
    xml = tmp_path / "report.xml"
    argv = ["check-client", "--json", "--timeout", "3", "--junit-xml", str(xml), "-k", "framing or load"]
    result = CliRunner().invoke(app, [*argv, "--", sys.executable, str(FAULTY), "non-json", "{agent}"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert [r["id"] for r in report["results"]] == ["client-stdio-framing", "client-session-load"]
    assert report["results"][0]["status"] == "failed" and report["results"][0]["transcript"]
    assert xml.read_text(encoding="utf-8").count("<testcase ") == 2


@pytest.mark.usefixtures("golden_bindings")
def test_cli_usage_errors() -> None:
    runner = CliRunner()
    no_agent = runner.invoke(app, ["check-client", "--", sys.executable, "client.py"])
    assert no_agent.exit_code == 2 and "{agent}" in no_agent.output
    listed = runner.invoke(app, ["check-client", "--list"])
    assert listed.exit_code == 0 and all(check.id in listed.output for check in CHECKS)
    assert all(check.id in listed.output for check in REMOTE_CHECKS)  # with --listen
    # Over stdio the remote checks do not run: a selection of only them selects nothing.
    remote_only = runner.invoke(app, ["check-client", "-k", "client-remote", "--", sys.executable, "{agent}"])
    assert remote_only.exit_code == 2 and "selects no check" in remote_only.output


def test_in_process_client_that_raises_cannot_be_checked() -> None:
    async def broken(reader: Any, writer: Any) -> None:
        raise RuntimeError("no config file")

    report = check_client(broken, ClientOptions(timeout=1.0, idle=1.0))
    assert report.exit_code() == 2 and "no config file" in report.cannot_run


def raw_client(*messages: dict[str, Any]) -> Callable[[Any, Any], Awaitable[None]]:
    """A client that writes the given messages as they are, waiting for the answer to each
    request it sends (and never answering the probe's own requests)."""

    async def run(reader: Any, writer: Any) -> None:
        buffer = b""
        for message in messages:
            writer.write(json.dumps(message).encode() + b"\n")
            await writer.drain()
            if "method" not in message or "id" not in message:
                continue
            while not any(
                json.loads(line).get("id") == message["id"] and "method" not in json.loads(line)
                for line in buffer.splitlines()
                if line.strip()
            ):
                chunk = await reader.read(65536)
                if not chunk:
                    return
                buffer += chunk
        writer.close()

    return run


INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientInfo": {"name": "raw", "version": "1"}},
}
NEW = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}


def prompt(*blocks: dict[str, Any]) -> dict[str, Any]:
    params = {"sessionId": "probe-session-1-1", "prompt": list(blocks)}
    return {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": params}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        pytest.param((NEW,), {"client-initialize-first", "client-session-order"}, id="session-before-initialize"),
        pytest.param(
            ({**INIT, "params": {**INIT["params"], "protocolVersion": "1"}},),
            {"client-initialize-first", "client-schema-strict"},
            id="string-version",
        ),
        pytest.param(
            (
                INIT,
                NEW,
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "session/resume",
                    "params": {**NEW["params"], "sessionId": "probe-session-1-1"},
                },
            ),
            {"client-session-gated"},
            id="resume-not-advertised",
        ),
        pytest.param(
            (INIT, {**NEW, "params": {**NEW["params"], "additionalDirectories": ["/tmp"]}}),
            {"client-session-gated"},
            id="additional-directories",
        ),
        pytest.param(
            (
                INIT,
                NEW,
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "session/set_mode",
                    "params": {"sessionId": "probe-session-1-1", "modeId": "yolo"},
                },
            ),
            {"client-session-mode"},
            id="unlisted-mode",
        ),
        pytest.param(
            (INIT, NEW, {"jsonrpc": "2.0", "id": None, "result": {}}),
            {"client-notifications"},
            id="answers-no-request",
        ),
        pytest.param(
            (INIT, NEW, prompt({"type": "image", "mimeType": "image/png", "data": "AA=="})),
            # It answers none of the probe's requests either: its silence is blamed on the first
            # it left unanswered (FF-2); the checks after it are blocked by that one.
            {"client-prompt-content", "client-permission-answered"},
            id="image-without-capability",
        ),
    ],
)
def test_record_rules_fail_what_breaks_them(messages: tuple[dict[str, Any], ...], expected: set[str]) -> None:
    report = check_client(raw_client(*messages), ClientOptions(timeout=0.3, idle=0.5))
    assert failed(report) == expected, str(report)


def test_silence_is_blamed_on_the_first_unanswered_request() -> None:
    """FF-2 (chuk-acp's client): it never answers the permission request and says nothing
    after; client-unknown-update and the later requests' checks are blocked by
    client-permission-answered, not failed."""
    silent = raw_client(INIT, NEW, prompt({"type": "text", "text": "hi"}))
    report = check_client(silent, ClientOptions(timeout=0.3, idle=0.5))
    assert failed(report) == {"client-permission-answered"}, str(report)
    blocked = {r.check.id: r.blocked_by for r in report.results if r.blocked_by}
    assert blocked == dict.fromkeys(
        ("client-unknown-update", "client-unadvertised", "client-unknown-ext-method"),
        "client-permission-answered",
    )
    assert report.verdict() == "not conformant: client-permission-answered"


# -- check-client --listen (issue 30 §5): remote clients, both profiles, the RFD's client rules --
REMOTE_FAULTY = CLIENTS / "remote_faulty_client.py"
SDK_REMOTE = CLIENTS / "sdk_remote_client.py"
REMOTE_RUNS = {
    "ours": [sys.executable, str(REMOTE_FAULTY), "none", "{url}"],
    "no-cookies": [sys.executable, str(REMOTE_FAULTY), "no-cookies", "{url}"],
    "ws-only": [sys.executable, str(REMOTE_FAULTY), "ws-only", "{url}"],
    "sdk": [sys.executable, str(SDK_REMOTE), "{url}"],
}


@pytest.fixture(scope="module")
def remote_runs(request: pytest.FixtureRequest) -> Iterator[Background[Report]]:
    """The remote client runs of the selected tests, together (each serves the probe agent on
    its own free port, WebSocket then Streamable HTTP; they mostly wait)."""
    from agent.testing.client_remote import check_client_listen

    names = {name for item in selected(request) for name in REMOTE_RUNS if f"[{name}]" in item.name}
    background: Background[Report] = Background("client-remote", max(1, len(names)))
    for name in sorted(names):
        argv = REMOTE_RUNS[name]
        background.start(name, lambda argv=argv: check_client_listen(argv, "127.0.0.1:0", OPTIONS))
    yield background
    background.close()


REMOTE_FAULTS = {
    "ours": set(),  # connect_remote: cookies kept, both headers on session POSTs
    "no-cookies": {"client-remote-cookies"},
    "ws-only": {"client-remote-profiles"},
    # agent-client-protocol 0.12.1 answers the agent's requests (the permission request)
    # without Acp-Session-Id, which the RFD requires on "permission responses"
    "sdk": {"client-remote-session-header"},
}


@pytest.mark.parametrize("name", list(REMOTE_FAULTS))
def test_listen_judges_remote_clients(remote_runs: Background[Report], name: str) -> None:
    report = remote_runs.result(name)
    assert failed(report) == REMOTE_FAULTS[name], str(report)
    remote = {r.check.id: r.status for r in report.results if r.check.id.startswith("client-remote-")}
    assert set(remote) == {"client-remote-profiles", "client-remote-cookies", "client-remote-session-header"}
    if name == "ours":
        assert set(remote.values()) == {"passed"}, str(report)
        assert status(report, "client-permission-answered") == "passed"  # judged as over stdio
    if name == "no-cookies":
        assert "without the cookie the server set" in report.result("client-remote-cookies").detail
    if name == "ws-only":
        assert "never connected over Streamable HTTP" in report.result("client-remote-profiles").detail
        assert status(report, "client-initialize-first") == "passed"  # the WebSocket run counts
    if name == "sdk":
        result = report.result("client-remote-session-header")
        assert "Acp-Session-Id None" in result.detail and '"outcome"' in (result.offending or "")


@pytest.fixture
def golden_remote(monkeypatch: pytest.MonkeyPatch) -> None:
    """check-client --listen on the golden agent package (no generation into a cache)."""
    import agent.testing.client_conformance as golden
    import agent.testing.client_remote as remote

    import codegen.check_client

    modules = {codegen.check_client.MODULE: golden, codegen.check_client.REMOTE_MODULE: remote}
    monkeypatch.setattr(codegen.check_client, "load_conformance", lambda *args: modules[args[-1]])


@pytest.mark.usefixtures("golden_remote")
def test_cli_listen(tmp_path: Path) -> None:
    runner = CliRunner()
    argv = ["check-client", "--json", "--timeout", "3", "--idle", "2", "--listen", "127.0.0.1:0"]
    chosen = ["-k", "client-remote or initialize"]  # the remote checks are selectable with --listen
    result = runner.invoke(app, [*argv, *chosen, "--", sys.executable, str(REMOTE_FAULTY), "no-cookies", "{url}"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert [r["id"] for r in report["results"] if r["status"] == "failed"] == ["client-remote-cookies"]
    ids = {r["id"] for r in report["results"]}
    assert {"client-remote-profiles", "client-remote-session-header"} < ids
    assert all(i.startswith("client-remote") or "initialize" in i for i in ids), ids
    argv.append("--")
    no_url = runner.invoke(app, [*argv, sys.executable, "client.py", "{agent}"])
    assert no_url.exit_code == 2 and "{url}" in no_url.output
    bad = runner.invoke(app, ["check-client", "--listen", "nowhere", "--", sys.executable, "c.py", "{url}"])
    assert bad.exit_code == 2 and "HOST:PORT" in bad.output
