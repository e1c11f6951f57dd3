"""Interop with the official ACP Python SDK (`agent-client-protocol` 0.12.1), per the echo contract.

(a) the SDK's client drives examples/echo_agent.py (generated agent) through every row of
    the contract;
(b) examples/echo_client.py (generated client) runs its script against tests/sdk_echo_agent.py;
(c) generated client <-> generated agent: echo_client.py against echo_agent.py.

Every test spawns processes and is bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import agent as gen_agent  # generated/agent, on sys.path via conftest
import pytest
from agent import types as at
from overlap import Background, selected

if TYPE_CHECKING:  # imported when the module's tests run: see the `sdk` fixture
    import acp
    from acp.connection import StreamEvent
    from acp.schema import (
        AllowedOutcome,
        ClientCapabilities,
        DeniedOutcome,
        EmbeddedResourceContentBlock,
        FileSystemCapabilities,
        Implementation,
        ReadTextFileResponse,
        RequestPermissionResponse,
        TextContentBlock,
        TextResourceContents,
    )

SDK_SCHEMA_NAMES = (
    "AllowedOutcome",
    "ClientCapabilities",
    "DeniedOutcome",
    "EmbeddedResourceContentBlock",
    "FileSystemCapabilities",
    "Implementation",
    "ReadTextFileResponse",
    "RequestPermissionResponse",
    "TextContentBlock",
    "TextResourceContents",
)


@pytest.fixture(scope="module", autouse=True)
def sdk() -> None:
    """Imports the official SDK (`acp`, and the `acp.schema` names above) into this module when
    its tests run, not when it is collected: every xdist worker collects every module, one runs
    these tests, and importing the SDK costs ~1 s of CPU (pydantic builds its models)."""
    import acp
    import acp.schema

    globals().update(acp=acp, **{name: getattr(acp.schema, name) for name in SDK_SCHEMA_NAMES})


ROOT = Path(__file__).resolve().parent.parent
ECHO_AGENT = ROOT / "examples" / "echo_agent.py"
ECHO_CLIENT = ROOT / "examples" / "echo_client.py"
SDK_ECHO_AGENT = Path(__file__).resolve().parent / "sdk_echo_agent.py"

TIMEOUT = 15.0
MODES = [
    {"id": "ask", "name": "Ask", "description": "Request permission before making any changes"},
    {"id": "architect", "name": "Architect", "description": "Design and plan software systems without implementation"},
    {"id": "code", "name": "Code", "description": "Write and modify code with full tool access"},
]

T = TypeVar("T")
Command = Callable[..., list[str]]  # the `agent_command` fixture (conftest.py)


@pytest.fixture(scope="module")
def echo_agent(agent_command: Command) -> list[str]:
    """`python examples/echo_agent.py`."""
    return agent_command(ECHO_AGENT, "echo_agent")


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, TIMEOUT)

    return asyncio.run(bounded())


class SdkClient:
    """An ACP client on the official SDK that records what the agent does."""

    def __init__(self, sandbox: Path, *, permission: str = "first") -> None:
        self.sandbox = sandbox
        self.permission = permission
        self.updates: list[tuple[str, Any]] = []
        self.update_arrived = asyncio.Event()
        self.permission_requests: list[dict[str, Any]] = []
        self.reads: list[dict[str, Any]] = []
        # Every message the agent wrote, raw and in wire order.
        self.wire: list[dict[str, Any]] = []

    def observe(self, event: StreamEvent) -> None:
        if event.direction.value == "incoming":
            self.wire.append(event.message)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.update_arrived.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(
            {
                "sessionId": session_id,
                "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True),
                "options": [o.model_dump(by_alias=True, exclude_none=True) for o in options],
            }
        )
        if self.permission == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=options[0].option_id))

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> ReadTextFileResponse:
        self.reads.append({"sessionId": session_id, "path": path})
        try:
            return ReadTextFileResponse(content=Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise acp.RequestError.resource_not_found(path) from None

    def texts(self, session_id: str, start: int = 0) -> list[str]:
        return [
            u.content.text
            for sid, u in self.updates[start:]
            if sid == session_id and u.session_update == "agent_message_chunk" and u.content.type == "text"
        ]


@asynccontextmanager
async def sdk_session(
    echo_agent: list[str], tmp_path: Path, *, fs: bool = True, permission: str = "first"
) -> AsyncIterator[tuple[Any, SdkClient, str]]:
    """The SDK client connected to the echo agent, initialized, with one session."""
    client = SdkClient(tmp_path, permission=permission)
    async with acp.spawn_agent_process(
        client,
        *echo_agent,
        transport_kwargs={"stderr": None},
        observers=[client.observe],
    ) as (conn, process):
        await conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities(fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs)),
            client_info=Implementation(name="sdk-test-client", version="1"),
        )
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        yield conn, client, session.session_id
    assert process.returncode == 0, "the echo agent must exit cleanly at stdin EOF"


async def raw(conn: Any, method: str, params: Any) -> Any:
    """Send a request as-is (the SDK's typed API would refuse malformed params)."""
    return await conn._conn.send_request(method, params)


async def expect_error(call: Awaitable[Any], code: int) -> Any:
    with pytest.raises(acp.RequestError) as info:
        await call
    assert info.value.code == code, (info.value.code, str(info.value), info.value.data)
    return info.value


# -- (a) the official SDK's client drives the generated echo agent ------------------------------
@pytest.mark.slow
def test_sdk_initialize_answers_protocol_1_for_99(tmp_path: Path, echo_agent: list[str]) -> None:
    async def scenario() -> None:
        client = SdkClient(tmp_path)
        async with acp.spawn_agent_process(
            client, *echo_agent, transport_kwargs={"stderr": None}, observers=[client.observe]
        ) as (conn, _):
            response = await conn.initialize(protocol_version=99, client_capabilities=ClientCapabilities())
            assert response.protocol_version == 1
            assert response.agent_capabilities.load_session is True
            assert response.agent_capabilities.prompt_capabilities.embedded_context is True
            assert response.auth_methods == []
            assert response.agent_info is not None and response.agent_info.name and response.agent_info.version
            wire = next(m["result"] for m in client.wire if m.get("id") == 0)
            assert wire["protocolVersion"] == 1
            assert wire["authMethods"] == []
            assert wire["agentCapabilities"]["loadSession"] is True
            assert wire["agentCapabilities"]["promptCapabilities"]["embeddedContext"] is True
            assert set(wire["agentInfo"]) >= {"name", "version"}

    run(scenario())


@pytest.mark.slow
def test_sdk_session_new_and_set_mode(tmp_path: Path, echo_agent: list[str]) -> None:
    async def scenario() -> None:
        async with sdk_session(echo_agent, tmp_path) as (conn, client, session_id):
            assert session_id
            created = next(m["result"] for m in client.wire if m.get("id") == 1)
            assert created["modes"] == {"currentModeId": "ask", "availableModes": MODES}
            other = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            assert other.session_id != session_id
            await expect_error(conn.new_session(cwd="relative/dir", mcp_servers=[]), -32602)

            assert await raw(conn, "session/set_mode", {"sessionId": session_id, "modeId": "code"}) == {}
            await conn.set_session_mode(session_id=session_id, mode_id="architect")
            await expect_error(conn.set_session_mode(session_id=session_id, mode_id="yolo"), -32602)
            await expect_error(conn.set_session_mode(session_id="sess_nope", mode_id="code"), -32002)

    run(scenario())


@pytest.mark.slow
def test_sdk_prompt_echoes_every_block_unchanged(tmp_path: Path, echo_agent: list[str]) -> None:
    async def scenario() -> None:
        async with sdk_session(echo_agent, tmp_path) as (conn, client, session_id):
            blocks = [
                TextContentBlock(type="text", text="  hello, echo  "),
                EmbeddedResourceContentBlock(
                    type="resource",
                    resource=TextResourceContents(uri="file:///tmp/a.txt", text="embedded", mime_type="text/plain"),
                ),
            ]
            start = len(client.wire)
            response = await conn.prompt(session_id=session_id, prompt=blocks)
            assert response.stop_reason == "end_turn"
            sent = [b.model_dump(by_alias=True, exclude_none=True) for b in blocks]
            turn = client.wire[start:]
            updates = [m["params"] for m in turn if m.get("method") == "session/update"]
            assert [u["update"] for u in updates] == [
                {"sessionUpdate": "agent_message_chunk", "content": block} for block in sent
            ]
            assert all(u["sessionId"] == session_id for u in updates)
            # Every update of the turn is written before the prompt's response.
            assert "result" in turn[-1] and turn[-1]["result"] == {"stopReason": "end_turn"}

    run(scenario())


@pytest.mark.slow
def test_sdk_slow_runs_to_the_end(tmp_path: Path, echo_agent: list[str]) -> None:
    async def scenario() -> None:
        async with sdk_session(echo_agent, tmp_path) as (conn, client, session_id):
            response = await conn.prompt(session_id=session_id, prompt=[TextContentBlock(type="text", text="slow")])
            assert response.stop_reason == "end_turn"
            assert client.texts(session_id) == [f"slow {i}/20\n" for i in range(1, 21)]

    run(scenario())


@pytest.mark.slow
def test_sdk_slow_is_cancelled_and_nothing_follows_the_response(tmp_path: Path, echo_agent: list[str]) -> None:
    async def scenario() -> None:
        async with sdk_session(echo_agent, tmp_path) as (conn, client, session_id):
            turn = asyncio.ensure_future(
                conn.prompt(session_id=session_id, prompt=[TextContentBlock(type="text", text=" slow\n")])
            )
            while len(client.texts(session_id)) < 3:
                client.update_arrived.clear()
                await client.update_arrived.wait()
            await conn.cancel(session_id=session_id)
            response = await turn
            assert response.stop_reason == "cancelled"
            await asyncio.sleep(0.3)  # longer than the 50 ms between chunks
            texts = client.texts(session_id)
            assert 3 <= len(texts) < 20
            assert texts == [f"slow {i}/20\n" for i in range(1, len(texts) + 1)]
            answered = next(i for i, m in enumerate(client.wire) if m.get("result") == {"stopReason": "cancelled"})
            after = [m for m in client.wire[answered + 1 :] if m.get("method") == "session/update"]
            assert after == [], "no session/update may follow the cancelled turn's response"
            # The session still works after a cancelled turn.
            again = await conn.prompt(session_id=session_id, prompt=[TextContentBlock(type="text", text="again")])
            assert again.stop_reason == "end_turn"

    run(scenario())


@pytest.mark.slow
def test_sdk_read_goes_through_fs_read_text_file(tmp_path: Path, echo_agent: list[str]) -> None:
    async def scenario() -> None:
        target = tmp_path / "notes.txt"
        target.write_text("line one\nünïcödé line two\n", encoding="utf-8")
        async with sdk_session(echo_agent, tmp_path) as (conn, client, session_id):
            response = await conn.prompt(
                session_id=session_id, prompt=[TextContentBlock(type="text", text=f"read {target}")]
            )
            assert response.stop_reason == "end_turn"
            assert client.reads == [{"sessionId": session_id, "path": str(target)}]
            assert client.texts(session_id) == ["line one\nünïcödé line two\n"]

            start = len(client.updates)
            missing = tmp_path / "missing.txt"
            response = await conn.prompt(
                session_id=session_id, prompt=[TextContentBlock(type="text", text=f"read {missing}")]
            )
            assert response.stop_reason == "end_turn"
            assert client.texts(session_id, start) == ["read failed: -32002 Resource not found"]

    run(scenario())


@pytest.mark.slow
def test_sdk_read_without_fs_capability(tmp_path: Path, echo_agent: list[str]) -> None:
    async def scenario() -> None:
        async with sdk_session(echo_agent, tmp_path, fs=False) as (conn, client, session_id):
            response = await conn.prompt(
                session_id=session_id, prompt=[TextContentBlock(type="text", text=f"read {tmp_path / 'x.txt'}")]
            )
            assert response.stop_reason == "end_turn"
            assert client.reads == []
            assert client.texts(session_id) == ["read: client does not support fs/read_text_file"]

    run(scenario())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("answer", "expected"), [("first", "permission: selected allow-once"), ("cancel", "permission: cancelled")]
)
@pytest.mark.slow
def test_sdk_permission(tmp_path: Path, echo_agent: list[str], answer: str, expected: str) -> None:
    async def scenario() -> None:
        async with sdk_session(echo_agent, tmp_path, permission=answer) as (conn, client, session_id):
            response = await conn.prompt(
                session_id=session_id, prompt=[TextContentBlock(type="text", text="permission")]
            )
            assert response.stop_reason == "end_turn"
            assert client.permission_requests == [
                {
                    "sessionId": session_id,
                    "toolCall": {
                        "toolCallId": "call_permission_1",
                        "title": "Echo permission check",
                        "kind": "other",
                        "status": "pending",
                    },
                    "options": [
                        {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                        {"optionId": "reject-once", "name": "Reject once", "kind": "reject_once"},
                    ],
                }
            ]
            assert client.texts(session_id) == [expected]

    run(scenario())


@pytest.mark.slow
def test_sdk_load_replays_the_history(tmp_path: Path, echo_agent: list[str]) -> None:
    async def scenario() -> None:
        target = tmp_path / "f.txt"
        target.write_text("content", encoding="utf-8")
        async with sdk_session(echo_agent, tmp_path) as (conn, client, session_id):
            prompts = [["hello", "second block"], [f"read {target}"], ["permission"]]
            expected: list[dict[str, Any]] = []
            for texts in prompts:
                blocks = [TextContentBlock(type="text", text=t) for t in texts]
                start = len(client.wire)
                await conn.prompt(session_id=session_id, prompt=blocks)
                expected += [
                    {"sessionUpdate": "user_message_chunk", "content": b.model_dump(exclude_none=True)} for b in blocks
                ]
                expected += [m["params"]["update"] for m in client.wire[start:] if m.get("method") == "session/update"]
            assert len(expected) == 3 + 3 + 2

            start = len(client.wire)
            await conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
            turn = client.wire[start:]
            assert [m["params"]["update"] for m in turn if m.get("method") == "session/update"] == expected
            assert all(m["params"]["sessionId"] == session_id for m in turn if m.get("method") == "session/update")
            assert "result" in turn[-1], "the replay comes before the session/load response"

            await expect_error(conn.load_session(cwd=str(tmp_path), session_id="sess_unknown", mcp_servers=[]), -32002)

    run(scenario())


@pytest.mark.slow
def test_sdk_unknown_method_and_invalid_params_then_recovery(tmp_path: Path, echo_agent: list[str]) -> None:
    async def scenario() -> None:
        async with sdk_session(echo_agent, tmp_path) as (conn, client, session_id):
            await expect_error(raw(conn, "session/fly", {"sessionId": session_id}), -32601)
            await conn._conn.send_notification("session/whatever", {"x": 1})  # ignored

            error = await expect_error(
                raw(conn, "session/prompt", {"prompt": [{"type": "text", "text": "hi"}]}), -32602
            )
            assert error.data["path"] == "params.sessionId"
            error = await expect_error(
                raw(conn, "session/prompt", {"sessionId": session_id, "prompt": [{"type": 5}]}), -32602
            )
            assert error.data["path"].startswith("params.prompt[0]")
            await expect_error(raw(conn, "session/set_mode", {"modeId": "code"}), -32602)
            await expect_error(raw(conn, "session/prompt", {"sessionId": "sess_unknown", "prompt": []}), -32002)

            # ... and the agent keeps working.
            response = await conn.prompt(
                session_id=session_id, prompt=[TextContentBlock(type="text", text="still here")]
            )
            assert response.stop_reason == "end_turn"
            assert client.texts(session_id) == ["still here"]

    run(scenario())


@pytest.mark.slow
def test_echo_agent_on_a_raw_pipe(tmp_path: Path, echo_agent: list[str]) -> None:
    """Bytes in, bytes out: only JSON-RPC on stdout, every request answered, exit 0 at EOF."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 99}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 3, "method": "nope/nope", "params": {}},
        {"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": "rel", "mcpServers": []}},
    ]
    data = "\n".join(json.dumps(m) for m in lines) + "\n{not json\n"
    result = subprocess.run(echo_agent, input=data.encode(), capture_output=True, timeout=TIMEOUT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    out = [json.loads(line) for line in result.stdout.decode().splitlines()]
    by_id = {m["id"]: m for m in out}
    assert by_id[1]["result"]["protocolVersion"] == 1
    assert by_id[2]["result"]["sessionId"]
    assert by_id[3]["error"]["code"] == -32601
    assert by_id[4]["error"]["code"] == -32602
    assert by_id[None]["error"]["code"] == -32700
    assert len(out) == 5


# -- in process, over OS pipes: behaviours the echo contract does not reach ----------------------
async def os_pipe() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Both ends of an OS pipe as asyncio streams (the SDK insists on these exact classes)."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb"))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb"))
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


class WritingAgent(gen_agent.Agent):
    """A generated agent whose prompt writes a file through the client."""

    async def initialize(self, params: at.InitializeRequest) -> at.InitializeResponse:
        return at.InitializeResponse(protocol_version=1, agent_capabilities=at.AgentCapabilities(), auth_methods=[])

    async def authenticate(self, params: at.AuthenticateRequest) -> at.AuthenticateResponse:
        return at.AuthenticateResponse()

    async def session_new(self, params: at.NewSessionRequest) -> at.NewSessionResponse:
        return at.NewSessionResponse(session_id="sess_w")

    async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
        written = await self.peer.fs_write_text_file(
            at.WriteTextFileRequest(session_id=params.session_id, path="/virtual/out.txt", content="data")
        )
        assert isinstance(written, at.WriteTextFileResponse)
        update = at.SessionUpdateAgentMessageChunk(content=at.TextContent(text="wrote"))
        await self.peer.session_update(at.SessionNotification(session_id=params.session_id, update=update))
        return at.PromptResponse(stop_reason="end_turn")

    async def session_cancel(self, params: at.CancelNotification) -> None:
        return None


def test_sdk_client_answering_null_for_an_empty_result() -> None:
    """The SDK answers `"result": null` when a handler returns None (fs/write_text_file)."""

    class NullWriter(SdkClient):
        writes: list[tuple[str, str]]

        async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> None:
            self.writes.append((path, content))
            return None

    async def scenario() -> None:
        to_agent_r, to_agent_w = await os_pipe()
        from_agent_r, from_agent_w = await os_pipe()
        client = NullWriter(Path("/virtual"))
        client.writes = []
        serving = asyncio.ensure_future(gen_agent.run_agent(WritingAgent(), to_agent_r, from_agent_w))
        conn = acp.connect_to_agent(client, to_agent_w, from_agent_r, observers=[client.observe])
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        response = await conn.prompt(session_id="sess_w", prompt=[TextContentBlock(type="text", text="go")])
        assert response.stop_reason == "end_turn"
        assert client.writes == [("/virtual/out.txt", "data")]
        assert client.texts("sess_w") == ["wrote"]
        await conn.close()
        to_agent_w.close()
        await serving

    run(scenario())


# -- (b) and (c): the generated echo client against both agents ---------------------------------
@pytest.fixture(scope="module")
def echo_client(agent_command: Command) -> list[str]:
    """`python examples/echo_client.py` (it takes the agent's command line as arguments)."""
    return agent_command(ECHO_CLIENT, "echo_client")


@pytest.fixture(scope="module")
def patched_agents(tmp_path_factory: pytest.TempPathFactory, agent_command: Command) -> Callable[[str, str], list[str]]:
    """`patched_agents(name, patch)`: the command of an echo agent patched by `patch` (a line of
    Python run after `import echo_agent`), a script in one directory whose server has imported
    echo_agent (through `_echo_agent_path`, which puts examples/ on sys.path as the scripts do)."""
    directory = tmp_path_factory.mktemp("patched_agents")
    path_line = f"sys.path.insert(0, {str(ECHO_AGENT.parent)!r})\n"
    (directory / "_echo_agent_path.py").write_text(f"import sys\n{path_line}import echo_agent\n", encoding="utf-8")

    def command(name: str, patch: str) -> list[str]:
        agent = directory / f"{name}.py"
        agent.write_text(
            f"import sys\nsys.argv = [{str(ECHO_AGENT)!r}]\n{path_line}import echo_agent\n{patch}\necho_agent.main()\n",
            encoding="utf-8",
        )
        return agent_command(agent, "_echo_agent_path")

    return command


def run_echo_client(echo_client: list[str], *agent: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*echo_client, *agent], capture_output=True, text=True, timeout=TIMEOUT * 2)


SCRIPT_AGENTS = {
    "generated-client-vs-sdk-agent": (SDK_ECHO_AGENT, ("sdk_echo_agent",)),
    "generated-client-vs-generated-agent": (ECHO_AGENT, ("echo_agent",)),
}
MODE_SWITCH_CASES = [
    # The agent does not know the `code` mode: set_mode fails, the prompt in it is not run.
    (
        "echo_agent.EchoAgent.session_set_mode = lambda self, params: super(echo_agent.EchoAgent, self)"
        ".session_set_mode(type(params)(session_id=params.session_id, mode_id='unknown-' + params.mode_id))",
        ["session/set_mode", "prompt in code mode"],
    ),
    # The agent answers set_mode but does not switch: session/load reports the old mode.
    ("echo_agent.Session.mode = property(lambda self: 'ask', lambda self, value: None)", ["session/load"]),
]
ClientRuns = Background[subprocess.CompletedProcess[str]]
CLIENT_TESTS = (
    "test_echo_client_script_passes",
    "test_echo_client_reports_failures",
    "test_echo_client_checks_the_mode_switch",
)


@pytest.fixture(scope="module", autouse=True)
def client_runs(request: pytest.FixtureRequest) -> Iterator[ClientRuns]:
    """The echo client's runs (each a process talking to its agent, a second or so, mostly
    waiting: the slow turn and its cancel, start-ups), started together when the module starts,
    so that they overlap each other and the SDK tests above; each test waits for its own
    `run_echo_client` call. Only when an echo-client test is selected."""
    runs: ClientRuns = Background("echo-client", workers=8)
    if {item.originalname for item in selected(request)} & set(CLIENT_TESTS):
        echo_client: list[str] = request.getfixturevalue("echo_client")
        agent_command: Command = request.getfixturevalue("agent_command")
        patched_agents: Callable[[str, str], list[str]] = request.getfixturevalue("patched_agents")

        def start(key: str, agent: list[str]) -> None:
            runs.start(key, partial(run_echo_client, echo_client, *agent))

        for case, (agent, modules) in SCRIPT_AGENTS.items():  # the longest first: the SDK agent's
            start(case, agent_command(agent, *modules))
        # slow ends before the client can cancel it
        start("plain-agent", patched_agents("plain_agent", "echo_agent.SLOW_CHUNKS = 2"))
        for patch, failed in MODE_SWITCH_CASES:
            start(patch, patched_agents(f"modeless_agent_{len(failed)}", patch))  # one script per case
    yield runs
    runs.close()


@pytest.mark.slow
@pytest.mark.parametrize("case", list(SCRIPT_AGENTS))
def test_echo_client_script_passes(case: str, client_runs: ClientRuns) -> None:
    result = client_runs.result(case)  # run_echo_client(echo_client, *agent_command(*SCRIPT_AGENTS[case]...))
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines[-1] == "9 passed, 0 failed", "\n".join(lines)
    steps = [line.split(":")[0] for line in lines[:-1]]
    assert steps == [
        "ok   initialize",
        "ok   session/new",
        "ok   prompt hello",
        "ok   prompt read",
        "ok   prompt permission",
        "ok   prompt slow + cancel",
        "ok   session/set_mode",
        "ok   prompt in code mode",
        "ok   session/load",
    ]


@pytest.mark.slow
def test_echo_client_reports_failures(client_runs: ClientRuns) -> None:
    """Against an agent that only echoes, the script fails the steps it must and says so."""
    # slow ends before the client can cancel it: run_echo_client(echo_client, *patched_agents("plain_agent", ...))
    result = client_runs.result("plain-agent")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "8 passed, 1 failed", result.stdout
    assert any(line.startswith("FAIL prompt slow + cancel") for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize(("patch", "failed"), MODE_SWITCH_CASES, ids=["unknown-mode", "mode-not-kept"])
def test_echo_client_checks_the_mode_switch(patch: str, failed: list[str], client_runs: ClientRuns) -> None:
    # run_echo_client(echo_client, *patched_agents(f"modeless_agent_{len(failed)}", patch))
    result = client_runs.result(patch)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0][len("FAIL ") :] for line in lines if line.startswith("FAIL")] == failed, result.stdout
    assert lines[-1] == f"{9 - len(failed)} passed, {len(failed)} failed", result.stdout
