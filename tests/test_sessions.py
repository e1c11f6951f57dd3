"""The session layer (`agent.sessions.SessionAgent`) served in this event loop over memory
streams, on a MemoryStore and a SQLite file, driven on the wire by `testing.ScriptedClient`.

Every lifecycle method as the v1 session documents say (new, load with replay then answer,
list with cwd filter and cursor, resume, close, delete, set_mode / set_config_option kept in
sync), owner isolation, cancel and close interrupting a turn, two prompts at once, the replay
folded by `contrib.SessionAccumulator` equal to the live turn, and v2 / an old release
generating a layer that imports.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agent import run_agent, types
from agent.principal import Principal
from agent.session_sqlite import SqliteStore
from agent.session_store import MemoryStore, SessionStore
from agent.sessions import Session, SessionAgent
from agent.testing import ScriptedClient, memory_streams
from client import types as ctypes
from client.contrib import SessionAccumulator, SessionSnapshot

CWD = "/tmp/acp-sessions-test"


class ToyAgent(SessionAgent):
    modes = [types.SessionMode(id="ask", name="Ask"), types.SessionMode(id="code", name="Code")]
    config_options = [
        types.SessionConfigOptionSelect(
            id="model",
            name="Model",
            current_value="small",
            options=[
                types.SessionConfigSelectOption(value="small", name="Small"),
                types.SessionConfigSelectOption(value="big", name="Big"),
            ],
        )
    ]
    batch_delay = 0.01

    async def turn(self, session: Session, prompt: list[types.ContentBlock]) -> str | None:
        text = next((b.text for b in prompt if isinstance(b, types.TextContent)), "")
        if text == "slow":
            for i in range(200):
                await session.say(f"slow {i}\n")
                await asyncio.sleep(0.01)
        await session.think("hmm")
        await session.send(types.Plan(entries=[types.PlanEntry(content="echo", priority="high", status="pending")]))
        await session.send(types.ToolCall(tool_call_id="t1", title="Echo", status="in_progress"))
        await session.send(types.SessionUpdateToolCallUpdate(tool_call_id="t1", status="completed"))
        for i in range(5):
            await session.send(
                types.SessionUpdateAgentMessageChunk(content=types.TextContent(text=f"{text} {i}"), message_id="m1")
            )
        if text.startswith("title "):
            await session.set_title(text[6:])
        return None


class Peer:
    """One client connection to a fresh `ToyAgent` on `store`, as `principal`."""

    def __init__(self, client: ScriptedClient) -> None:
        self.client = client

    async def call(self, method: str, **params: Any) -> Any:
        reply = await self.client.call(method, params, timeout=10)
        return reply

    def updates(self, session_id: str, since: int = 0) -> list[dict[str, Any]]:
        return [
            line.object["params"]["update"]
            for line in self.client.received[since:]
            if line.object is not None
            and line.method == "session/update"
            and line.object["params"]["sessionId"] == session_id
        ]


@contextlib.asynccontextmanager
async def peer(store: SessionStore, owner: str = "token:alice") -> AsyncIterator[Peer]:
    (agent_reader, agent_writer), (client_reader, client_writer) = memory_streams()
    agent = ToyAgent(store)
    agent.principal = Principal(owner)
    server = asyncio.ensure_future(run_agent(agent, agent_reader, agent_writer))
    try:
        async with ScriptedClient(client_reader, client_writer) as client:
            reply = await client.call("initialize", {"protocolVersion": 1}, timeout=10)
            assert reply.ok, reply.error
            caps = reply.get("agentCapabilities")
            assert caps["loadSession"] is True
            assert caps["sessionCapabilities"] == {"list": {}, "delete": {}, "resume": {}, "close": {}}
            yield Peer(client)
    finally:
        await asyncio.wait_for(server, 5)


def run(body: Callable[[], Any]) -> None:
    asyncio.run(asyncio.wait_for(body(), 30))


@pytest.fixture(params=["memory", "sqlite"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], SessionStore]:
    if request.param == "memory":
        return MemoryStore
    return lambda: SqliteStore(str(tmp_path / "sessions.db"))


def _snapshot(updates: list[dict[str, Any]], session_id: str) -> SessionSnapshot:
    acc = SessionAccumulator()
    snap = None
    for update in updates:
        snap = acc.apply(ctypes.SessionNotification.from_dict({"sessionId": session_id, "update": update}))
    assert snap is not None
    return snap


def test_lifecycle_replay_and_state(store_factory: Callable[[], SessionStore]) -> None:
    async def body() -> None:
        store = store_factory()
        async with peer(store) as p:
            new = await p.call("session/new", cwd=CWD, mcpServers=[])
            sid = new.get("sessionId")
            assert new.get("modes")["currentModeId"] == "ask"
            assert [o["id"] for o in new.get("configOptions")] == ["mode", "model"]
            assert (await p.call("session/new", cwd="relative", mcpServers=[])).error_code == -32602
            mark = len(p.client.received)
            reply = await p.call("session/prompt", sessionId=sid, prompt=[{"type": "text", "text": "title hi"}])
            assert reply.get("stopReason") == "end_turn"
            live = p.updates(sid, mark)
            assert live[-1]["sessionUpdate"] == "session_info_update" and live[-1]["title"] == "hi"
            # set_mode tells both views: the mode and its config option
            mark = len(p.client.received)
            assert (await p.call("session/set_mode", sessionId=sid, modeId="code")).ok
            kinds = [u["sessionUpdate"] for u in p.updates(sid, mark)]
            assert kinds == ["current_mode_update", "config_option_update"]
            assert (await p.call("session/set_mode", sessionId=sid, modeId="nope")).error_code == -32602
            reply = await p.call("session/set_config_option", sessionId=sid, configId="mode", value="ask")
            assert {o["id"]: o["currentValue"] for o in reply.get("configOptions")} == {"mode": "ask", "model": "small"}
            reply = await p.call("session/set_config_option", sessionId=sid, configId="model", value="big")
            assert {o["id"]: o["currentValue"] for o in reply.get("configOptions")}["model"] == "big"
            bad = await p.call("session/set_config_option", sessionId=sid, configId="model", value="huge")
            assert bad.error_code == -32602
        async with peer(store) as q:  # a new connection (a restart for the SQLite store)
            mark = len(q.client.received)
            load = await q.call("session/load", sessionId=sid, cwd=CWD, mcpServers=[])
            assert load.ok
            replay = q.updates(sid, mark)
            # the replay is the conversation only: no state update, which travels in the answer
            assert [u["sessionUpdate"] for u in replay] == [
                "user_message_chunk", "agent_thought_chunk", "plan", "tool_call", "tool_call_update",
                *["agent_message_chunk"] * 5,
            ]  # fmt: skip
            assert replay == [
                {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "title hi"}}
            ] + [u for u in live if u["sessionUpdate"] != "session_info_update"]
            assert _snapshot(replay, sid).messages == _snapshot([replay[0], *live[:-1]], sid).messages
            assert load.get("modes")["currentModeId"] == "ask"
            assert {o["id"]: o["currentValue"] for o in load.get("configOptions")}["model"] == "big"
            resume = await q.call("session/resume", sessionId=sid, cwd=CWD)
            assert resume.ok and resume.get("modes")["currentModeId"] == "ask"
            listed = await q.call("session/list", cwd=CWD)
            assert [(s["sessionId"], s.get("title")) for s in listed.get("sessions")] == [(sid, "hi")]
            assert listed.get("sessions")[0]["updatedAt"].endswith("Z")
            assert (await q.call("session/list", cwd="/elsewhere")).get("sessions") == []
            assert (await q.call("session/close", sessionId=sid)).ok
            assert (await q.call("session/delete", sessionId=sid)).ok
            assert (await q.call("session/load", sessionId=sid, cwd=CWD, mcpServers=[])).error_code == -32002
            assert (await q.call("session/delete", sessionId=sid)).ok  # already deleted: silently
        await store.aclose()

    run(body)


def test_replay_folds_like_the_live_turn() -> None:
    async def body() -> None:
        store = MemoryStore()
        async with peer(store) as p:
            sid = (await p.call("session/new", cwd=CWD, mcpServers=[])).get("sessionId")
            mark = len(p.client.received)
            await p.call("session/prompt", sessionId=sid, prompt=[{"type": "text", "text": "hello"}])
            live = [u for u in p.updates(sid, mark) if u["sessionUpdate"] != "session_info_update"]
            mark = len(p.client.received)
            await p.call("session/load", sessionId=sid, cwd=CWD, mcpServers=[])
            replay = p.updates(sid, mark)
        user = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hello"}}
        watched, loaded = _snapshot([user, *live], sid), _snapshot(replay, sid)
        assert loaded.messages == watched.messages and len(loaded.messages) == 3
        assert loaded.tool_calls == watched.tool_calls and loaded.tool_calls["t1"].status == "completed"
        assert loaded.plan_entries == watched.plan_entries and len(loaded.plan_entries) == 1
        assert [m.message_id for m in loaded.agent_messages] == ["m1"] * 5

    run(body)


def test_owners_never_see_each_other() -> None:
    async def body() -> None:
        store = MemoryStore()
        async with peer(store, "token:alice") as alice, peer(store, "token:bob") as bob:
            sid = (await alice.call("session/new", cwd=CWD, mcpServers=[])).get("sessionId")
            assert (await bob.call("session/list")).get("sessions") == []
            for method, extra in [
                ("session/load", {"cwd": CWD, "mcpServers": []}),
                ("session/resume", {"cwd": CWD}),
                ("session/prompt", {"prompt": [{"type": "text", "text": "x"}]}),
                ("session/set_mode", {"modeId": "code"}),
                ("session/close", {}),
            ]:
                reply = await bob.call(method, sessionId=sid, **extra)
                assert reply.error_code == -32002, (method, reply.error)
            assert (await bob.call("session/delete", sessionId=sid)).ok  # as for an unknown one...
            assert [s["sessionId"] for s in (await alice.call("session/list")).get("sessions")] == [sid]  # ...kept

    run(body)


def test_cancel_and_close_interrupt_and_a_second_prompt_is_refused() -> None:
    async def body() -> None:
        store = MemoryStore()
        async with peer(store) as p:
            for stop in ("session/cancel", "session/close"):
                sid = (await p.call("session/new", cwd=CWD, mcpServers=[])).get("sessionId")
                turn = asyncio.ensure_future(
                    p.call("session/prompt", sessionId=sid, prompt=[{"type": "text", "text": "slow"}])
                )
                while len(p.updates(sid)) < 3:
                    await asyncio.sleep(0.01)
                second = await p.call("session/prompt", sessionId=sid, prompt=[{"type": "text", "text": "x"}])
                assert second.error_code == -32600 and "already has a prompt turn" in second.error["data"]["details"]
                if stop == "session/cancel":
                    await p.client.notify(stop, {"sessionId": sid})
                else:
                    assert (await p.call(stop, sessionId=sid)).ok
                reply = await turn
                assert reply.get("stopReason") == "cancelled"
                answered = len(p.client.received)
                await asyncio.sleep(0.05)
                assert p.updates(sid, answered) == []  # nothing after the answer
                sent = [u for u in p.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
                mark = len(p.client.received)
                await p.call("session/load", sessionId=sid, cwd=CWD, mcpServers=[])
                replayed = p.updates(sid, mark)
                assert [u for u in replayed if u["sessionUpdate"] == "agent_message_chunk"] == sent
                assert 3 <= len(sent) < 200
                # the claim was released: the session takes a new prompt
                again = await p.call("session/prompt", sessionId=sid, prompt=[{"type": "text", "text": "x"}])
                assert again.get("stopReason") == "end_turn"

    run(body)


def test_list_pages_over_many_sessions(tmp_path: Path) -> None:
    async def body() -> None:
        store = SqliteStore(str(tmp_path / "many.db"))
        async with peer(store) as p:
            made = {(await p.call("session/new", cwd=CWD, mcpServers=[])).get("sessionId") for _ in range(120)}
            await p.call("session/new", cwd="/other", mcpServers=[])
            seen: list[str] = []
            cursor = None
            pages = 0
            while True:
                params = {"cwd": CWD} if cursor is None else {"cwd": CWD, "cursor": cursor}
                page = await p.call("session/list", **params)
                seen += [s["sessionId"] for s in page.get("sessions")]
                pages += 1
                cursor = page.get("nextCursor")
                if cursor is None:
                    break
            assert pages == 3 and len(seen) == len(set(seen)) and set(seen) == made
            assert (await p.call("session/list", cursor="bogus")).error_code == -32602
        await store.aclose()

    run(body)


def test_other_schemas_generate_a_layer() -> None:
    from v2.agent import sessions as v2_sessions

    assert "session/load" not in v2_sessions.FEATURES.served
    assert {"session/new", "session/list", "session/prompt"} <= v2_sessions.FEATURES.served
