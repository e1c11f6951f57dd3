"""The generated agent's `asgi_app`, driven in-process through ASGI messages (no server, no
sockets): bad requests on Streamable HTTP, stream routing, and the faults of issue 21 —
a client gone mid-turn (the turn is cancelled, no task or connection state left), a client
that stops reading (the server's buffer stays bounded and the connection is closed), and
half-open / abandoned connections (the idle timeout). Real-server faults (garbage on the
socket) are in test_remote_interop.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import agent
import pytest
from agent import types as at

T = TypeVar("T")
TIMEOUT = 10.0
CID = "acp-connection-id"


def run(coro: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro(), TIMEOUT)

    return asyncio.run(bounded())


class Chatty(agent.Agent):
    """A prompt sends `count` updates of `size` characters (prompt text "COUNT SIZE"), or
    waits forever ("hang"); cancellation of a turn is recorded."""

    cancelled: list[str] = []

    async def initialize(self, params: at.InitializeRequest) -> at.InitializeResponse:
        return at.InitializeResponse(protocol_version=1)

    async def authenticate(self, params: at.AuthenticateRequest) -> at.AuthenticateResponse:
        return at.AuthenticateResponse()

    async def session_new(self, params: at.NewSessionRequest) -> at.NewSessionResponse:
        return at.NewSessionResponse(session_id="s1")

    async def session_cancel(self, params: at.CancelNotification) -> None:
        return None

    async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
        block = params.prompt[0]
        text = block.text if isinstance(block, at.TextContent) else ""
        try:
            if text == "hang":
                await asyncio.Event().wait()
            count, size = (int(word) for word in text.split())
            for _ in range(count):
                chunk = at.SessionUpdateAgentMessageChunk(content=at.TextContent(text="x" * size))
                await self.peer.session_update(session_id=params.session_id, update=chunk)
        except asyncio.CancelledError:
            Chatty.cancelled.append(params.session_id)
            raise
        return at.PromptResponse(stop_reason="end_turn")


class Call:
    """One ASGI call of the app: feed `receive`, read what it sent; `blocked` holds `send`."""

    def __init__(self, app: agent.AsgiApp, scope: dict[str, Any]) -> None:
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.blocked = asyncio.Event()
        self.blocked.set()
        self.task = asyncio.ensure_future(app(scope, self.incoming.get, self._send))

    async def _send(self, message: dict[str, Any]) -> None:
        await self.blocked.wait()
        await self.sent.put(message)

    async def next(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.sent.get(), TIMEOUT)

    async def response(self) -> tuple[int, dict[str, str], bytes]:
        start = await self.next()
        body = await self.next()
        headers = {k.decode(): v.decode() for k, v in start["headers"]}
        return start["status"], headers, body["body"]


def http(method: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    raw = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    return {"type": "http", "method": method, "path": "/acp", "headers": raw}


async def request(
    app: agent.AsgiApp, method: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    call = Call(app, http(method, headers))
    call.incoming.put_nowait({"type": "http.request", "body": body, "more_body": False})
    result = await call.response()
    await asyncio.wait_for(call.task, TIMEOUT)
    return result


def rpc(msg_id: int | None, method: str, params: dict[str, Any]) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if msg_id is not None:
        message["id"] = msg_id
    return json.dumps(message).encode()


JSON = {"content-type": "application/json"}


async def initialized(app: agent.AsgiApp) -> str:
    status, headers, body = await request(app, "POST", rpc(0, "initialize", {"protocolVersion": 1}), JSON)
    assert status == 200 and json.loads(body)["result"]["protocolVersion"] == 1, body
    return headers[CID]


def error_of(body: bytes) -> tuple[Any, int]:
    message = json.loads(body)
    assert message["jsonrpc"] == "2.0"
    return message["id"], message["error"]["code"]


def test_bad_requests_get_a_status_and_a_json_rpc_error() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty, max_message_size=1000)
        cid = await initialized(app)
        conn = {**JSON, CID: cid}
        prompt = rpc(5, "session/prompt", {"sessionId": "s1", "prompt": []})
        cases: list[tuple[str, bytes, dict[str, str], int, Any, int]] = [
            ("POST", prompt, {**JSON, CID: "nope"}, 404, 5, -32600),  # unknown connection
            ("POST", prompt, JSON, 400, 5, -32600),  # no connection id (not initialize)
            ("POST", prompt, conn, 400, 5, -32600),  # session-scoped without Acp-Session-Id
            ("POST", prompt, {**conn, "acp-session-id": "other"}, 400, 5, -32600),  # mismatch
            ("POST", b"{not json", conn, 400, None, -32700),
            ("POST", prompt, {"content-type": "text/plain", CID: cid}, 415, None, -32600),
            ("POST", b'{"id": 7, "method": "x", "params": "' + b"a" * 2000 + b'"}', conn, 413, 7, -32600),
            ("POST", b"[" + prompt + b"]", conn, 501, None, -32600),
            ("POST", b"42", conn, 400, None, -32600),
            ("GET", b"", {CID: cid}, 406, None, -32600),  # no Accept
            ("GET", b"", {CID: cid, "accept": "*/*"}, 406, None, -32600),
            ("GET", b"", {"accept": "text/event-stream"}, 400, None, -32600),
            ("GET", b"", {CID: "nope", "accept": "text/event-stream"}, 404, None, -32600),
            ("DELETE", b"", {}, 400, None, -32600),
            ("DELETE", b"", {CID: "nope"}, 404, None, -32600),
            ("PUT", b"", conn, 405, None, -32600),
        ]
        for method, body, headers, status, msg_id, code in cases:
            got, answer_headers, answer = await request(app, method, body, headers)
            assert (got, *error_of(answer)) == (status, msg_id, code), (method, headers, answer)
            assert answer_headers["content-type"] == "application/json"
        assert (await request(app, "DELETE", b"", {CID: cid}))[0] == 202
        assert app.connections == 0

    run(main)


async def sse_lines(call: Call, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while len(out) < count:
        body = (await call.next())["body"]
        if body.startswith(b"data: "):
            out.append(json.loads(body[6:]))
    return out


def stream(app: agent.AsgiApp, cid: str, session: str | None = None) -> Call:
    headers = {CID: cid, "accept": "text/event-stream"}
    if session is not None:
        headers["acp-session-id"] = session
    call = Call(app, http("GET", headers))
    call.incoming.put_nowait({"type": "http.request", "body": b"", "more_body": False})
    return call


def test_http_routing_connection_and_session_streams() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty)
        before = tasks_now()
        cid = await initialized(app)
        main_stream = stream(app, cid)
        assert (await main_stream.next())["status"] == 200
        conn = {**JSON, CID: cid}
        assert (await request(app, "POST", rpc(1, "session/new", {"cwd": "/", "mcpServers": []}), conn))[0] == 202
        [answer] = await sse_lines(main_stream, 1)
        assert answer == {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}}
        # Before the client opens the session's stream, its messages go on the connection's.
        prompt = rpc(2, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "1 3"}]})
        assert (await request(app, "POST", prompt, {**conn, "acp-session-id": "s1"}))[0] == 202
        update, done = await sse_lines(main_stream, 2)
        assert update["method"] == "session/update" and done["id"] == 2
        session_stream = stream(app, cid, "s1")
        assert (await session_stream.next())["status"] == 200
        prompt = rpc(3, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "2 3"}]})
        assert (await request(app, "POST", prompt, {**conn, "acp-session-id": "s1"}))[0] == 202
        lines = await sse_lines(session_stream, 3)
        assert [m.get("method") for m in lines] == ["session/update", "session/update", None]
        assert lines[2]["id"] == 3 and main_stream.sent.empty()
        # session/load answers on the connection stream, even with the session header.
        load = rpc(4, "session/load", {"sessionId": "s1", "cwd": "/", "mcpServers": []})
        assert (await request(app, "POST", load, {**conn, "acp-session-id": "s1"}))[0] == 202
        [answer] = await sse_lines(main_stream, 1)
        assert answer["id"] == 4 and answer["error"]["code"] == -32601  # Chatty has no session/load
        assert (await request(app, "DELETE", b"", {CID: cid}))[0] == 202
        for call in (main_stream, session_stream):
            assert (await call.next()) == {"type": "http.response.body", "body": b"", "more_body": False}
            await asyncio.wait_for(call.task, TIMEOUT)
        assert app.connections == 0
        await asyncio.sleep(0)
        assert tasks_now() == before, tasks_now() - before

    run(main)


def websocket(app: agent.AsgiApp) -> Call:
    call = Call(app, {"type": "websocket", "path": "/acp", "headers": []})
    call.incoming.put_nowait({"type": "websocket.connect"})
    return call


def frame(msg_id: int | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"type": "websocket.receive", "text": rpc(msg_id, method, params).decode()}


async def ws_answer(call: Call) -> dict[str, Any]:
    message = await call.next()
    assert message["type"] == "websocket.send", message
    answer: dict[str, Any] = json.loads(message["text"])
    return answer


async def opened(app: agent.AsgiApp) -> Call:
    call = websocket(app)
    accept = await call.next()
    assert accept["type"] == "websocket.accept" and dict(accept["headers"])[b"acp-connection-id"]
    call.incoming.put_nowait(frame(0, "initialize", {"protocolVersion": 1}))
    assert (await ws_answer(call))["result"]["protocolVersion"] == 1
    return call


def tasks_now() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if not t.done()} - {asyncio.current_task()}  # type: ignore[operator]


def test_websocket_disconnect_mid_turn_cancels_it_and_leaves_nothing() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty)
        before = tasks_now()
        Chatty.cancelled.clear()
        call = await opened(app)
        call.incoming.put_nowait(frame(1, "session/new", {"cwd": "/", "mcpServers": []}))
        assert (await ws_answer(call))["result"] == {"sessionId": "s1"}
        call.incoming.put_nowait(
            frame(2, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "hang"}]})
        )
        await asyncio.sleep(0.05)
        assert app.connections == 1 and len(tasks_now()) > len(before)
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1006})
        await asyncio.wait_for(call.task, TIMEOUT)
        assert Chatty.cancelled == ["s1"]
        assert app.connections == 0 and not app.websockets
        await asyncio.sleep(0)
        assert tasks_now() == before, tasks_now() - before

    run(main)


def test_websocket_garbage_and_oversize_frames_are_answered_and_the_socket_keeps_serving() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty, max_message_size=1024 * 1024)
        call = await opened(app)
        call.incoming.put_nowait({"type": "websocket.receive", "text": "\x00garbage" * (10 * 1024 * 1024 // 8)})
        assert (await ws_answer(call))["error"]["code"] == -32600  # oversize, not an object: id null
        call.incoming.put_nowait({"type": "websocket.receive", "text": "not json"})
        assert (await ws_answer(call))["error"]["code"] == -32700
        call.incoming.put_nowait({"type": "websocket.receive", "bytes": b"binary frames are ignored"})
        pretty = json.dumps(
            {"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}, indent=2
        )
        call.incoming.put_nowait({"type": "websocket.receive", "text": pretty})
        assert (await ws_answer(call)) == {"jsonrpc": "2.0", "id": 9, "result": {"sessionId": "s1"}}
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(call.task, TIMEOUT)

    run(main)


def test_a_client_that_stops_reading_holds_the_server_to_its_send_buffer() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty, send_buffer=64 * 1024, idle_timeout=0.4)
        call = await opened(app)
        call.incoming.put_nowait(frame(1, "session/new", {"cwd": "/", "mcpServers": []}))
        await ws_answer(call)
        call.blocked.clear()  # the client stops reading: every send() hangs
        text = "1000 10000"  # 10 MB of updates
        call.incoming.put_nowait(
            frame(2, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": text}]})
        )
        await asyncio.sleep(0.2)
        [link] = app.websockets.values()
        assert 0 < link.outbox.size <= 64 * 1024 + 2 * 10100, link.outbox.size
        # Nothing moves: the idle timeout closes the stalled connection and cancels the turn.
        await asyncio.wait_for(call.task, TIMEOUT)
        assert app.connections == 0 and Chatty.cancelled[-1:] == ["s1"]

    Chatty.cancelled.clear()
    run(main)


def test_idle_timeout_closes_silent_websockets_and_abandoned_http_connections() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty, idle_timeout=0.3)
        call = await opened(app)
        await initialized(app)  # a Streamable HTTP client that never comes back
        assert app.connections == 2
        close = await call.next()
        assert close == {"type": "websocket.close", "code": 1001}
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1001})
        await asyncio.wait_for(call.task, TIMEOUT)
        for _ in range(50):
            if app.connections == 0:
                break
            await asyncio.sleep(0.05)
        assert app.connections == 0
        await app.aclose()

    run(main)


def test_an_idle_websocket_holds_two_tasks_of_ours_no_timer_and_no_table_it_used() -> None:
    """What each connection costs the server (the goal: RSS per connection at most half the SDK's):
    beside the server's own task, an initialized WebSocket holds two tasks (its reader and its
    connection: the pump runs in the server's task), its `initialize_timeout` timer is cancelled
    by the first message, the tables a request used are emptied to nothing (dicts cleared), and
    the notification queue is only made with the first notification."""

    async def main() -> None:
        app = agent.asgi_app(Chatty)
        loop = asyncio.get_running_loop()
        timers: list[tuple[str, asyncio.TimerHandle]] = []
        call_later = loop.call_later

        def recording(delay: float, callback: Callable[..., object], *args: Any) -> asyncio.TimerHandle:
            handle = call_later(delay, callback, *args)
            timers.append((getattr(callback, "__name__", ""), handle))
            return handle

        loop.call_later = recording  # type: ignore[method-assign]
        before = tasks_now()
        calls = [await opened(app) for _ in range(3)]
        for call in calls:
            call.incoming.put_nowait(frame(1, "session/new", {"cwd": "/", "mcpServers": []}))
            assert (await ws_answer(call))["result"] == {"sessionId": "s1"}
        await asyncio.sleep(0.01)
        ours = {task for task in tasks_now() - before if task.get_coro().__qualname__ != "AsgiApp._reap"}
        assert len(ours) == 3 * len(calls)  # each: the server's, its reader, its connection
        unspoken = [handle for name, handle in timers if name == "_unspoken"]
        assert len(unspoken) == len(calls) and all(handle.cancelled() for handle in unspoken)
        empty = sys.getsizeof({})
        for link in app.websockets.values():
            conn = link.connection
            tables: list[Any] = [conn._inflight, conn._started, conn._pending, conn._background]
            tables.append(conn._cancelled_by_peer)
            if conn._slots is not None:
                tables += [conn._slots._holders, conn._slots._leases, conn._slots._away]
            assert [sys.getsizeof(table) for table in tables] == [empty] * len(tables)
            assert conn._notifications.maxlen == 0  # the shared empty one: no notification yet
        calls[0].incoming.put_nowait(frame(None, "session/cancel", {"sessionId": "s1"}))
        await asyncio.sleep(0.01)
        queues = [link.connection._notifications.maxlen for link in app.websockets.values()]
        assert queues.count(None) == 1 and queues.count(0) == 2  # one connection made its own
        for call in calls:
            call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(asyncio.gather(*(call.task for call in calls)), TIMEOUT)
        await asyncio.sleep(0)
        assert app.connections == 0 and tasks_now() == before
        await app.aclose()

    run(main)


def test_the_server_cancelling_a_websocket_task_ends_it_cancelled_and_closed() -> None:
    """The pump runs in the server's task and `stop` cancels it out of a stuck send: a
    cancellation from the server itself (its shutdown) still ends that task as cancelled, with
    the connection closed and nothing left running."""

    async def main() -> None:
        app = agent.asgi_app(Chatty)
        before = tasks_now()
        call = await opened(app)
        call.incoming.put_nowait(frame(1, "session/new", {"cwd": "/", "mcpServers": []}))
        await ws_answer(call)
        call.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(call.task, TIMEOUT)
        assert (await call.next()) == {"type": "websocket.close", "code": 1001}
        await asyncio.sleep(0)
        assert app.connections == 0 and tasks_now() == before
        await app.aclose()

    run(main)


def test_max_connections_refuses_the_next_one() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty, max_connections=1)
        first = await opened(app)
        first.incoming.put_nowait(frame(1, "x/unknown", {}))  # in use: never evicted for room
        assert (await ws_answer(first))["error"]["code"] == -32601
        status, headers, body = await request(app, "POST", rpc(0, "initialize", {"protocolVersion": 1}), JSON)
        assert (status, *error_of(body)) == (503, 0, -32000) and headers["retry-after"]
        second = websocket(app)
        assert (await second.next())["type"] == "websocket.accept"
        reason = "too many connections (max_connections)"
        assert (await second.next()) == {"type": "websocket.close", "code": 1013, "reason": reason}
        first.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(asyncio.gather(first.task, second.task), TIMEOUT)
        await app.aclose()

    run(main)


@pytest.mark.slow
def test_the_agent_package_imports_and_serves_without_optional_libraries() -> None:
    """`asgi_app` needs neither websockets nor httpx (nor uvicorn): the package is stdlib-only."""
    import subprocess

    code = (
        "import sys\n"
        "for name in ('websockets', 'httpx', 'uvicorn', 'hypercorn', 'h2', 'orjson'): sys.modules[name] = None\n"
        "import agent, agent.remote\n"
        "assert callable(agent.asgi_app(lambda: None))\n"
        "print('ok')\n"
    )
    from pathlib import Path

    generated = Path(__file__).resolve().parent.parent / "generated"
    result = subprocess.run([sys.executable, "-c", code], cwd=generated, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr


@pytest.mark.parametrize("path", ["", "acp"])
def test_a_path_must_be_absolute(path: str) -> None:
    with pytest.raises(ValueError, match="path must start with"):
        agent.asgi_app(Chatty, path=path)


def test_set_cookie_from_a_wrapping_middleware_passes_through() -> None:
    """An affinity cookie added by a middleware (or a balancer) reaches every answer."""
    cookie = (b"set-cookie", b"SRV=backend-1; Path=/")

    def with_cookie(app: agent.AsgiApp) -> Any:
        async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
            async def send_with_cookie(message: dict[str, Any]) -> None:
                if message["type"] in ("http.response.start", "websocket.accept"):
                    message = {**message, "headers": [*message.get("headers", []), cookie]}
                await send(message)

            await app(scope, receive, send_with_cookie)

        return wrapped

    async def main() -> None:
        inner = agent.asgi_app(Chatty)
        app: Any = with_cookie(inner)
        status, headers, body = await request(app, "POST", rpc(0, "initialize", {"protocolVersion": 1}), JSON)
        assert status == 200 and headers["set-cookie"] == "SRV=backend-1; Path=/" and headers[CID]
        new = rpc(1, "session/new", {"cwd": "/", "mcpServers": []})
        status, headers, _ = await request(app, "POST", new, {**JSON, CID: headers[CID]})
        assert status == 202 and headers["set-cookie"].startswith("SRV=")
        call = Call(app, {"type": "websocket", "path": "/acp", "headers": []})
        call.incoming.put_nowait({"type": "websocket.connect"})
        accept = await call.next()
        assert cookie in accept["headers"] and any(k == b"acp-connection-id" for k, _ in accept["headers"])
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(call.task, TIMEOUT)
        await inner.aclose()
        assert inner.connections == 0

    run(main)


def test_http_reconnect_as_the_rfd_draws_it() -> None:
    """A new connection opens the session's stream first (a session it has not seen), then
    POSTs session/load with Acp-Session-Id: the replayed history comes on the session stream,
    the session/load answer on the connection stream; the echo agent keeps its sessions in a
    store shared by every connection's agent."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "echo_agent.py"
    spec = importlib.util.spec_from_file_location("echo_agent_for_remote", path)
    assert spec is not None and spec.loader is not None
    echo = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = echo  # its dataclasses look their module up
    spec.loader.exec_module(echo)

    async def main() -> None:
        from agent.session_store import MemoryStore

        store = MemoryStore()
        app = agent.asgi_app(lambda: echo.EchoAgent(store))
        cid = await initialized(app)
        conn = {**JSON, CID: cid}
        main_stream = stream(app, cid)
        assert (await main_stream.next())["status"] == 200
        await request(app, "POST", rpc(1, "session/new", {"cwd": "/", "mcpServers": []}), conn)
        [answer] = await sse_lines(main_stream, 1)
        sid = answer["result"]["sessionId"]
        prompt = rpc(2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        await request(app, "POST", prompt, {**conn, "acp-session-id": sid})
        await sse_lines(main_stream, 2)  # the echo and the answer (no session stream yet)
        assert (await request(app, "DELETE", b"", {CID: cid}))[0] == 202

        cid = await initialized(app)
        conn = {**JSON, CID: cid}
        main_stream, session_stream = stream(app, cid), stream(app, cid, sid)
        assert (await main_stream.next())["status"] == 200 and (await session_stream.next())["status"] == 200
        load = rpc(1, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        assert (await request(app, "POST", load, {**conn, "acp-session-id": sid}))[0] == 202
        replay = await sse_lines(session_stream, 2)
        kinds = [m["params"]["update"]["sessionUpdate"] for m in replay]
        assert kinds == ["user_message_chunk", "agent_message_chunk"]
        [answer] = await sse_lines(main_stream, 1)
        assert answer["id"] == 1 and "result" in answer
        await app.aclose()
        for call in (main_stream, session_stream):
            await asyncio.wait_for(call.task, TIMEOUT)
        assert app.connections == 0

    run(main)


def broken_factory() -> agent.Agent:
    raise RuntimeError("the factory's own bug")


def test_a_failing_agent_factory_is_500_or_1011_with_a_traceback_never_403(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 29 B7: a factory that raises is the server's fault, and says so: HTTP 500 with a
    JSON-RPC -32603 body, WebSocket accepted then closed 1011 (a close before the accept would
    reach the client as a 403 to the upgrade, which reads like a refused token); the traceback is
    logged both times."""

    async def main() -> None:
        app = agent.asgi_app(broken_factory)
        status, _, body = await request(app, "POST", rpc(7, "initialize", {"protocolVersion": 1}), JSON)
        assert status == 500 and error_of(body) == (7, -32603), body
        call = websocket(app)
        assert (await call.next())["type"] == "websocket.accept"
        close = await call.next()
        assert close["type"] == "websocket.close" and close["code"] == 1011, close
        await asyncio.wait_for(call.task, TIMEOUT)
        assert app.connections == 0

    with caplog.at_level("ERROR"):
        run(main)
    failures = [r for r in caplog.records if r.getMessage() == "the agent factory failed"]
    assert len(failures) == 2 and all(r.exc_info and isinstance(r.exc_info[1], RuntimeError) for r in failures)


def test_a_failing_agent_factory_reaches_a_real_websocket_client_as_1011() -> None:
    """The same through uvicorn and the websockets client: a close with 1011, not InvalidStatus 403."""
    import websockets
    from asgi_serving import bound_socket, serving

    async def main() -> None:
        sock = bound_socket()
        async with serving("uvicorn", sock, agent.asgi_app(broken_factory)):
            url = f"ws://127.0.0.1:{sock.getsockname()[1]}/acp"
            async with websockets.connect(url, open_timeout=TIMEOUT) as ws:
                with pytest.raises(websockets.ConnectionClosedError) as closed:
                    await asyncio.wait_for(ws.recv(), TIMEOUT)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011, closed.value
        sock.close()

    run(main)
