"""Bounded resources and reaping on `asgi_app` (issue 28 §4-§5), driven in-process through ASGI
messages with small limits: no message buffer outlives its dispatch, the per-connection caps
(pending handlers, sessions, SSE streams) answer with an error and leave the connection usable,
a flood of bare `initialize` requests evicts itself instead of locking new clients out, the
per-client and authentication caps, a silent WebSocket closed at `initialize_timeout`, a
vanished Streamable HTTP client reaped (its turn's permission request fails with
ConnectionClosed), and the agent's requests given a deadline."""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc
from typing import Any

import agent
import pytest
from agent import types as at
from agent.connection import ConnectionClosed
from agent.principal import Principal
from agent.remote_limits import Admission, Limits
from test_remote_server import (
    CID,
    JSON,
    TIMEOUT,
    Call,
    Chatty,
    error_of,
    frame,
    http,
    initialized,
    opened,
    request,
    rpc,
    run,
    sse_lines,
    stream,
    websocket,
    ws_answer,
)


def test_no_websocket_message_outlives_its_dispatch() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty)
        call = await opened(app)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            call.incoming.put_nowait(frame(1, "x/unknown", {"pad": "x" * 3_000_000}))
            assert (await ws_answer(call))["error"]["code"] == -32601
            await asyncio.sleep(0.05)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        # The 3 MB arrived as a str, was encoded and framed, read and parsed: none of it stays
        # while the socket waits for its next message.
        assert held < 500_000, held
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(call.task, TIMEOUT)

    run(main)


def text_prompt(msg_id: int, text: str) -> dict[str, Any]:
    return frame(msg_id, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": text}]})


def test_pending_and_session_caps_answer_under_the_id_and_keep_the_connection() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty, limits=Limits(max_pending=2, max_sessions=2))
        call = await opened(app)
        new = {"cwd": "/", "mcpServers": []}
        for msg_id in (1, 2):
            call.incoming.put_nowait(frame(msg_id, "session/new", new))
            assert (await ws_answer(call))["result"] == {"sessionId": "s1"}
        call.incoming.put_nowait(frame(3, "session/new", new))
        refused = await ws_answer(call)
        assert refused["id"] == 3 and refused["error"]["code"] == -32000
        assert refused["error"]["data"]["limit"] == "max_sessions"
        call.incoming.put_nowait(frame(4, "session/load", {**new, "sessionId": "s9"}))
        assert (await ws_answer(call))["error"]["data"]["limit"] == "max_sessions"
        for msg_id in (10, 11):
            call.incoming.put_nowait(text_prompt(msg_id, "hang"))
        call.incoming.put_nowait(text_prompt(12, "hang"))
        refused = await ws_answer(call)
        assert refused["id"] == 12 and refused["error"]["data"]["limit"] == "max_pending"
        # One handler ends: the connection takes requests again.
        call.incoming.put_nowait(frame(None, "$/cancel_request", {"requestId": 10}))
        assert (await ws_answer(call))["id"] == 10
        call.incoming.put_nowait(frame(13, "x/unknown", {}))
        assert (await ws_answer(call))["error"]["code"] == -32601
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(call.task, TIMEOUT)

    run(main)


def test_sse_streams_over_the_cap_get_429_and_the_connection_goes_on() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty, limits=Limits(max_streams=2))
        cid = await initialized(app)
        calls = [stream(app, cid, session) for session in ("a", "b")]
        for call in calls:
            assert (await call.next())["status"] == 200
        over = stream(app, cid, "c")
        status, _, body = await over.response()
        assert (status, *error_of(body)) == (429, None, -32000)
        assert json.loads(body)["error"]["data"]["limit"] == "max_streams"
        main_stream = stream(app, cid)
        assert (await main_stream.next())["status"] == 200
        assert (await request(app, "DELETE", b"", {CID: cid}))[0] == 202
        await asyncio.wait_for(asyncio.gather(*(c.task for c in [*calls, over, main_stream])), TIMEOUT)

    run(main)


INIT = rpc(0, "initialize", {"protocolVersion": 1})


def from_client(method: str, address: str, headers: dict[str, str]) -> dict[str, Any]:
    return {**http(method, headers), "client": (address, 40000)}


async def post_from(app: agent.AsgiApp, address: str, body: bytes = INIT) -> tuple[int, dict[str, str], bytes]:
    call = Call(app, from_client("POST", address, JSON))
    call.incoming.put_nowait({"type": "http.request", "body": body, "more_body": False})
    result = await call.response()
    await asyncio.wait_for(call.task, TIMEOUT)
    return result


def test_a_flood_of_bare_initialize_evicts_itself_not_new_clients() -> None:
    async def main() -> None:
        limits = Limits(max_per_client=3, evict_after=0)  # the grace is the next test's
        app = agent.asgi_app(Chatty, max_connections=4, allow_unauthenticated=True, limits=limits)
        used = await initialized(app)  # a real client: it opens its stream
        watching = stream(app, used)
        assert (await watching.next())["status"] == 200
        for _ in range(30):  # every bare initialize is served, evicting the oldest bare one
            status, _, _ = await post_from(app, "198.51.100.7")
            assert status == 200
        await asyncio.sleep(0.05)
        assert app.connections <= 4
        # A new client from elsewhere is still served, and the used connection survives.
        status, headers, _ = await post_from(app, "203.0.113.9")
        assert status == 200
        assert (await request(app, "DELETE", b"", {CID: used}))[0] == 202
        # Per client: three used connections from one address, the fourth is refused.
        for _ in range(3):
            _, headers, _ = await post_from(app, "192.0.2.1")
            get = Call(app, from_client("GET", "192.0.2.1", {CID: headers[CID], "accept": "text/event-stream"}))
            get.incoming.put_nowait({"type": "http.request", "body": b"", "more_body": False})
            assert (await get.next())["status"] == 200
        status, headers, body = await post_from(app, "192.0.2.1")
        assert (status, *error_of(body)) == (503, 0, -32000) and headers["retry-after"] == "5"
        assert json.loads(body)["error"]["data"] == {
            "details": "too many connections (max_per_client)",
            "limit": "max_per_client",
            "retryAfter": 5.0,
        }
        assert (await post_from(app, "192.0.2.2"))[0] == 200
        await app.aclose()
        await asyncio.wait_for(watching.task, TIMEOUT)

    run(main)


def test_a_connection_just_initialized_is_not_evicted_for_room() -> None:
    """A client between its `initialize` and its next message looks fresh, as a bare flood's
    connection does: for `evict_after` it is not evicted, a newcomer over the cap is refused;
    past it, the oldest fresh one makes room again."""

    async def main() -> None:
        app = agent.asgi_app(
            Chatty, max_connections=2, allow_unauthenticated=True, limits=Limits(evict_after=0.3)
        )
        first = (await post_from(app, "198.51.100.7"))[1][CID]
        second = (await post_from(app, "198.51.100.8"))[1][CID]
        status, headers, body = await post_from(app, "198.51.100.9")
        assert (status, *error_of(body)) == (503, 0, -32000) and "retry-after" in headers
        await asyncio.sleep(0.35)
        status, headers, _ = await post_from(app, "198.51.100.9")
        assert status == 200  # the oldest fresh one, `first`, made room
        assert (await request(app, "DELETE", b"", {CID: first}))[0] == 404
        assert (await request(app, "DELETE", b"", {CID: second}))[0] == 202
        await app.aclose()

    run(main)


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_evict_after_refuses_nonsense(bad: float) -> None:
    with pytest.raises(ValueError, match="evict_after"):
        Limits(evict_after=bad)


def test_requests_inside_the_authentication_hook_are_capped() -> None:
    async def main() -> None:
        release = asyncio.Event()

        async def slow(request: agent.AuthRequest) -> Principal:
            await release.wait()
            return Principal("alice")

        app = agent.asgi_app(Chatty, authenticate=slow, limits=Limits(max_authenticating=1))
        first = Call(app, http("POST", JSON))
        first.incoming.put_nowait({"type": "http.request", "body": INIT, "more_body": False})
        await asyncio.sleep(0.05)
        status, headers, body = await request(app, "POST", INIT, JSON)
        assert status == 503 and headers["retry-after"] and b"authenticated" in body
        release.set()
        assert (await first.response())[0] == 200
        await asyncio.wait_for(first.task, TIMEOUT)
        await app.aclose()

    run(main)


def test_a_silent_websocket_is_closed_at_the_initialize_deadline() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty, limits=Limits(initialize_timeout=0.2))
        call = websocket(app)
        assert (await call.next())["type"] == "websocket.accept"
        assert (await call.next()) == {"type": "websocket.close", "code": 1001}
        await asyncio.wait_for(call.task, TIMEOUT)
        assert app.connections == 0

    run(main)


class Asker(agent.Agent):
    """A prompt asks the client's permission and records how the request ended."""

    outcomes: list[str] = []

    async def initialize(self, params: at.InitializeRequest) -> at.InitializeResponse:
        return at.InitializeResponse(protocol_version=1)

    async def authenticate(self, params: at.AuthenticateRequest) -> at.AuthenticateResponse:
        return at.AuthenticateResponse()

    async def session_new(self, params: at.NewSessionRequest) -> at.NewSessionResponse:
        return at.NewSessionResponse(session_id="s1")

    async def session_cancel(self, params: at.CancelNotification) -> None:
        return None

    async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
        try:
            await self.peer.session_request_permission(
                session_id=params.session_id,
                tool_call=at.ToolCallUpdate(tool_call_id="c1", title="t", kind="other", status="pending"),
                options=[at.PermissionOption(option_id="ok", name="Ok", kind="allow_once")],
            )
            Asker.outcomes.append("answered")
        except (ConnectionClosed, TimeoutError) as exc:
            Asker.outcomes.append(type(exc).__name__)
        except asyncio.CancelledError:
            Asker.outcomes.append("cancelled")
            raise
        return at.PromptResponse(stop_reason="end_turn")


async def asking(app: agent.AsgiApp) -> tuple[str, Call]:
    """A connection whose turn waits on the client's permission answer, read on its stream."""
    cid = await initialized(app)
    main_stream = stream(app, cid)
    assert (await main_stream.next())["status"] == 200
    conn = {**JSON, CID: cid}
    assert (await request(app, "POST", rpc(1, "session/new", {"cwd": "/", "mcpServers": []}), conn))[0] == 202
    prompt = rpc(2, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]})
    assert (await request(app, "POST", prompt, {**conn, "acp-session-id": "s1"}))[0] == 202
    messages = await sse_lines(main_stream, 2)
    assert [m.get("method") for m in messages] == [None, "session/request_permission"]
    return cid, main_stream


def test_a_vanished_http_client_is_reaped_and_its_pending_request_fails() -> None:
    async def main() -> None:
        Asker.outcomes.clear()
        app = agent.asgi_app(Asker, limits=Limits(http_idle_timeout=0.3))
        _, main_stream = await asking(app)
        main_stream.incoming.put_nowait({"type": "http.disconnect"})  # gone without DELETE
        await asyncio.wait_for(main_stream.task, TIMEOUT)
        for _ in range(100):
            if not app.connections:
                break
            await asyncio.sleep(0.05)
        assert app.connections == 0 and Asker.outcomes == ["ConnectionClosed"]
        await app.aclose()

    run(main)


def test_the_agents_requests_to_the_client_get_a_deadline() -> None:
    async def main() -> None:
        Asker.outcomes.clear()
        app = agent.asgi_app(Asker, limits=Limits(request_timeout=0.2))
        cid, main_stream = await asking(app)
        [done] = await sse_lines(main_stream, 1)  # the client is there but never answers
        assert done["id"] == 2 and Asker.outcomes == ["TimeoutError"]
        assert app.connections == 1
        assert (await request(app, "DELETE", b"", {CID: cid}))[0] == 202
        await asyncio.wait_for(main_stream.task, TIMEOUT)

    run(main)


@pytest.mark.parametrize(
    ("field", "value"), [
        ("max_pending", 0),
        ("max_streams", -1),
        ("http_idle_timeout", 0.0),
        ("max_authenticating", 0),
        ("body_timeout", -1.0),
        ("max_inflight_bytes", 0),
    ]
)
def test_limits_refuse_nonsense_clearly(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"Limits.{field} must be (a )?positive"):
        Limits(**{field: value})


def test_the_defaults_bound_everything_and_reap_within_a_minute() -> None:
    limits = Limits()
    assert limits.http_idle_timeout is not None and limits.http_idle_timeout <= 60
    assert None not in (limits.max_pending, limits.max_sessions, limits.max_streams, limits.max_per_client)
    assert limits.initialize_timeout is not None and limits.initialize_timeout <= 30
    assert limits.body_timeout is not None and limits.body_timeout <= 60


def test_a_slow_body_gets_408_at_the_body_deadline_and_the_connection_goes_on() -> None:
    """A POST that sends its head and part of its body, then nothing (slowloris on the body,
    which neither server times out): 408 with a JSON-RPC error after `body_timeout`, and the
    connection it named still serves the next POST."""

    async def main() -> None:
        app = agent.asgi_app(Chatty, limits=Limits(body_timeout=0.2))
        cid = await initialized(app)
        call = Call(app, http("POST", {**JSON, CID: cid}))
        call.incoming.put_nowait({"type": "http.request", "body": b'{"jsonrpc": "2.0", ', "more_body": True})
        status, headers, body = await call.response()
        assert status == 408 and error_of(body) == (None, -32600) and headers["connection"] == "close"
        await asyncio.wait_for(call.task, TIMEOUT)
        new = rpc(1, "session/new", {"cwd": "/", "mcpServers": []})
        assert (await request(app, "POST", new, {**JSON, CID: cid}))[0] == 202
        assert app.connections == 1
        await app.aclose()

    run(main)


def test_over_the_apps_inflight_byte_budget_a_message_is_refused_and_the_connection_goes_on() -> None:
    """With the app's budget of bytes in flight spent (other connections' messages not yet read by
    their agents, set here directly), a WebSocket message gets -32000 under its own id and a POST
    503 with the same error; once the budget frees up, both connections serve the next request."""

    async def main() -> None:
        app = agent.asgi_app(Chatty, limits=Limits(max_inflight_bytes=4096))
        ws = await opened(app)
        cid = await initialized(app)
        assert app.budget.used == 0
        app.budget.used = 4096  # spent by others
        ws.incoming.put_nowait(frame(5, "session/new", {"cwd": "/", "mcpServers": []}))
        refused = await ws_answer(ws)
        assert refused["id"] == 5 and refused["error"]["code"] == -32000
        assert refused["error"]["data"]["limit"] == "max_inflight_bytes"
        new = rpc(6, "session/new", {"cwd": "/", "mcpServers": []})
        status, headers, body = await request(app, "POST", new, {**JSON, CID: cid})
        assert status == 503 and headers["retry-after"] == "1" and error_of(body) == (6, -32000), body
        big = rpc(7, "session/new", {"cwd": "/" + "x" * 8000, "mcpServers": []})  # more than the budget
        app.budget.used = 0
        status, _, body = await request(app, "POST", big, {**JSON, CID: cid})
        assert status == 202, body  # alone in flight, a message is taken whatever its size
        ws.incoming.put_nowait(frame(8, "session/new", {"cwd": "/", "mcpServers": []}))
        assert (await ws_answer(ws))["result"] == {"sessionId": "s1"}
        ws.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(ws.task, TIMEOUT)
        await app.aclose()

    run(main)


def test_the_inflight_byte_budget_is_given_back_on_every_path() -> None:
    """Messages delivered, refused (parse error, batch, unknown connection, oversize, session
    mismatch), and connections ended with messages unread: the budget is back at 0 after each."""

    async def main() -> None:
        app = agent.asgi_app(Chatty, max_message_size=1000)
        cid = await initialized(app)
        assert app.budget.used == 0
        hang = {"sessionId": "s1", "prompt": [{"type": "text", "text": "hang"}]}
        for body, headers in (
            (b"not json", {CID: cid}),
            (b"[1, 2]", {CID: cid}),
            (rpc(1, "session/new", {"cwd": "/", "mcpServers": []}), {CID: "nope"}),
            (rpc(2, "session/new", {"cwd": "/" + "x" * 2000, "mcpServers": []}), {CID: cid}),
            (rpc(3, "session/prompt", hang), {CID: cid, "acp-session-id": "other"}),
            (rpc(4, "session/prompt", hang), {CID: cid, "acp-session-id": "s1"}),
        ):
            await request(app, "POST", body, {**JSON, **headers})
            await asyncio.sleep(0.01)  # the agent reads what was delivered
            assert app.budget.used == 0, body
        ws = await opened(app)
        ws.incoming.put_nowait(frame(1, "session/new", {"cwd": "/", "mcpServers": []}))
        await ws_answer(ws)
        ws.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(ws.task, TIMEOUT)
        await app.aclose()
        assert app.budget.used == 0 and app.connections == 0

    run(main)


def test_sessions_loaded_count_once_and_odd_ids_do_not_break_the_count() -> None:
    """The loaded-session ids are kept only from the first load (most connections load none);
    a load of one already loaded is free, and an id that is not a string (unhashable) is counted
    like a new session, never looked up."""
    admit = Admission(Limits(max_sessions=3, session_rate=None, client_session_rate=None))
    assert admit("session/load", {"sessionId": "s1"}, 0) is None
    assert admit("session/load", {"sessionId": "s1"}, 0) is None  # the same: counted once
    assert admit("session/load", {"sessionId": ["not", "an", "id"]}, 0) is None
    assert admit("session/new", {}, 0) is None
    refused = admit("session/load", {"sessionId": "s2"}, 0)
    assert refused is not None and not isinstance(refused, float)
    assert refused.data == {"details": "over this connection's max_sessions limit of 3", "limit": "max_sessions"}
    assert admit("session/resume", {"sessionId": "s1"}, 0) is None  # loaded already: still free
