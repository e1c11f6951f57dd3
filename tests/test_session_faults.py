"""The echo agent on a persistent store, as issue 27 §5 and its faults want it, with real
processes (stdio and `--listen`) and a real PostgreSQL (one cluster for the module):

- `--store sqlite:PATH` over stdio: a kill -9 mid-turn, a restart, and the session loads with
  every finished turn (and at most a prefix of the one in flight); it takes a new turn at once
  (the dead process's claim does not block it);
- two `--listen` processes on one store (SQLite file, then PostgreSQL database) serve each
  other's sessions, and one killed with -9 and restarted serves them all again;
- PostgreSQL stopped mid-turn: that request gets a JSON-RPC error saying what failed, the agent
  keeps answering (other sessions get errors, not hangs), and once the server is back every
  session works again with nothing already stored lost.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from agent.testing.runners import ScriptedClient, agent_process
from client.remote_client import open_transport
from client.remote_options import RemoteOptions
from client.testing import ScriptedClient as RemoteClient
from pg_cluster import PgCluster, pg_cluster  # noqa: F401  (the module's cluster fixture)

ROOT = Path(__file__).resolve().parent.parent
ECHO = ROOT / "examples" / "echo_agent.py"
WAIT = 20.0  # seconds for any one answer (a loaded CI machine)
SLOW = [f"slow {i}/20\n" for i in range(1, 21)]


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 120))


def texts(client: Any, session_id: str, start: int = 0, end: int | None = None) -> list[tuple[str, str]]:
    """The (kind, text) of the message chunks `client` got for the session, lines start..end."""
    out = []
    for line in client.received[:]:
        if line.method != "session/update" or line.session_id() != session_id:
            continue
        if line.index < start or (end is not None and line.index >= end):
            continue
        update = line.get("params")["update"]
        if update["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk"):
            out.append((update["sessionUpdate"][:4], update["content"].get("text", "")))
    return out


async def hello(client: Any) -> None:
    reply = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, WAIT)
    assert reply.ok, reply.describe()


async def new(client: Any, cwd: str) -> str:
    reply = await client.call("session/new", {"cwd": cwd, "mcpServers": []}, WAIT)
    assert reply.ok, reply.describe()
    return str(reply.get("sessionId"))


async def prompt(client: Any, session_id: str, text: str) -> Any:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return await client.call("session/prompt", params, WAIT)


async def load(client: Any, session_id: str, cwd: str) -> list[tuple[str, str]]:
    """The replay of a session/load (message chunks before its answer)."""
    start = len(client.lines)
    reply = await client.call("session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": []}, WAIT)
    assert reply.ok, reply.describe()
    return texts(client, session_id, start, reply.response.index)


async def chunks_seen(client: Any, session_id: str, count: int) -> None:
    while sum(text.startswith("slow ") for _, text in texts(client, session_id)) < count:
        await asyncio.sleep(0.01)


@asynccontextmanager
async def stdio_agent(store: str) -> AsyncIterator[tuple[Any, ScriptedClient]]:
    async with agent_process([sys.executable, str(ECHO), "--store", store], 1.0) as (child, tail, _):
        client = ScriptedClient(child.stdout, child.stdin, None, close_timeout=0.5)
        client.start()
        try:
            yield child, client
        finally:
            await client.connection.close()
    await client.aclose()


@asynccontextmanager
async def remote(url: str) -> AsyncIterator[RemoteClient]:
    transport = await open_transport(url, RemoteOptions(open_timeout=WAIT))
    client = RemoteClient(transport.reader, transport.writer, None, close_timeout=0.5)
    client.start()
    try:
        await hello(client)
        yield client
    finally:
        await client.connection.close()
        await transport.aclose()
        await client.aclose()


class Listening:
    """`echo_agent.py --listen 127.0.0.1:0 --store STORE`, its WebSocket and HTTP URLs."""

    def __init__(self, store: str) -> None:
        argv = [sys.executable, str(ECHO), "--listen", "127.0.0.1:0", "--store", store]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("listening "):
            self.kill()
            pytest.fail(f"echo_agent --listen did not start: {line!r}")
        self.ws, self.http = line.split()[1:3]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


@pytest.fixture
def listening() -> Iterator[Callable[[str], Listening]]:
    started: list[Listening] = []

    def start(store: str) -> Listening:
        started.append(Listening(store))
        return started[-1]

    yield start
    for server in started:
        server.kill()


def test_sqlite_sessions_survive_kill_9_mid_turn_over_stdio(tmp_path: Path) -> None:
    store, cwd = f"sqlite:{tmp_path / 'sessions.db'}", str(tmp_path)

    async def scenario() -> None:
        async with stdio_agent(store) as (child, client):
            await hello(client)
            session_id = await new(client, cwd)
            assert (await prompt(client, session_id, "hello")).ok
            slow = asyncio.ensure_future(prompt(client, session_id, "slow"))
            await chunks_seen(client, session_id, 3)
            os.kill(child.pid, signal.SIGKILL)  # mid-turn
            assert not (await slow).ok
        async with stdio_agent(store) as (_, client):
            await hello(client)
            replay = await load(client, session_id, cwd)
            assert replay[:3] == [("user", "hello"), ("agen", "hello"), ("user", "slow")], replay
            assert [text for _, text in replay[3:]] == SLOW[: len(replay) - 3]  # a prefix of the lost turn
            again = await prompt(client, session_id, "again")  # the dead holder's claim is no obstacle
            assert again.ok and again.get("stopReason") == "end_turn", again.describe()

    run(scenario())


def _shared(store: str, cwd: str, listening: Callable[[str], Listening]) -> None:
    a, b = listening(store), listening(store)

    async def scenario() -> None:
        async with remote(a.ws) as client:
            session_id = await new(client, cwd)
            assert (await prompt(client, session_id, "on a")).ok
        async with remote(b.http) as client:  # another process, the other profile
            assert await load(client, session_id, cwd) == [("user", "on a"), ("agen", "on a")]
            assert (await prompt(client, session_id, "on b")).ok
        a.kill()  # kill -9
        restarted = listening(store)
        async with remote(restarted.ws) as client:
            replay = await load(client, session_id, cwd)
            assert replay == [("user", "on a"), ("agen", "on a"), ("user", "on b"), ("agen", "on b")]

    run(scenario())


def test_two_listen_processes_share_one_sqlite_file(tmp_path: Path, listening: Callable[[str], Listening]) -> None:
    _shared(f"sqlite:{tmp_path / 'sessions.db'}", str(tmp_path), listening)


def test_two_listen_processes_share_one_postgresql(
    pg_cluster: PgCluster, tmp_path: Path, listening: Callable[[str], Listening]  # noqa: F811
) -> None:
    _shared(pg_cluster.new_database(), str(tmp_path), listening)


def test_postgresql_stopped_mid_turn(pg_cluster: PgCluster, tmp_path: Path) -> None:  # noqa: F811
    """Last in the module: it stops the module's cluster (and starts it again)."""
    store, cwd = pg_cluster.new_database(), str(tmp_path)

    async def scenario() -> None:
        async with stdio_agent(store) as (_, client):
            await hello(client)
            first, other = await new(client, cwd), await new(client, cwd)
            assert (await prompt(client, first, "kept")).ok
            slow = asyncio.ensure_future(prompt(client, first, "slow"))
            await chunks_seen(client, first, 2)
            await asyncio.to_thread(pg_cluster.stop)
            try:
                failed = await slow
                assert not failed.ok and failed.response is not None, failed.describe()
                message = str(failed.error.get("message", "")) + str(failed.error.get("data", ""))
                assert "store" in message.lower(), failed.error
                down = await prompt(client, other, "while down")  # an answer, not a hang
                assert not down.ok and down.response is not None, down.describe()
            finally:
                await asyncio.to_thread(pg_cluster.start)
            back = await prompt(client, other, "back")
            assert back.ok, back.describe()
            replay = await load(client, first, cwd)
            assert replay[:2] == [("user", "kept"), ("agen", "kept")], replay  # nothing stored was lost
            assert (await prompt(client, first, "after")).ok

    run(scenario())
