"""The session layer over a failing store (issue 27's faults), in this event loop over memory
streams: each affected request gets a JSON-RPC error saying what failed, the agent keeps
serving the other sessions, and it recovers when the store does, with nothing stored lost.

- an unwritable SQLite file (`PRAGMA query_only`, the same "readonly database" error a file
  without write permission gives; tests/test_session_stores.py makes a real one unwritable);
- a full disk mid-turn (`PRAGMA max_page_count`: SQLite's own SQLITE_FULL, what a full disk
  gives; test_session_stores.py fills a real 256 KiB tmpfs when it may mount one);
- two connections prompting one session at once, on one store object (one process) and on
  two store objects over one file (two processes' view): the second is refused with -32600;
- a foreign or corrupt file given to the echo agent's `--store`: refused at start with the
  reason, no traceback, the file left as it was.

(PostgreSQL stopped mid-turn and kill -9 mid-turn then a restart: tests/test_session_faults.py.)
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent.session_sqlite import SqliteStore
from test_sessions import CWD, Peer, peer, run

ROOT = Path(__file__).resolve().parent.parent
ECHO = ROOT / "examples" / "echo_agent.py"


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def store_error(reply: Any, *words: str) -> None:
    """`reply` is the layer's store failure: -32603 with the store's message naming `words`."""
    assert reply.error_code == -32603, reply.error
    message = str(reply.error.get("data", {}).get("message", ""))
    assert message.startswith("session store") and all(w in message for w in words), reply.error
    assert "nothing stored was lost" in message, reply.error


async def pragma(store: SqliteStore, statement: str) -> None:
    await store._call(lambda conn: conn.execute(statement))  # on the store's own connection


async def agent_texts(p: Peer, sid: str) -> list[str]:
    """The agent message chunks a load replays."""
    mark = len(p.client.received)
    assert (await p.call("session/load", sessionId=sid, cwd=CWD, mcpServers=[])).ok
    return [u["content"]["text"] for u in p.updates(sid, mark) if u["sessionUpdate"] == "agent_message_chunk"]


def test_an_unwritable_sqlite_file(tmp_path: Path) -> None:
    async def body() -> None:
        store = SqliteStore(tmp_path / "s.db")
        async with peer(store) as p:
            kept = (await p.call("session/new", cwd=CWD, mcpServers=[])).get("sessionId")
            assert (await p.call("session/prompt", sessionId=kept, prompt=text("before"))).ok
            await pragma(store, "PRAGMA query_only = ON")
            store_error(await p.call("session/new", cwd=CWD, mcpServers=[]), "not writable")
            store_error(await p.call("session/prompt", sessionId=kept, prompt=text("during")), "not writable")
            store_error(await p.call("session/set_mode", sessionId=kept, modeId="code"), "not writable")
            # reads go on: the stored session lists and loads whole
            assert [s["sessionId"] for s in (await p.call("session/list")).get("sessions")] == [kept]
            assert await agent_texts(p, kept) == [f"before {i}" for i in range(5)]
            await pragma(store, "PRAGMA query_only = OFF")  # writable again
            assert (await p.call("session/new", cwd=CWD, mcpServers=[])).ok
            assert (await p.call("session/prompt", sessionId=kept, prompt=text("after"))).ok
            assert await agent_texts(p, kept) == [f"{t} {i}" for t in ("before", "after") for i in range(5)]
        await store.aclose()

    run(body)


def test_a_full_disk_mid_turn(tmp_path: Path) -> None:
    async def body() -> None:
        store = SqliteStore(tmp_path / "s.db")
        async with peer(store) as p:
            kept, other = [(await p.call("session/new", cwd=CWD, mcpServers=[])).get("sessionId") for _ in range(2)]
            assert (await p.call("session/prompt", sessionId=kept, prompt=text("before"))).ok
            pages = await store._call(lambda conn: conn.execute("PRAGMA page_count").fetchone()[0])
            await pragma(store, f"PRAGMA max_page_count = {pages}")  # the disk is full
            big = "x" * 64_000  # recorded as the prompt's user_message_chunk: needs new pages
            mark = len(p.client.received)
            store_error(await p.call("session/prompt", sessionId=kept, prompt=text(big)), "disk is full")
            sent = [u for u in p.updates(kept, mark) if u["sessionUpdate"] == "agent_message_chunk"]
            assert len(sent) == 5  # the turn ran and was sent live; its recording failed
            # the other session is served: it loads, lists, and is answered (an error, not a hang)
            assert await agent_texts(p, other) == []
            assert len((await p.call("session/list")).get("sessions")) == 2
            store_error(await p.call("session/prompt", sessionId=other, prompt=text(big)), "disk is full")
            await pragma(store, "PRAGMA max_page_count = 1073741823")  # space again
            # the failed turn's claim was released: the session takes a prompt at once
            assert (await p.call("session/prompt", sessionId=kept, prompt=text("after"))).ok
            # nothing stored was lost; the turn in flight when the disk filled was
            assert await agent_texts(p, kept) == [f"{t} {i}" for t in ("before", "after") for i in range(5)]
        await store.aclose()
        with sqlite3.connect(tmp_path / "s.db") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.close()

    run(body)


@pytest.mark.parametrize("stores", ["one store object", "two store objects on one file"])
def test_two_connections_prompting_one_session_at_once(tmp_path: Path, stores: str) -> None:
    """One process's two connections share its registry of running turns; two processes share
    only the file, where the claim refuses the second (two store objects stand in for them)."""

    async def body() -> None:
        first = SqliteStore(tmp_path / "s.db")
        second = first if stores == "one store object" else SqliteStore(tmp_path / "s.db")
        async with peer(first) as a, peer(second) as b:
            sid = (await a.call("session/new", cwd=CWD, mcpServers=[])).get("sessionId")
            turn = asyncio.ensure_future(a.call("session/prompt", sessionId=sid, prompt=text("slow")))
            while len(a.updates(sid)) < 3:  # a's turn is running
                await asyncio.sleep(0.01)
            refused = await b.call("session/prompt", sessionId=sid, prompt=text("too"))
            assert refused.error_code == -32600, refused.error
            assert "already has a prompt turn running" in refused.error["data"]["details"]
            other = (await b.call("session/new", cwd=CWD, mcpServers=[])).get("sessionId")
            assert (await b.call("session/prompt", sessionId=other, prompt=text("meanwhile"))).ok
            await a.client.notify("session/cancel", {"sessionId": sid})
            assert (await turn).get("stopReason") == "cancelled"
            again = await b.call("session/prompt", sessionId=sid, prompt=text("now"))
            assert again.ok and again.get("stopReason") == "end_turn", again.error
        for store in {first, second}:
            await store.aclose()

    run(body)


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.close()


@pytest.mark.parametrize("kind", ["corrupt", "not SQLite", "another program's database"])
def test_the_echo_agent_refuses_a_corrupt_or_foreign_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "s.db"
    if kind == "corrupt":
        path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    elif kind == "not SQLite":
        path.write_bytes(b"not a database at all\n" * 50)
    else:
        _foreign(path)
    content = path.read_bytes()
    done = subprocess.run(
        [sys.executable, str(ECHO), "--store", f"sqlite:{path}"], input=b"", capture_output=True, timeout=60
    )
    error = done.stderr.decode()
    assert done.returncode == 1 and error.startswith("echo_agent: "), done
    assert "left as it is" in error and "Traceback" not in error, error
    assert path.read_bytes() == content
