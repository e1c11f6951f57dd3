"""Refusals of the remote transport's limits and rates (the review of issue 28):

- a refusal by one bucket or cap never spends another bucket's token: an SSE stream open refused
  by `client_stream_rate` (or `max_streams`) leaves the connection's `stream_rate` token, a
  session refused by `client_session_rate` leaves the connection's `session_rate` token, and a
  new connection refused by `max_per_client` leaves its address's `connection_rate` token;
- every limit's and rate's refusal is one JSON-RPC error on both profiles (-32000 "Limit
  exceeded", `data.details`, `data.limit`, `data.retryAfter` when waiting helps), and an HTTP
  429 or 503 says the same in `Retry-After` (whole seconds, rounded up): pinned over real
  servers, uvicorn for WebSocket and hypercorn for Streamable HTTP, as the example serves them.

The first part is driven in-process through ASGI messages (tests/test_remote_server.py)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from typing import Any

import agent
import pytest
from agent.remote_limits import RATES, Limits
from agent.remote_rate import Pace, Paces
from asgi_serving import bound_socket, serving
from test_remote_server import CID, JSON, TIMEOUT, Chatty, frame, opened, request, rpc, run, stream, ws_answer

NEW = {"cwd": "/", "mcpServers": []}
INIT = rpc(0, "initialize", {"protocolVersion": 1})
NO_RATES: dict[str, Any] = dict.fromkeys(RATES)
NEVER = 0.001  # a rate whose bucket does not refill within a test (one token in 1000 s)


def data_of(body: bytes) -> dict[str, Any]:
    error = json.loads(body)["error"]
    assert error["code"] == -32000 and error["message"] == "Limit exceeded", error
    data: dict[str, Any] = error["data"]
    return data


# -- one bucket's refusal leaves the other's token ------------------------------------------------
def test_a_refund_gives_back_exactly_what_admit_took() -> None:
    pace = Pace(rate=10.0, burst=2, wait=0.0)
    assert pace.admit(100.0) == 0.0 and pace.admit(100.0) == 0.0
    assert pace.admit(100.0) < 0  # empty
    pace.refund()
    assert pace.admit(100.0) == 0.0 and pace.admit(100.0) < 0  # one token back, one only
    paces = Paces(rate=10.0, burst=1, wait=0.0)
    assert paces.admit("a", now=5.0) == 0.0 and paces.admit("a", now=5.0) < 0
    paces.refund("a")
    paces.refund("never seen")  # a forgotten bucket is full: nothing to give back
    assert paces.admit("a", now=5.0) == 0.0 and len(paces) == 1


def test_a_stream_refused_by_the_address_rate_keeps_the_connections_stream_token() -> None:
    async def main() -> None:
        limits = Limits(
            **{
                **NO_RATES,
                "stream_rate": NEVER,
                "stream_burst": 2,  # two opens for this connection, ever
                "client_stream_rate": 5.0,
                "client_stream_burst": 1,  # one at once for the address, again 0.2 s later
                "rate_wait": 0.0,
            }
        )
        app = agent.asgi_app(Chatty, limits=limits)
        cid = (await request(app, "POST", INIT, JSON))[1][CID]
        first = stream(app, cid)
        assert (await first.next())["status"] == 200
        refused = stream(app, cid, "a")
        status, headers, body = await refused.response()
        assert status == 429 and data_of(body)["limit"] == "client_stream_rate" and headers["retry-after"] == "1"
        await asyncio.sleep(0.3)  # the address's next token; the connection's second is still there
        again = stream(app, cid, "a")
        start = await again.next()
        assert start["status"] == 200, await again.next()
        await app.aclose()

    run(main)


def test_a_stream_refused_by_max_streams_spends_no_rate_token() -> None:
    async def main() -> None:
        limits = Limits(**{**NO_RATES, "stream_rate": NEVER, "stream_burst": 2, "max_streams": 1, "rate_wait": 0.0})
        app = agent.asgi_app(Chatty, limits=limits)
        cid = (await request(app, "POST", INIT, JSON))[1][CID]
        session_stream = stream(app, cid, "a")
        assert (await session_stream.next())["status"] == 200
        status, headers, body = await stream(app, cid, "b").response()
        assert status == 429 and data_of(body) == {
            "details": "over this connection's max_streams limit of 1",
            "limit": "max_streams",
        }
        assert "retry-after" not in headers  # waiting does not help: a stream must end first
        main_stream = stream(app, cid)  # the connection's second stream_rate token is still there
        start = await main_stream.next()
        assert start["status"] == 200, await main_stream.next()
        await app.aclose()

    run(main)


def test_a_session_refused_by_the_address_rate_keeps_the_connections_session_token() -> None:
    async def main() -> None:
        limits = Limits(
            **{
                **NO_RATES,
                "session_rate": NEVER,
                "session_burst": 2,
                "client_session_rate": 5.0,
                "client_session_burst": 1,
                "rate_wait": 0.0,
            }
        )
        app = agent.asgi_app(Chatty, limits=limits)
        call = await opened(app)
        call.incoming.put_nowait(frame(1, "session/new", NEW))
        assert (await ws_answer(call))["result"] == {"sessionId": "s1"}
        call.incoming.put_nowait(frame(2, "session/new", NEW))
        error = (await ws_answer(call))["error"]
        assert error["code"] == -32000 and error["data"]["limit"] == "client_session_rate"
        await asyncio.sleep(0.3)
        call.incoming.put_nowait(frame(3, "session/new", NEW))
        assert (await ws_answer(call)).get("result") == {"sessionId": "s1"}
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(call.task, TIMEOUT)

    run(main)


def test_a_connection_refused_by_the_address_cap_keeps_the_addresss_connection_token() -> None:
    async def main() -> None:
        limits = Limits(**{**NO_RATES, "connection_rate": NEVER, "connection_burst": 2, "max_per_client": 1})
        app = agent.asgi_app(Chatty, limits=limits)
        cid = (await request(app, "POST", INIT, JSON))[1][CID]
        used = stream(app, cid)  # a stream open: the connection is in use, never evicted for room
        assert (await used.next())["status"] == 200
        status, headers, body = await request(app, "POST", INIT, JSON)
        assert status == 503 and data_of(body)["limit"] == "max_per_client" and headers["retry-after"] == "5"
        assert (await request(app, "DELETE", b"", {CID: cid}))[0] == 202
        status, _, body = await request(app, "POST", INIT, JSON)  # the second token is still there
        assert status == 200, body
        await app.aclose()

    run(main)


# -- one answer for "over a limit", on both profiles, over real servers --------------------------
LIMITS = Limits(
    **{
        **NO_RATES,
        "connection_rate": 0.5,
        "connection_burst": 1,
        "session_rate": 0.5,
        "session_burst": 1,
        "rate_wait": 0.0,
    }
)


class Sse:
    """The JSON-RPC messages of one Streamable HTTP SSE stream, in order."""

    def __init__(self, lines: AsyncIterator[str]) -> None:
        self._lines = lines

    async def next(self) -> dict[str, Any]:
        async for line in self._lines:
            if line.startswith("data: "):
                message: dict[str, Any] = json.loads(line[6:])
                return message
        raise AssertionError("the stream ended")


async def ws_refusals() -> dict[str, tuple[dict[str, Any], str | None]]:
    """Over uvicorn: each refusal's JSON-RPC error and, for an HTTP answer, its Retry-After."""
    import websockets

    app = agent.asgi_app(Chatty, limits=LIMITS)
    sock = bound_socket()
    url = f"ws://127.0.0.1:{sock.getsockname()[1]}/acp"
    out: dict[str, tuple[dict[str, Any], str | None]] = {}
    async with serving("uvicorn", sock, app):
        async with websockets.connect(url, compression=None) as ws:
            await ws.send(INIT.decode())
            json.loads(await ws.recv())
            for msg_id in (1, 2):
                await ws.send(rpc(msg_id, "session/new", NEW).decode())
            answers = [json.loads(await ws.recv()) for _ in range(2)]
            [refused] = [a for a in answers if a["id"] == 2]
            out["session_rate"] = (refused["error"], None)
            with pytest.raises(websockets.InvalidStatus) as info:  # a second connection, at once
                async with websockets.connect(url, compression=None):
                    pass
            response = info.value.response
            assert response.status_code == 429
            out["connection_rate"] = (json.loads(response.body)["error"], response.headers.get("retry-after"))
            limit = app.budget.limit
            assert limit is not None
            app.budget.used += limit  # the app's budget full (as test_remote_limits does)
            await ws.send(rpc(3, "x/unknown", {}).decode())
            answer = json.loads(await ws.recv())
            app.budget.used -= limit
            assert answer["id"] == 3
            out["max_inflight_bytes"] = (answer["error"], None)
    return out


async def http_refusals() -> dict[str, tuple[dict[str, Any], str | None]]:
    """The same over hypercorn (Streamable HTTP)."""
    import httpx

    app = agent.asgi_app(Chatty, limits=LIMITS)
    sock = bound_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/acp"
    out: dict[str, tuple[dict[str, Any], str | None]] = {}
    async with serving("hypercorn", sock, app), httpx.AsyncClient(timeout=TIMEOUT) as client:
        first = await client.post(url, content=INIT, headers=JSON)
        assert first.status_code == 200
        conn = {CID: first.headers[CID]}
        post = {**JSON, **conn}
        async with client.stream("GET", url, headers={**conn, "accept": "text/event-stream"}) as events:
            sse = Sse(events.aiter_lines())
            for msg_id in (1, 2):
                answer = await client.post(url, content=rpc(msg_id, "session/new", NEW), headers=post)
                assert answer.status_code == 202, answer.text
            answers = [await sse.next() for _ in range(2)]
            [refused] = [a for a in answers if a["id"] == 2]
            out["session_rate"] = (refused["error"], None)
            second = await client.post(url, content=INIT, headers=JSON)  # a second connection, at once
            assert second.status_code == 429
            out["connection_rate"] = (second.json()["error"], second.headers.get("retry-after"))
            limit = app.budget.limit
            assert limit is not None
            app.budget.used += limit
            over = await client.post(url, content=rpc(3, "x/unknown", {}), headers=post)
            app.budget.used -= limit
            assert over.status_code == 503 and over.json()["id"] == 3
            out["max_inflight_bytes"] = (over.json()["error"], over.headers.get("retry-after"))
        await client.delete(url, headers=conn)
    return out


@pytest.mark.slow
def test_every_limit_refusal_is_the_same_error_on_both_profiles() -> None:
    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        return await ws_refusals(), await http_refusals()

    ws, http = run(main)
    assert set(ws) == set(http) == {"session_rate", "connection_rate", "max_inflight_bytes"}
    for limit in ws:
        (ws_error, ws_header), (http_error, http_header) = ws[limit], http[limit]
        for error in (ws_error, http_error):
            assert error["code"] == -32000 and error["message"] == "Limit exceeded", error
            assert set(error["data"]) == {"details", "limit", "retryAfter"}, error
            assert error["data"]["limit"] == limit and 0 < error["data"]["retryAfter"] <= 2.0, error
        # The same words on both profiles, the times aside (each measured on its own server).
        assert (
            ws_error["data"]["details"].split(": retry after")[0]
            == http_error["data"]["details"].split(": retry after")[0]
        )
        if limit == "connection_rate":  # an HTTP answer on both: Retry-After from the same seconds
            for error, header in ((ws_error, ws_header), (http_error, http_header)):
                assert header == str(max(1, math.ceil(error["data"]["retryAfter"]))), (error, header)
        if limit == "max_inflight_bytes":
            assert http_header == "1" and ws_error == http_error
