"""`check_store(store)`: the `SessionStore` protocol's conformance checks, for any store.

Every bundled store passes them (`MemoryStore`, `SqliteStore`, `PostgresStore`); run them
against your own (Redis, DynamoDB, ...) in your test suite::

    await check_store(MyRedisStore(...))

A coroutine: it raises `AssertionError` naming the first rule the store broke. It works on a
store that already holds sessions (its owners and ids are fresh random names) and deletes
what it created; it does not close the store.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..session_store import SessionExists, SessionRecord, SessionStore, holder_id

__all__ = ["check_store"]

_Create = Callable[[SessionRecord], Awaitable[SessionRecord]]
_Make = Callable[..., SessionRecord]
_REPLAY_ENTRIES = 1234  # more than one read batch of every bundled store


def _stamp(second: int) -> str:
    return f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}.000000Z"


def _check(ok: bool, rule: str) -> None:
    if not ok:
        raise AssertionError(f"session store broke a rule of the protocol: {rule}")


def _dead_holder() -> str:
    """A holder name of this host whose process has ended."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    host, _, rest = holder_id().partition(":")
    return f"{host}:{child.stdout.strip()}:{rest.partition(':')[2]}"


async def check_store(store: SessionStore) -> None:
    """Run every check against `store`; `AssertionError` at the first one it fails."""
    tag = uuid.uuid4().hex[:12]
    alice, bob = f"check-{tag}-alice", f"check-{tag}-bob"
    made: list[tuple[str, str]] = []

    def record(owner: str, n: int, *, cwd: str = "/work/a", updated: int = 0) -> SessionRecord:
        return SessionRecord(
            owner=owner,
            session_id=f"sess-{tag}-{n:03d}",
            cwd=cwd,
            created_at=_stamp(0),
            updated_at=_stamp(updated),
            title=None,
            state={"mode": "ask", "n": n},
        )

    async def create(rec: SessionRecord) -> SessionRecord:
        await store.create(rec)
        made.append((rec.owner, rec.session_id))
        return rec

    try:
        await _records(store, create, record, alice, bob)
        await _entries(store, create, record, alice, bob)
        await _listing(store, create, record, alice, bob)
        await _claims(store, create, record, alice, bob)
        await _deletion(store, create, record, alice, bob)
    finally:
        for owner, session_id in made:
            await store.delete(owner, session_id)


async def _records(
    store: SessionStore, create: _Create, record: _Make, alice: str, bob: str
) -> None:
    rec = await create(record(alice, 1))
    got = await store.get(alice, rec.session_id)
    _check(got is not None and got.session_id == rec.session_id, "get returns a created session")
    assert got is not None
    _check(
        (got.owner, got.cwd, got.created_at, got.updated_at, got.title)
        == (rec.owner, rec.cwd, rec.created_at, rec.updated_at, rec.title),
        "get returns the columns create stored",
    )
    _check(
        dict(got.state) == {"mode": "ask", "n": 1} and got.entries == 0,
        "a new session has its state verbatim and no entries",
    )
    _check(await store.get(bob, rec.session_id) is None, "get of another owner's session is None")
    _check(
        await store.get(alice, rec.session_id + "-absent") is None,
        "get of an absent session is None",
    )
    for dup in (rec, record(bob, 1)):
        try:
            await store.create(dup)
        except SessionExists:
            continue
        raise AssertionError(
            "session store broke a rule of the protocol: "
            "create of a taken id (any owner) raises SessionExists"
        )


async def _entries(
    store: SessionStore, create: _Create, record: _Make, alice: str, bob: str
) -> None:
    rec = await create(record(alice, 2))
    sid = rec.session_id
    first: list[Mapping[str, Any]] = [
        {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": 'héllo ✓ \u2028 "q"'},
        }
    ]
    saved = await store.save(
        alice,
        sid,
        updated_at=_stamp(5),
        title="Hello",
        state={"mode": "code", "nested": {"a": [1, 2.5, None, True]}},
        entries=first,
    )
    _check(
        saved is not None
        and saved.entries == 1
        and saved.title == "Hello"
        and saved.updated_at == _stamp(5),
        "save returns the new record",
    )
    assert saved is not None
    _check(
        dict(saved.state) == {"mode": "code", "nested": {"a": [1, 2.5, None, True]}},
        "save keeps the state verbatim",
    )
    many = [
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": str(i)}}
        for i in range(_REPLAY_ENTRIES)
    ]
    saved = await store.save(
        alice, sid, updated_at=_stamp(6), title="Hello", state={}, entries=many
    )
    _check(
        saved is not None and saved.entries == 1 + _REPLAY_ENTRIES,
        "save appends to the stored entries",
    )
    got = [dict(e) async for e in store.replay(alice, sid)]
    _check(got == [*first, *many], "replay gives every entry verbatim, oldest first")
    _check(
        [e async for e in store.replay(bob, sid)] == [],
        "replay of another owner's session is empty",
    )
    _check(
        await store.save(bob, sid, updated_at=_stamp(9), title="x", state={}, entries=first)
        is None,
        "save to another owner's session returns None",
    )
    again = await store.get(alice, sid)
    _check(
        again is not None and again.entries == 1 + _REPLAY_ENTRIES and again.title == "Hello",
        "a refused save writes nothing",
    )
    _check(
        await store.save(alice, sid + "-absent", updated_at=_stamp(9), title=None, state={})
        is None,
        "save to an absent session returns None",
    )
    empty = await store.save(alice, sid, updated_at=_stamp(7), title=None, state={"mode": "ask"})
    _check(
        empty is not None and empty.entries == 1 + _REPLAY_ENTRIES and empty.title is None,
        "save with no entries sets the columns only",
    )


async def _listing(
    store: SessionStore, create: _Create, record: _Make, alice: str, bob: str
) -> None:
    owner = alice + "-list"
    # 7 sessions: updated 3,3,3,2,2,1,0 seconds; two cwds
    stamps = [3, 3, 3, 2, 2, 1, 0]
    recs = [
        await create(record(owner, 10 + i, cwd="/p/x" if i % 2 else "/p/y", updated=s))
        for i, s in enumerate(stamps)
    ]
    await create(record(bob + "-list", 30, cwd="/p/x", updated=9))
    expected = sorted(recs, key=lambda r: r.session_id)
    expected.sort(key=lambda r: r.updated_at, reverse=True)
    seen: list[str] = []
    after: str | None = None
    for _ in range(10):
        page = await store.list(owner, after=after, limit=3)
        _check(len(page.sessions) <= 3, "list returns at most `limit` sessions")
        seen += [r.session_id for r in page.sessions]
        after = page.next_cursor
        if after is None:
            break
    _check(
        seen == [r.session_id for r in expected],
        "list pages cover the owner's sessions once, newest updated_at first, ties by id",
    )
    whole = await store.list(owner, limit=50)
    _check(whole.next_cursor is None and len(whole.sessions) == 7, "the last page has no cursor")
    exact = await store.list(owner, limit=7)
    _check(exact.next_cursor is None, "a page that ends exactly at the last session has no cursor")
    xs = await store.list(owner, cwd="/p/x", limit=50)
    _check(
        [r.session_id for r in xs.sessions] == [r.session_id for r in expected if r.cwd == "/p/x"],
        "list with cwd gives only that cwd's sessions",
    )
    _check(
        (await store.list(owner, cwd="/p", limit=50)).sessions == [],
        "the cwd filter is exact, not a prefix",
    )
    _check(
        all(r.owner == owner for r in whole.sessions), "list never gives another owner's sessions"
    )
    for bad in ("not a cursor", ""):
        try:
            await store.list(owner, after=bad)
        except ValueError:
            continue
        raise AssertionError(
            "session store broke a rule of the protocol: "
            f"list with a cursor it never gave ({bad!r}) raises ValueError"
        )
    try:
        await store.list(owner, limit=0)
    except ValueError:
        pass
    else:
        raise AssertionError(
            "session store broke a rule of the protocol: list with limit < 1 raises ValueError"
        )


async def _claims(
    store: SessionStore, create: _Create, record: _Make, alice: str, bob: str
) -> None:
    sid = (await create(record(alice, 40))).session_id
    one, two = holder_id(), holder_id()
    _check(await store.claim(alice, sid, one), "claim of an unclaimed session succeeds")
    _check(not await store.claim(alice, sid, two), "claim of a session another holder holds fails")
    _check(await store.claim(alice, sid, one), "the holder renews its own claim")
    _check(not await store.claim(bob, sid, two), "claim of another owner's session fails")
    await store.release(alice, sid, two)
    _check(not await store.claim(alice, sid, two), "release by a non-holder leaves the claim")
    await store.release(alice, sid, one)
    _check(await store.claim(alice, sid, two), "after release another holder may claim")
    await store.release(alice, sid, two)
    _check(await store.claim(alice, sid, one, ttl=0.2), "a short claim is taken")
    await asyncio.sleep(0.5)
    _check(await store.claim(alice, sid, two), "an expired claim may be taken by another holder")
    await store.release(alice, sid, two)
    dead = await asyncio.to_thread(_dead_holder)
    _check(await store.claim(alice, sid, dead, ttl=600), "a claim is taken for any holder name")
    _check(
        await store.claim(alice, sid, one),
        "a live claim of a dead process on this host may be taken",
    )
    await store.release(alice, sid, one)


async def _deletion(
    store: SessionStore, create: _Create, record: _Make, alice: str, bob: str
) -> None:
    rec = await create(record(alice, 50))
    sid = rec.session_id
    await store.save(
        alice,
        sid,
        updated_at=_stamp(8),
        title=None,
        state={},
        entries=[{"sessionUpdate": "plan", "entries": []}],
    )
    _check(not await store.delete(bob, sid), "delete of another owner's session returns False")
    _check(await store.get(alice, sid) is not None, "a refused delete removes nothing")
    _check(await store.delete(alice, sid), "delete of a stored session returns True")
    _check(await store.get(alice, sid) is None, "a deleted session is gone")
    _check(
        [e async for e in store.replay(alice, sid)] == [], "a deleted session's entries are gone"
    )
    _check(not await store.delete(alice, sid), "delete of an absent session returns False")
    await store.create(rec)  # the id may be used again, with no entries from before
    again = await store.get(alice, sid)
    _check(
        again is not None
        and again.entries == 0
        and [e async for e in store.replay(alice, sid)] == [],
        "a re-created session starts with no entries",
    )
