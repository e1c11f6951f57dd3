#!/usr/bin/env python3
"""The session layer's own costs (issue 27), each a ratio measured in one run, in one process
(agent and client in one event loop over memory streams, so both sides' CPU is counted, as a
client on the same host would add it):

- **record**: a turn of `--chunks` (1,000) agent_message_chunk updates through `SessionAgent`
  on `SqliteStore` and on `PostgresStore`, against the same turn from a plain `Agent` with no
  store (it only sends them). CPU of this process (`time.process_time`), `--repeat` rounds of
  one turn of each, interleaved; the ratio is the median over rounds of turn / no-store turn;
  PostgreSQL's own server CPU is another process and not counted. Goals: <= 1.10x (SQLite),
  <= 1.25x (PostgreSQL).
- **replay**: `session/load` of a session holding `--updates` (10,000) updates, against a turn
  sending the same updates live. CPU of this process (SQLite reads in its worker thread are
  counted), best of `--repeat`: wall time on a shared machine measures the neighbours. Goal: <= 2x.
- **memory**: the layer's Python heap (tracemalloc) while it serves list pages, loads and new
  sessions over a store holding 1,000 sessions, then 100,000 (SQLite, and PostgreSQL on the
  benchmark's own cluster): flat means no in-process copy of the sessions. Goal: the peak at
  100,000 within 1.10x of the peak at 1,000.
- **list**: `session/list` through the layer and the connection over those 100,000 sessions,
  `--pages` pages of 50 walked by cursor, wall time of each (what a client waits). Goal: <= 20 ms
  a page, on SQLite and PostgreSQL.

    python benchmarks/bench_sessions.py [--chunks 1000] [--updates 10000] [--sessions 100000] [--no-pg]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))
sys.path.insert(0, str(ROOT / "tests"))

from agent import PROTOCOL_VERSION, Agent, run_agent, types  # noqa: E402
from agent.helpers import update_agent_message_text  # noqa: E402
from agent.session_sqlite import SqliteStore  # noqa: E402
from agent.session_store import MemoryStore, SessionStore  # noqa: E402
from agent.sessions import Session, SessionAgent  # noqa: E402
from agent.testing import ScriptedClient, memory_streams  # noqa: E402

TEXT = "token "  # a model's chunk: a word or two


class Plain(Agent):
    """The same turn with no session layer and no store: it only sends the chunks."""

    chunks = 1000

    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        return types.InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
        return types.AuthenticateResponse()

    async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
        # an id like the layer's: the client's parse of each line depends on its digits
        return types.NewSessionResponse(session_id=f"sess_{uuid.uuid4().hex}")

    async def session_cancel(self, params: types.CancelNotification) -> None:
        return None

    async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
        for _ in range(self.chunks):
            await self.peer.session_update(session_id=params.session_id, update=update_agent_message_text(TEXT))
        return types.PromptResponse(stop_reason="end_turn")


class Layered(SessionAgent):
    chunks = 1000

    async def turn(self, session: Session, prompt: list[types.ContentBlock]) -> None:
        for _ in range(self.chunks):
            await session.say(TEXT)


async def serve(agent: Agent, body: Callable[[ScriptedClient], Awaitable[Any]]) -> Any:
    async with connected(agent) as client:
        return await body(client)


@asynccontextmanager
async def connected(agent: Agent) -> AsyncIterator[ScriptedClient]:
    """A client connection to `agent` in this event loop, initialized."""
    (ar, aw), (cr, cw) = memory_streams()
    server = asyncio.ensure_future(run_agent(agent, ar, aw))
    client = ScriptedClient(cr, cw, None, close_timeout=0.5)
    client.start()
    try:
        reply = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, 30)
        assert reply.ok, reply.describe()
        yield client
    finally:
        await client.connection.close()
        await asyncio.wait_for(server, 10)
        aw.close()
        await client.aclose()


async def new_session(client: ScriptedClient) -> str:
    reply = await client.call("session/new", {"cwd": "/tmp", "mcpServers": []}, 30)
    assert reply.ok, reply.describe()
    return str(reply.get("sessionId"))


async def timed_turn(client: ScriptedClient, session_id: str, clock: Callable[[], float]) -> float:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
    gc.collect()  # not timed: a collection owed by an earlier turn is not this one's cost
    began = clock()
    reply = await client.call("session/prompt", params, 120)
    spent = clock() - began
    assert reply.ok, reply.describe()
    return spent


async def turn_cost(agent: Agent, repeat: int, clock: Callable[[], float] = time.process_time) -> float:
    return min((await turn_costs({"agent": agent}, repeat, clock))["agent"])


async def turn_costs(
    agents: dict[str, Agent], repeat: int, clock: Callable[[], float] = time.process_time
) -> dict[str, list[float]]:
    """The CPU time of each of `repeat` turns of each agent, their turns interleaved (a round
    is one turn of each agent, each on its own connection and session), so a change in the
    machine's load falls on all of a round alike."""
    async with AsyncExitStack() as stack:
        sessions = {}
        for name, agent in agents.items():
            client = await stack.enter_async_context(connected(agent))
            sessions[name] = (client, await new_session(client))
        times: dict[str, list[float]] = {name: [] for name in agents}
        for _ in range(repeat):
            for name, (client, session_id) in sessions.items():
                times[name].append(await timed_turn(client, session_id, clock))
        return times


def paired(times: list[float], base: list[float]) -> float:
    """The median over rounds of a turn's CPU over the same round's baseline turn."""
    return statistics.median(t / b for t, b in zip(times, base, strict=True))


async def replay_cost(store: SessionStore, updates: int, repeat: int) -> tuple[float, float]:
    Layered.chunks = Plain.chunks = updates
    live = await turn_cost(Plain(), repeat)

    async def body(client: ScriptedClient) -> float:
        session_id = await new_session(client)
        await timed_turn(client, session_id, time.process_time)  # the stored session
        params = {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}
        best = float("inf")
        for _ in range(repeat):
            began = time.process_time()
            reply = await client.call("session/load", params, 120)
            best = min(best, time.process_time() - began)
            assert reply.ok, reply.describe()
        return best

    return live, float(await serve(Layered(store), body))


async def memory_peak(store: SessionStore) -> float:
    """The heap peak (KiB) of serving 20 list pages, 20 loads and 20 new sessions."""

    async def body(client: ScriptedClient) -> float:
        sessions = [await new_session(client) for _ in range(5)]
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        cursor = None
        for _ in range(20):
            reply = await client.call("session/list", {} if cursor is None else {"cursor": cursor}, 30)
            assert reply.ok, reply.describe()
            cursor = reply.get("nextCursor")
        for i in range(20):
            params = {"sessionId": sessions[i % 5], "cwd": "/tmp", "mcpServers": []}
            reply = await client.call("session/load", params, 30)
            assert reply.ok, reply.describe()
            await new_session(client)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        return peak / 1024

    return float(await serve(Layered(store), body))


async def list_latency(store: SessionStore, pages: int) -> list[float]:
    """Wall ms of each `session/list` page (50 sessions) through the layer and the connection,
    walked by cursor from the newest: the latency a client sees (the store's work included)."""

    async def body(client: ScriptedClient) -> list[float]:
        times, cursor = [], None
        for _ in range(pages):
            params = {} if cursor is None else {"cursor": cursor}
            began = time.perf_counter()
            reply = await client.call("session/list", params, 30)
            times.append((time.perf_counter() - began) * 1000)
            assert reply.ok and len(reply.get("sessions")) == 50, reply.describe()
            cursor = reply.get("nextCursor")
        return times

    return list(await serve(Layered(store), body))


def line(name: str, value: float, base: float, goal: float) -> None:
    ratio = value / base
    verdict = "meets" if ratio <= goal else f"misses by {(ratio / goal - 1) * 100:.0f}%"
    print(f"{name:<44} {ratio:5.2f}x  (goal <= {goal:.2f}x: {verdict})")


async def main_async(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-sessions-"))
    cluster = None
    try:
        Plain.chunks = Layered.chunks = args.chunks
        sqlite = SqliteStore(tmp / "record.db")
        agents: dict[str, Agent] = {"none": Plain(), "memory": Layered(MemoryStore()), "sqlite": Layered(sqlite)}
        pg = None
        if not args.no_pg:
            from agent.session_postgres import PostgresStore
            from pg_cluster import pg_cluster_or_skip

            url = args.pg_url
            if url is None:
                cluster = pg_cluster_or_skip()
                url = cluster.new_database()
            pg = await PostgresStore.open(url)
            agents["postgresql"] = Layered(pg)
        times = await turn_costs(agents, args.repeat)
        plain = times["none"]
        shown = ", ".join(f"{name} {min(value) * 1000:.1f} ms" for name, value in times.items())
        print(f"record a {args.chunks}-chunk turn, CPU of this process (best of {args.repeat}): {shown}")
        print(f"ratios: the median over {args.repeat} interleaved rounds of the round's turn / its no-store turn")
        line("record, MemoryStore / no store (CPU)", paired(times["memory"], plain), 1.0, 1.10)
        line("record, SQLite / no store (CPU)", paired(times["sqlite"], plain), 1.0, 1.10)
        if pg is not None:
            line("record, PostgreSQL / no store (CPU)", paired(times["postgresql"], plain), 1.0, 1.25)
            await pg.aclose()
        if args.only_record:
            return
        live, replay = await replay_cost(sqlite, args.updates, args.repeat)
        print(f"{args.updates} updates: live {live * 1000:.1f} ms CPU, replayed by session/load {replay * 1000:.1f} ms")
        line("replay / live (CPU)", replay, live, 2.0)
        sqlite._close()
        import bench_store
        from agent.principal import LOCAL_PRINCIPAL

        bench_store.OWNER = LOCAL_PRINCIPAL.id  # the owner an in-process connection is
        # PostgreSQL: a fresh database per size, so only on the benchmark's own cluster
        kinds = ["sqlite"] if cluster is None else ["sqlite", "postgresql"]
        for kind in kinds:
            peaks, stores = [], []
            for n in (1000, args.sessions):
                if kind == "sqlite":
                    store: SessionStore = SqliteStore(tmp / f"mem-{n}.db")
                    bench_store.fill_sqlite(store, n)  # type: ignore[arg-type]
                else:
                    from agent.session_postgres import PostgresStore

                    assert cluster is not None
                    db = cluster.new_database()
                    store = await PostgresStore.open(db)
                    await bench_store.fill_postgres(db, n)
                peaks.append(await memory_peak(store))
                stores.append(store)
            pages = await list_latency(stores[1], args.pages)
            for store in stores:
                await store.aclose()
            print(f"{kind}: layer heap peak {peaks[0]:.0f} KiB at 1,000 sessions, {peaks[1]:.0f} at {args.sessions:,}")
            line(f"memory on {kind}, {args.sessions:,} / 1,000 sessions", peaks[1], peaks[0], 1.10)
            print(
                f"{kind}: session/list over {args.sessions:,} sessions, {args.pages} pages of 50 by cursor:"
                f" median {statistics.median(pages):.2f} ms, max {max(pages):.2f} ms (goal <= 20 ms a page)"
            )
    finally:
        if cluster is not None:
            cluster.remove()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=10000)
    parser.add_argument("--sessions", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=25)
    parser.add_argument("--pages", type=int, default=200, help="session/list pages walked by cursor")
    parser.add_argument("--pg-url")
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--only-record", action="store_true", help="the record case only")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
