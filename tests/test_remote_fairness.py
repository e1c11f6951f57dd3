"""Fair turns and rate limits on `asgi_app` (issue 28: floods): a connection runs at most
`max_running` handlers at once and queues the rest in arrival order (still read: cancels and
answers get through, a handler waiting on the client gives its slot up), and the expensive
admissions are paced per connection and per client address (sessions opened, new
connections): over the rate a request waits its turn, or is refused with the time to retry
after, and the connection stays usable. Driven in-process through ASGI messages."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import agent
import pytest
from agent import types as at
from agent.remote_limits import RATES, Limits
from agent.remote_rate import Pace, Paces
from agent.slots import Slots
from test_remote_server import (
    CID,
    JSON,
    TIMEOUT,
    Call,
    Chatty,
    error_of,
    frame,
    opened,
    request,
    rpc,
    run,
    stream,
    ws_answer,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NEW = {"cwd": "/", "mcpServers": []}
INIT = rpc(0, "initialize", {"protocolVersion": 1})
NO_RATES: dict[str, Any] = dict.fromkeys(RATES)


def prompt(msg_id: int, text: str) -> dict[str, Any]:
    return frame(msg_id, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": text}]})


async def until(check: Any) -> None:
    """Until `check()` holds: bounded (TIMEOUT), in small steps of the loop."""
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


def slots_of(app: agent.AsgiApp) -> Slots:
    [link] = app.websockets.values()
    slots = link.connection._slots
    assert slots is not None
    return slots


def test_a_connection_runs_max_running_handlers_and_queues_the_rest_in_order() -> None:
    async def main() -> None:
        app = agent.asgi_app(Chatty, limits=Limits(max_running=2, slot_lease=None, **NO_RATES))
        call = await opened(app)
        slots = slots_of(app)
        call.incoming.put_nowait(prompt(10, "hang"))
        call.incoming.put_nowait(prompt(11, "hang"))
        for msg_id in (12, 13):  # over the bound: read and admitted, not started
            call.incoming.put_nowait(frame(msg_id, "x/unknown", {}))
        await until(lambda: slots.waiting == 2)
        assert call.sent.empty()
        # A cancel is still read; the freed slot goes to the first in line, then the next.
        call.incoming.put_nowait(frame(None, "$/cancel_request", {"requestId": 10}))
        answers = [await ws_answer(call) for _ in range(3)]
        assert [a["id"] for a in answers] == [10, 12, 13]
        assert answers[0]["error"]["code"] == -32800 and answers[1]["error"]["code"] == -32601
        # A queued request cancelled before it started is answered -32800 at once.
        call.incoming.put_nowait(prompt(14, "hang"))
        call.incoming.put_nowait(prompt(15, "hang"))
        await until(lambda: slots.waiting == 1)
        call.incoming.put_nowait(frame(None, "$/cancel_request", {"requestId": 15}))
        answer = await ws_answer(call)
        assert answer["id"] == 15 and answer["error"]["code"] == -32800
        assert slots.waiting == 0
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(call.task, TIMEOUT)

    run(main)


class Asker(Chatty):
    """ "ask": a prompt that waits on the client's permission answer; anything else as Chatty."""

    async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
        block = params.prompt[0]
        if isinstance(block, at.TextContent) and block.text == "ask":
            await self.peer.session_request_permission(
                session_id=params.session_id,
                tool_call=at.ToolCallUpdate(tool_call_id="c1", title="t", kind="other", status="pending"),
                options=[at.PermissionOption(option_id="ok", name="Ok", kind="allow_once")],
            )
            return at.PromptResponse(stop_reason="end_turn")
        return await super().session_prompt(params)


def test_a_handler_waiting_on_the_client_gives_its_slot_up() -> None:
    async def main() -> None:
        app = agent.asgi_app(Asker, limits=Limits(max_running=1, slot_lease=None, **NO_RATES))
        call = await opened(app)
        call.incoming.put_nowait(prompt(1, "ask"))
        asked = await ws_answer(call)
        assert asked["method"] == "session/request_permission"
        # The one slot is free while the client thinks: another request runs meanwhile.
        call.incoming.put_nowait(prompt(2, "1 5"))
        update = await ws_answer(call)
        assert update["method"] == "session/update"
        assert (await ws_answer(call))["id"] == 2
        outcome = {"outcome": {"outcome": "selected", "optionId": "ok"}}
        call.incoming.put_nowait(
            {"type": "websocket.receive", "text": json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": outcome})}
        )
        done = await ws_answer(call)
        assert done["id"] == 1 and done["result"]["stopReason"] == "end_turn"
        assert slots_of(app).waiting == 0
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(call.task, TIMEOUT)

    run(main)


def test_long_turns_hold_their_slots_only_for_the_lease() -> None:
    """Two turns that never end (a model call that takes minutes) on a connection of two slots:
    past the lease they run on uncounted, so a new session and a third prompt on the same
    connection are served at once, not after the turns; the turns still end by cancel."""

    async def main() -> None:
        app = agent.asgi_app(Chatty, limits=Limits(max_running=2, slot_lease=0.2, **NO_RATES))
        call = await opened(app)
        slots = slots_of(app)
        call.incoming.put_nowait(prompt(10, "hang"))
        call.incoming.put_nowait(prompt(11, "hang"))
        call.incoming.put_nowait(frame(12, "session/new", NEW))
        await until(lambda: slots.waiting == 1)  # held while the leases last
        started = time.monotonic()
        answer = await ws_answer(call)
        assert answer["id"] == 12 and answer["result"]["sessionId"] == "s1"
        assert time.monotonic() - started < TIMEOUT / 2
        call.incoming.put_nowait(prompt(13, "2 3"))  # a free slot now: runs at once
        assert [(await ws_answer(call)).get("id") for _ in range(3)] == [None, None, 13]
        for msg_id in (10, 11):
            call.incoming.put_nowait(frame(None, "$/cancel_request", {"requestId": msg_id}))
        ends = sorted([(await ws_answer(call))["id"] for _ in range(2)])
        assert ends == [10, 11]
        assert slots.waiting == 0 and slots.running == 0
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(call.task, TIMEOUT)

    run(main)


def test_a_slot_given_back_after_its_lease_is_counted_once() -> None:
    """The lease's end, the handler's end, and a wait on the peer in between: each slot is freed
    once, so the count never goes below zero nor lets more than the limit start."""

    async def main() -> None:
        slots = Slots(1, lease=0.05)
        gate = asyncio.Event()

        async def holder() -> None:
            await gate.wait()

        first = asyncio.ensure_future(holder())
        await slots.take(first)
        second = asyncio.ensure_future(holder())
        taking = asyncio.ensure_future(slots.take(second))
        await asyncio.sleep(0.01)
        assert not taking.done() and slots.running == 1
        await asyncio.wait_for(taking, TIMEOUT)  # first's lease ended: its slot went to second
        slots.away(first)  # first no longer holds a slot: nothing to free
        slots.back(first)
        slots.give(first)
        assert slots.running == 1
        slots.give(second)
        assert slots.running == 0
        third = asyncio.ensure_future(holder())
        await slots.take(third)
        slots.away(third)  # a wait on the peer frees the slot and ends the lease's timer
        assert slots.running == 0
        slots.back(third)
        assert slots.running == 1
        await asyncio.sleep(0.1)  # back from the peer, on a new lease: which ends too
        assert slots.running == 0
        slots.give(third)
        assert slots.running == 0
        gate.set()
        await asyncio.gather(first, second, third)

    run(main)


def test_pace_waits_within_rate_wait_and_refuses_beyond() -> None:
    pace = Pace(rate=10.0, burst=2, wait=0.25)
    assert pace.admit(100.0) == 0.0 and pace.admit(100.0) == 0.0  # the burst
    assert pace.admit(100.0) == pytest.approx(0.1)  # its turn, one interval on
    assert pace.admit(100.0) == pytest.approx(0.2)
    refused = pace.admit(100.0)  # 0.3 s away: over the 0.25 s wait, nothing taken
    assert refused == pytest.approx(-0.05)
    assert pace.admit(100.35) == pytest.approx(0.0, abs=1e-9)  # caught up
    assert not pace.idle(100.35) and pace.idle(101.0)
    paces = Paces(rate=1.0, burst=1, wait=0.0)
    assert paces.admit("a") == 0.0 and paces.admit("b") == 0.0  # one bucket per address
    assert paces.admit("a") < 0


def test_sessions_over_the_rate_wait_their_turn_then_are_refused_with_retry_after() -> None:
    async def main() -> None:
        limits = Limits(
            session_rate=10.0, session_burst=2, rate_wait=0.15, client_session_rate=None, connection_rate=None
        )
        app = agent.asgi_app(Chatty, limits=limits)
        call = await opened(app)
        start = time.monotonic()
        for msg_id in range(1, 6):
            call.incoming.put_nowait(frame(msg_id, "session/new", NEW))
        answers = {a["id"]: a for a in [await ws_answer(call) for _ in range(5)]}
        # 1, 2: the burst; 3 waits 0.1 s; 4 would wait 0.2 s and 5 0.2 s too: refused.
        assert [answers[i].get("result") for i in (1, 2, 3)] == [{"sessionId": "s1"}] * 3
        for msg_id in (4, 5):
            error = answers[msg_id]["error"]
            assert error["code"] == -32000 and error["data"]["limit"] == "session_rate"
            assert 0 < error["data"]["retryAfter"] <= 0.2
        assert time.monotonic() - start >= 0.09  # the third waited its turn
        call.incoming.put_nowait(frame(6, "x/unknown", {}))  # the connection goes on
        assert (await ws_answer(call))["error"]["code"] == -32601
        await asyncio.sleep(0.25)
        call.incoming.put_nowait(frame(7, "session/new", NEW))  # and opens sessions again
        assert (await ws_answer(call))["result"] == {"sessionId": "s1"}
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(call.task, TIMEOUT)

    run(main)


def test_the_client_address_rate_is_shared_by_its_connections() -> None:
    async def main() -> None:
        limits = Limits(
            session_rate=None, client_session_rate=1.0, client_session_burst=1, rate_wait=0.0, connection_rate=None
        )
        app = agent.asgi_app(Chatty, limits=limits)
        first, second = await opened(app), await opened(app)
        first.incoming.put_nowait(frame(1, "session/new", NEW))
        assert (await ws_answer(first))["result"] == {"sessionId": "s1"}
        second.incoming.put_nowait(frame(1, "session/new", NEW))
        error = (await ws_answer(second))["error"]
        assert error["data"]["limit"] == "client_session_rate" and error["data"]["retryAfter"] > 0
        for call in (first, second):
            call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
            await asyncio.wait_for(call.task, TIMEOUT)

    run(main)


def test_new_connections_over_the_rate_get_429_with_retry_after_and_later_get_in() -> None:
    async def main() -> None:
        limits = Limits(
            connection_rate=4.0, connection_burst=1, rate_wait=0.0, session_rate=None, client_session_rate=None
        )
        app = agent.asgi_app(Chatty, limits=limits)
        status, headers, _ = await request(app, "POST", INIT, JSON)
        assert status == 200
        cid = headers[CID]
        status, headers, body = await request(app, "POST", INIT, JSON)
        assert status == 429 and int(headers["retry-after"]) >= 1
        assert error_of(body) == (0, -32000) and "connection_rate" in json.loads(body)["error"]["data"]["details"]
        # The connection already made is not touched by the refusal.
        status, _, _ = await request(app, "POST", rpc(1, "session/new", NEW), {**JSON, CID: cid})
        assert status == 202
        # A WebSocket upgrade over the rate: refused before the accept.
        call = Call(
            app, {"type": "websocket", "path": "/acp", "headers": [], "extensions": {"websocket.http.response": {}}}
        )
        call.incoming.put_nowait({"type": "websocket.connect"})
        start = await call.next()
        assert start["type"] == "websocket.http.response.start" and start["status"] == 429
        await call.next()
        await asyncio.wait_for(call.task, TIMEOUT)
        await asyncio.sleep(0.3)  # a token again
        status, _, _ = await request(app, "POST", INIT, JSON)
        assert status == 200
        await app.aclose()

    run(main)


def test_a_new_connection_within_rate_wait_waits_its_turn() -> None:
    async def main() -> None:
        limits = Limits(
            connection_rate=10.0, connection_burst=1, rate_wait=1.0, session_rate=None, client_session_rate=None
        )
        app = agent.asgi_app(Chatty, limits=limits)
        start = time.monotonic()
        statuses = await asyncio.gather(*(request(app, "POST", INIT, JSON) for _ in range(3)))
        assert [s[0] for s in statuses] == [200, 200, 200]
        assert time.monotonic() - start >= 0.18  # two intervals of 0.1 s: paced, not refused
        await app.aclose()

    run(main)


def test_rates_names_every_rate_of_limits() -> None:
    assert set(RATES) == {f.name for f in dataclasses.fields(Limits) if f.name.endswith("_rate")}


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_running", 0),
        ("slot_lease", 0.0),
        ("connection_rate", 0.0),
        ("session_burst", 0),
        ("client_session_rate", -1.0),
        ("rate_wait", -1.0),
    ],
)
def test_bad_rate_and_slot_settings_are_refused_with_their_name(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        Limits(**{field: value})


def test_a_session_layer_turn_waiting_on_the_client_gives_its_handlers_slot_up() -> None:
    """The session layer runs each turn in a task of its own: its permission request frees the
    slot of the prompt handler that started it, so a second prompt gets to ask too."""
    from agent.session_store import MemoryStore

    sys.path.insert(0, str(EXAMPLES))
    try:
        from echo_agent import EchoAgent
    finally:
        sys.path.remove(str(EXAMPLES))

    async def main() -> None:
        store = MemoryStore()
        app = agent.asgi_app(lambda: EchoAgent(store), limits=Limits(max_running=1, slot_lease=None, **NO_RATES))
        call = await opened(app)
        for msg_id in (1, 2):
            call.incoming.put_nowait(frame(msg_id, "session/new", {"cwd": "/tmp", "mcpServers": []}))
        sessions = [(await ws_answer(call))["result"]["sessionId"] for _ in range(2)]
        for i, session in enumerate(sessions):
            text = [{"type": "text", "text": "permission"}]
            call.incoming.put_nowait(frame(10 + i, "session/prompt", {"sessionId": session, "prompt": text}))
        asks = [await ws_answer(call) for _ in range(2)]
        assert [a["method"] for a in asks] == ["session/request_permission"] * 2
        for ask in asks:
            outcome = {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
            answer = {"jsonrpc": "2.0", "id": ask["id"], "result": outcome}
            call.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(answer)})
        done: set[int] = set()
        while len(done) < 2:
            message = await ws_answer(call)
            if message.get("id") in (10, 11):
                assert message["result"]["stopReason"] == "end_turn"
                done.add(message["id"])
        assert slots_of(app).waiting == 0
        call.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(call.task, TIMEOUT)

    run(main)


def test_sse_stream_opens_over_the_rate_get_429_and_the_connection_goes_on() -> None:
    async def main() -> None:
        limits = Limits(**{**NO_RATES, "stream_rate": 5.0, "stream_burst": 1, "rate_wait": 0.0})
        app = agent.asgi_app(Chatty, limits=limits)
        status, headers, _ = await request(app, "POST", INIT, JSON)
        cid = headers[CID]
        main_stream = stream(app, cid)
        assert (await main_stream.next())["status"] == 200
        refused = stream(app, cid, "s1")
        start = await refused.next()
        assert start["status"] == 429 and int(dict(start["headers"])[b"retry-after"]) >= 1
        body = json.loads((await refused.next())["body"])
        assert body["error"]["code"] == -32000 and "stream_rate" in body["error"]["data"]["details"]
        await asyncio.wait_for(refused.task, TIMEOUT)
        # The connection goes on, and after the interval a stream opens again.
        assert (await request(app, "POST", rpc(1, "session/new", NEW), {**JSON, CID: cid}))[0] == 202
        await asyncio.sleep(0.25)
        again = stream(app, cid, "s1")
        assert (await again.next())["status"] == 200
        await app.aclose()

    run(main)


def test_sse_stream_opens_over_the_client_address_rate_get_429_across_its_connections() -> None:
    """`client_stream_rate` is one bucket per client address: two connections from one address
    (here the scope names none, ""), each under its own `stream_rate`, share it."""

    async def main() -> None:
        limits = Limits(**{**NO_RATES, "client_stream_rate": 5.0, "client_stream_burst": 1, "rate_wait": 0.0})
        app = agent.asgi_app(Chatty, limits=limits)
        first = (await request(app, "POST", INIT, JSON))[1][CID]
        second = (await request(app, "POST", INIT, JSON))[1][CID]
        opened = stream(app, first)
        assert (await opened.next())["status"] == 200
        refused = stream(app, second)
        start = await refused.next()
        assert start["status"] == 429 and int(dict(start["headers"])[b"retry-after"]) >= 1
        body = json.loads((await refused.next())["body"])
        assert body["error"]["code"] == -32000 and "client_stream_rate" in body["error"]["data"]["details"]
        await asyncio.wait_for(refused.task, TIMEOUT)
        await asyncio.sleep(0.25)  # the address's next turn
        again = stream(app, second)
        assert (await again.next())["status"] == 200
        await app.aclose()

    run(main)
