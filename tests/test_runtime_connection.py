"""The generated JSON-RPC runtime (connection + dispatch), in process over in-memory pipes.

A raw peer writes JSON lines to a generated agent (or client) and reads what it answers,
so every JSON-RPC rule is checked on the bytes; the typed pair tests run a generated
client against a generated agent.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import agent
import client
import pytest
from agent import types as at
from client import types as ct

T = TypeVar("T")
TIMEOUT = 5.0


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, TIMEOUT)

    return asyncio.run(bounded())


class Pipe:
    """One direction of a byte stream: what is written comes out of `reader`."""

    def __init__(self) -> None:
        self.reader = asyncio.StreamReader()
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("pipe closed")
        self.reader.feed_data(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.reader.feed_eof()


class TestAgent(agent.Agent):
    """Handlers the tests steer; records what it was called with."""

    __test__ = False

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.gate = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def initialize(self, params: at.InitializeRequest) -> at.InitializeResponse:
        self.calls.append(("initialize", params))
        return at.InitializeResponse(protocol_version=1, agent_capabilities=at.AgentCapabilities(), auth_methods=[])

    async def authenticate(self, params: at.AuthenticateRequest) -> at.AuthenticateResponse:
        raise agent.RequestError(-32000, "Authentication required", {"why": "test"})

    async def session_new(self, params: at.NewSessionRequest) -> at.NewSessionResponse:
        if params.cwd == "/boom":
            raise RuntimeError("secret internal detail")
        if params.cwd == "/wait":
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        if params.cwd == "/slow":
            await asyncio.sleep(0.05)
        return at.NewSessionResponse(session_id=f"sess-{len(self.calls)}")

    async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
        self.calls.append(("prompt", params))
        count = int(params.prompt[0].text) if isinstance(params.prompt[0], at.TextContent) else 0
        for i in range(count):
            update = at.SessionUpdateAgentMessageChunk(content=at.TextContent(text=str(i)))
            await self.peer.session_update(at.SessionNotification(session_id=params.session_id, update=update))
        return at.PromptResponse(stop_reason="end_turn")

    async def session_cancel(self, params: at.CancelNotification) -> None:
        self.calls.append(("cancel", params.session_id))

    async def ext_method(self, method: str, params: Any) -> Any:
        return {"method": method, "params": params}

    async def ext_notification(self, method: str, params: Any) -> None:
        self.calls.append((method, params))


class RawPeer:
    """The other end of a generated agent, speaking raw JSON lines."""

    def __init__(self, handler: agent.Agent, **options: Any) -> None:
        self.to_agent = Pipe()
        self.from_agent = Pipe()
        self.task = asyncio.ensure_future(agent.run_agent(handler, self.to_agent.reader, self.from_agent, **options))

    def send(self, message: Any) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.to_agent.write(data)

    async def recv(self) -> Any:
        line = await asyncio.wait_for(self.from_agent.reader.readline(), TIMEOUT)
        assert line, "the agent closed its output"
        return json.loads(line)

    async def call(self, message: Any) -> Any:
        self.send(message)
        return await self.recv()

    async def close(self) -> None:
        self.to_agent.close()
        await asyncio.wait_for(self.task, TIMEOUT)


def raw(body: Callable[[RawPeer, TestAgent], Awaitable[None]], **options: Any) -> TestAgent:
    handler = TestAgent()

    async def scenario() -> None:
        peer = RawPeer(handler, **options)
        await body(peer, handler)
        await peer.close()

    run(scenario())
    return handler


def req(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


INIT = {"protocolVersion": 1, "clientCapabilities": {}}


# -- JSON-RPC errors --------------------------------------------------------------------------
def test_parse_error_has_null_id_and_the_connection_keeps_serving() -> None:
    async def body(peer: RawPeer, _: TestAgent) -> None:
        answer = await peer.call(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        assert answer["id"] is None and answer["error"]["code"] == -32700
        answer = await peer.call(b"\xff\xfe\n")
        assert answer["id"] is None and answer["error"]["code"] == -32700
        answer = await peer.call(req(2, "initialize", INIT))
        assert answer["id"] == 2 and answer["result"]["protocolVersion"] == 1

    raw(body)


def test_blank_lines_are_ignored() -> None:
    async def body(peer: RawPeer, _: TestAgent) -> None:
        peer.send(b"\n  \r\n\n")
        answer = await peer.call(req(1, "initialize", INIT))
        assert answer["id"] == 1 and "result" in answer

    raw(body)


@pytest.mark.parametrize(
    ("message", "expected_id"),
    [
        ([req(1, "initialize", INIT)], None),  # batch
        ("just a string", None),
        ({"id": 3, "method": "initialize", "params": INIT}, 3),  # no "jsonrpc"
        ({"jsonrpc": "1.0", "id": 4, "method": "initialize"}, 4),
        ({"jsonrpc": "2.0", "id": 5, "method": 42}, 5),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "initialize", "params": INIT}, None),  # id not str/int/null
        ({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": "nope"}, 7),
        ({"jsonrpc": "2.0", "id": 8}, 8),  # neither request nor response
    ],
)
def test_invalid_requests_get_32600(message: Any, expected_id: Any) -> None:
    async def body(peer: RawPeer, _: TestAgent) -> None:
        answer = await peer.call(message)
        assert answer["error"]["code"] == -32600, answer
        assert answer["id"] == expected_id
        assert (await peer.call(req(9, "initialize", INIT)))["id"] == 9

    raw(body)


def test_method_not_found_for_requests_unknown_notifications_ignored() -> None:
    async def body(peer: RawPeer, handler: TestAgent) -> None:
        answer = await peer.call(req(1, "session/unknown", {}))
        assert answer["error"]["code"] == -32601
        assert answer["error"]["data"] == {"method": "session/unknown"}
        # Optional methods answer -32601 until implemented.
        answer = await peer.call(req(2, "session/list", {}))
        assert answer["error"]["code"] == -32601
        # A method the *client* handles is not the agent's to answer.
        answer = await peer.call(req(3, "fs/read_text_file", {"sessionId": "s", "path": "/x"}))
        assert answer["error"]["code"] == -32601
        peer.send({"jsonrpc": "2.0", "method": "nobody/listens", "params": {}})
        answer = await peer.call(req(4, "initialize", INIT))
        assert answer["id"] == 4 and "result" in answer

    raw(body)


def test_invalid_params_carry_the_json_path() -> None:
    async def body(peer: RawPeer, handler: TestAgent) -> None:
        answer = await peer.call(req(1, "session/prompt", {"prompt": []}))
        assert answer["error"]["code"] == -32602
        assert answer["error"]["data"]["path"] == "params.sessionId"
        answer = await peer.call(req(2, "session/prompt", {"sessionId": "s", "prompt": [{"type": "text"}]}))
        assert answer["error"]["code"] == -32602
        assert answer["error"]["data"]["path"] == "params.prompt[0].text"
        answer = await peer.call(req(3, "session/prompt", ["positional"]))
        assert answer["error"]["code"] == -32602
        # The handler never saw the bad calls, and the next good one works.
        assert handler.calls == []
        answer = await peer.call(
            req(4, "session/prompt", {"sessionId": "s", "prompt": [{"type": "text", "text": "0"}]})
        )
        assert answer["result"] == {"stopReason": "end_turn"}

    raw(body)


def test_handler_errors(caplog: pytest.LogCaptureFixture) -> None:
    async def body(peer: RawPeer, _: TestAgent) -> None:
        answer = await peer.call(req(1, "authenticate", {"methodId": "x"}))
        assert answer["error"] == {"code": -32000, "message": "Authentication required", "data": {"why": "test"}}
        with caplog.at_level(logging.ERROR):
            answer = await peer.call(req(2, "session/new", {"cwd": "/boom", "mcpServers": []}))
        assert answer["error"] == {"code": -32603, "message": "Internal error"}
        assert "secret internal detail" not in json.dumps(answer)
        assert "secret internal detail" in caplog.text  # logged locally instead

    raw(body)


def test_string_ids_and_concurrent_requests() -> None:
    async def body(peer: RawPeer, _: TestAgent) -> None:
        # The slow one was sent first, the fast one answers first: correlation is by id.
        peer.send(req("a", "session/new", {"cwd": "/slow", "mcpServers": []}))
        peer.send(req("b", "initialize", INIT))
        first, second = await peer.recv(), await peer.recv()
        assert [first["id"], second["id"]] == ["b", "a"]

    raw(body)


def test_duplicate_in_flight_id_is_rejected() -> None:
    async def body(peer: RawPeer, handler: TestAgent) -> None:
        peer.send(req(1, "session/new", {"cwd": "/wait", "mcpServers": []}))
        answer = await peer.call(req(1, "initialize", INIT))
        assert answer["id"] == 1 and answer["error"]["code"] == -32600
        handler.gate.set()
        answer = await peer.recv()
        assert answer["id"] == 1 and "result" in answer

    raw(body)


def test_cancel_request_cancels_the_handler_with_32800() -> None:
    async def body(peer: RawPeer, handler: TestAgent) -> None:
        peer.send(req(7, "session/new", {"cwd": "/wait", "mcpServers": []}))
        await asyncio.sleep(0.01)
        peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}})
        answer = await peer.recv()
        assert answer == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}}
        assert handler.cancelled.is_set()
        # Cancelling something unknown or finished is harmless.
        peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}})
        peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": [1]}})
        assert "result" in await peer.call(req(8, "initialize", INIT))

    raw(body)


def test_extension_methods_reach_the_hooks_with_raw_params() -> None:
    async def body(peer: RawPeer, handler: TestAgent) -> None:
        answer = await peer.call(req(1, "_acme/ping", {"x": [1, 2]}))
        assert answer["result"] == {"method": "_acme/ping", "params": {"x": [1, 2]}}
        peer.send({"jsonrpc": "2.0", "method": "_acme/note", "params": {"y": True}})
        await peer.call(req(2, "initialize", INIT))
        assert ("_acme/note", {"y": True}) in handler.calls

    raw(body)


def test_meta_is_kept_apart_from_params() -> None:
    async def body(peer: RawPeer, handler: TestAgent) -> None:
        params = {"protocolVersion": 1, "clientCapabilities": {}, "_meta": {"trace": "abc"}}
        await peer.call(req(1, "initialize", params))
        decoded = handler.calls[0][1]
        assert decoded.meta == {"trace": "abc"}
        assert decoded.to_dict()["_meta"] == {"trace": "abc"}

    raw(body)


def test_oversize_message_is_refused_and_the_next_one_served() -> None:
    async def body(peer: RawPeer, _: TestAgent) -> None:
        big = json.dumps(req(1, "initialize", {**INIT, "pad": "x" * 5000})).encode() + b"\n"
        answer = await peer.call(big)
        assert answer["id"] == 1 and answer["error"]["code"] == -32600
        assert "4096" in answer["error"]["data"]["details"]
        # Split across writes (the buffer path), too.
        peer.send(big[:3000])
        await asyncio.sleep(0.01)
        answer = await peer.call(big[3000:])
        assert answer["error"]["code"] == -32600
        answer = await peer.call(req(2, "initialize", INIT))
        assert answer["id"] == 2 and "result" in answer

    raw(body, max_message_size=4096)


def test_a_message_split_across_reads() -> None:
    async def body(peer: RawPeer, _: TestAgent) -> None:
        data = json.dumps(req(1, "initialize", INIT)).encode() + b"\n"
        for i in range(0, len(data), 7):
            peer.send(data[i : i + 7])
            await asyncio.sleep(0)
        assert (await peer.recv())["id"] == 1

    raw(body)


def test_last_line_without_newline_is_served_at_eof() -> None:
    async def body(peer: RawPeer, _: TestAgent) -> None:
        peer.send(json.dumps(req(1, "initialize", INIT)).encode())
        peer.to_agent.close()
        assert (await peer.recv())["id"] == 1

    raw(body)


# -- shutdown ---------------------------------------------------------------------------------
def test_at_eof_running_handlers_still_answer() -> None:
    """A peer that closes its writing half still gets the answers to what it sent."""

    async def body(peer: RawPeer, _: TestAgent) -> None:
        peer.send(req(1, "initialize", INIT))
        peer.send(req(2, "session/new", {"cwd": "/slow", "mcpServers": []}))
        peer.send(req(3, "session/prompt", {"sessionId": "s", "prompt": [{"type": "text", "text": "3"}]}))
        peer.to_agent.close()
        await asyncio.wait_for(peer.task, TIMEOUT)
        peer.from_agent.close()
        answers = [json.loads(line) for line in (await peer.from_agent.reader.read()).splitlines()]
        assert sorted(a["id"] for a in answers if "id" in a) == [1, 2, 3]
        assert [a["params"]["update"]["content"]["text"] for a in answers if "method" in a] == ["0", "1", "2"]

    raw(body)


def test_at_eof_handlers_past_the_grace_period_are_cancelled() -> None:
    async def body(peer: RawPeer, handler: TestAgent) -> None:
        peer.send(req(1, "session/new", {"cwd": "/wait", "mcpServers": []}))
        await asyncio.sleep(0.01)
        peer.to_agent.close()
        await asyncio.wait_for(peer.task, 1.0)
        assert handler.cancelled.is_set()

    raw(body, shutdown_grace=0.05)


class RecordingClient(client.Client):
    __test__ = False

    def __init__(self, *, slow: bool = False) -> None:
        self.updates: list[str] = []
        self.slow = slow

    async def session_update(self, params: ct.SessionNotification) -> None:
        if self.slow:
            await asyncio.sleep(0)  # handlers that yield must still see updates in order
        update = params.update
        assert isinstance(update, ct.SessionUpdateAgentMessageChunk) and isinstance(update.content, ct.TextContent)
        self.updates.append(update.content.text)

    async def session_request_permission(self, params: ct.RequestPermissionRequest) -> ct.RequestPermissionResponse:
        return ct.RequestPermissionResponse(outcome=ct.SelectedPermissionOutcome(option_id=params.options[0].option_id))


def pair(
    client_obj: client.Client, agent_obj: agent.Agent, **options: Any
) -> tuple[client.AgentProxy, client.Connection, asyncio.Future[None], asyncio.Future[None]]:
    up, down = Pipe(), Pipe()
    proxy, connection = client.connect(client_obj, down.reader, up, **options)
    serving_client = asyncio.ensure_future(connection.run())
    serving_agent = asyncio.ensure_future(agent.run_agent(agent_obj, up.reader, down, **options))
    return proxy, connection, serving_client, serving_agent


def prompt(session_id: str, text: str) -> ct.PromptRequest:
    return ct.PromptRequest(session_id=session_id, prompt=[ct.TextContent(text=text)])


@pytest.mark.parametrize("slow", [False, True])
def test_typed_pair_updates_arrive_in_order_before_the_response(slow: bool) -> None:
    async def scenario() -> None:
        recorder = RecordingClient(slow=slow)
        proxy, connection, serving_client, serving_agent = pair(recorder, TestAgent())
        init = await proxy.initialize(
            ct.InitializeRequest(protocol_version=1, client_capabilities=ct.ClientCapabilities())
        )
        assert init.protocol_version == 1
        response = await proxy.session_prompt(prompt("s1", "200"))
        assert response.stop_reason == "end_turn"
        assert recorder.updates == [str(i) for i in range(200)]
        await connection.close()
        await asyncio.wait_for(asyncio.gather(serving_client, serving_agent), TIMEOUT)

    run(scenario())


def test_typed_pair_errors_and_cancellation() -> None:
    async def scenario() -> None:
        handler = TestAgent()
        proxy, connection, serving_client, serving_agent = pair(RecordingClient(), handler)
        with pytest.raises(client.RequestError) as info:
            await proxy.authenticate(ct.AuthenticateRequest(method_id="m"))
        assert (info.value.code, info.value.data) == (-32000, {"why": "test"})
        with pytest.raises(client.RequestError) as info:
            await proxy.session_list(ct.ListSessionsRequest())
        assert info.value.code == -32601
        # Cancelling the awaiting task sends $/cancel_request: the agent's handler is cancelled.
        waiting = asyncio.ensure_future(proxy.session_new(ct.NewSessionRequest(cwd="/wait", mcp_servers=[])))
        await asyncio.sleep(0.02)
        waiting.cancel()
        await asyncio.wait_for(handler.cancelled.wait(), TIMEOUT)
        assert await proxy.ext_method("_acme/echo", {"a": 1}) == {"method": "_acme/echo", "params": {"a": 1}}
        await connection.close()
        await asyncio.wait_for(asyncio.gather(serving_client, serving_agent), TIMEOUT)

    run(scenario())


def test_pending_requests_fail_with_connection_closed_at_eof() -> None:
    async def scenario() -> None:
        up, down = Pipe(), Pipe()
        proxy, connection = client.connect(RecordingClient(), down.reader, up)
        serving = asyncio.ensure_future(connection.run())
        call = asyncio.ensure_future(
            proxy.initialize(ct.InitializeRequest(protocol_version=1, client_capabilities=ct.ClientCapabilities()))
        )
        await asyncio.sleep(0.01)
        down.close()  # the agent dies without answering
        with pytest.raises(client.ConnectionClosed):
            await call
        await serving
        with pytest.raises(client.ConnectionClosed):  # after EOF, at once
            await proxy.initialize(
                ct.InitializeRequest(protocol_version=1, client_capabilities=ct.ClientCapabilities())
            )

    run(scenario())


# gc.collect() may sweep up what earlier tests in this process left (hypercorn's, say).
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_send_that_fails_as_the_peer_goes_leaves_no_unretrieved_future() -> None:
    """The peer goes while our request is being written (a remote POST failing as the server
    dies): EOF fails the request's future, then the write raises; the caller gets
    ConnectionClosed, and asyncio reports no "Future exception was never retrieved"."""

    class DyingPipe(Pipe):
        def __init__(self, other: Pipe) -> None:
            super().__init__()
            self.other = other

        async def drain(self) -> None:
            self.other.close()  # the peer's end reaches EOF ...
            await asyncio.sleep(0.05)  # ... and the connection has seen it ...
            raise ConnectionResetError("peer gone")  # ... before the write fails

    async def scenario() -> list[str]:
        reported: list[str] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, context: reported.append(context["message"]))
        down = Pipe()
        proxy, connection = client.connect(RecordingClient(), down.reader, DyingPipe(down))
        serving = asyncio.ensure_future(connection.run())
        with pytest.raises(client.ConnectionClosed):
            await proxy.initialize(ct.InitializeRequest(protocol_version=1), timeout=None)
        await serving
        gc.collect()
        return reported

    assert run(scenario()) == []


def test_proxy_calls_from_inside_a_handler() -> None:
    """An agent handler calling the client while the client's own prompt is pending."""

    class PermissionAgent(TestAgent):
        async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
            response = await self.peer.session_request_permission(
                at.RequestPermissionRequest(
                    session_id=params.session_id,
                    tool_call=at.ToolCallUpdate(tool_call_id="t1"),
                    options=[at.PermissionOption(option_id="yes", name="Yes", kind="allow_once")],
                )
            )
            assert isinstance(response.outcome, at.SelectedPermissionOutcome)
            update = at.SessionUpdateAgentMessageChunk(content=at.TextContent(text=response.outcome.option_id))
            await self.peer.session_update(at.SessionNotification(session_id=params.session_id, update=update))
            return at.PromptResponse(stop_reason="end_turn")

    async def scenario() -> None:
        recorder = RecordingClient()
        proxy, connection, serving_client, serving_agent = pair(recorder, PermissionAgent())
        assert (await proxy.session_prompt(prompt("s", "x"))).stop_reason == "end_turn"
        assert recorder.updates == ["yes"]
        await connection.close()
        await asyncio.wait_for(asyncio.gather(serving_client, serving_agent), TIMEOUT)

    run(scenario())


def test_mcp_message_both_ways_as_request_and_notification() -> None:
    """Unstable `mcp/message` (x-side both): either side calls it, as a request or a notification."""
    from golden_import import load_golden

    ua = load_golden("unstable/agent")
    uc = load_golden("unstable/client")

    class McpAgent(ua.Agent):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            self.seen: list[Any] = []

        async def initialize(self, params: Any) -> Any:
            raise NotImplementedError

        async def authenticate(self, params: Any) -> Any:
            raise NotImplementedError

        async def session_new(self, params: Any) -> Any:
            raise NotImplementedError

        async def session_prompt(self, params: Any) -> Any:
            raise NotImplementedError

        async def session_cancel(self, params: Any) -> None:
            return None

        async def mcp_message(self, params: Any) -> Any:
            self.seen.append(("request", params.method, params.params))
            # Ask the client too, while the client's request is pending: x-side both.
            inner = await self.peer.mcp_message(ua.types.MessageMcpRequest(connection_id="c1", method="ping"))
            return {"pong": inner}

        async def mcp_message_notification(self, params: Any) -> None:
            self.seen.append(("notification", params.method, params.params))

    class McpClient(uc.Client):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            self.seen: list[Any] = []

        async def session_update(self, params: Any) -> None:
            return None

        async def session_request_permission(self, params: Any) -> Any:
            raise NotImplementedError

        async def mcp_message(self, params: Any) -> Any:
            self.seen.append(("request", params.method))
            return None  # any JSON value is a valid MCP result, null included

    async def scenario() -> None:
        up, down = Pipe(), Pipe()
        mcp_agent, mcp_client = McpAgent(), McpClient()
        proxy, connection = uc.connect(mcp_client, down.reader, up)
        serving_client = asyncio.ensure_future(connection.run())
        serving_agent = asyncio.ensure_future(ua.run_agent(mcp_agent, up.reader, down))
        result = await proxy.mcp_message(
            uc.types.MessageMcpRequest(connection_id="c1", method="tools/list", params={"cursor": None})
        )
        assert result == {"pong": None}
        await proxy.mcp_message_notification(
            uc.types.MessageMcpNotification(connection_id="c1", method="notifications/initialized")
        )
        await proxy.mcp_message(uc.types.MessageMcpRequest(connection_id="c1", method="sync"))  # orders the above
        assert mcp_agent.seen[:2] == [
            ("request", "tools/list", {"cursor": None}),
            ("notification", "notifications/initialized", ua.types.UNSET),
        ]
        assert mcp_client.seen == [("request", "ping"), ("request", "ping")]
        await connection.close()
        await asyncio.wait_for(asyncio.gather(serving_client, serving_agent), TIMEOUT)

    run(scenario())


def test_null_result_decodes_as_an_empty_object() -> None:
    """The official SDK answers `"result": null` when a handler returns None."""

    class WritingAgent(TestAgent):
        async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
            written = await self.peer.fs_write_text_file(
                at.WriteTextFileRequest(session_id=params.session_id, path="/x", content="y")
            )
            assert written == at.WriteTextFileResponse()
            return at.PromptResponse(stop_reason="end_turn")

    async def body(peer: RawPeer, _: TestAgent) -> None:
        peer.send(req(1, "session/prompt", {"sessionId": "s", "prompt": []}))
        asked = await peer.recv()
        assert asked["method"] == "fs/write_text_file"
        answer = await peer.call({"jsonrpc": "2.0", "id": asked["id"], "result": None})
        assert answer == {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}

    handler = WritingAgent()

    async def scenario() -> None:
        peer = RawPeer(handler)
        await body(peer, handler)
        await peer.close()

    run(scenario())
