#!/usr/bin/env python3
"""Session stores: `list` over 100,000 sessions, and the cost of recording (append) batches.

For `SqliteStore` (a file in a temp dir) and `PostgresStore` (a throwaway cluster started
from `pg_config --bindir`, as tests/pg_cluster.py does, or `--pg-url` for a server of yours):

- **list**: one owner with `--sessions` sessions (default 100,000) over 10 cwds. The table is
  filled in one bulk statement (setup, not measured); then the first page of 50, pages walked
  by cursor through the whole owner, a page from a cursor at the very end, and pages with a
  cwd filter. Goal (issue 27): <= 20 ms per page of 50 on both stores.
- **append**: `save` of batches of 1, 10 and 100 agent_message_chunk entries (~200 chars each)
  to one session, per save and per entry. A turn's recording cost depends on how the layer
  batches, so the figure per entry at each batch size is what to read.

    python benchmarks/bench_store.py [--sessions 100000] [--pages 200] [--pg-url URL] [--no-pg]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))
sys.path.insert(0, str(ROOT / "tests"))

from agent.session_postgres import PostgresStore  # noqa: E402
from agent.session_sqlite import SqliteStore  # noqa: E402
from agent.session_store import SessionRecord, SessionStore  # noqa: E402

OWNER = "local:bench"
TEXT = ("The quick brown fox jumps over the lazy dog; " * 5)[:200]
STAMP = "2026-01-01T00:00:00.000000Z"


def updated(i: int) -> str:
    return f"2026-01-01T{i // 36000:02d}:{i // 600 % 60:02d}:{i // 10 % 60:02d}.000000Z"


def fill_sqlite(store: SqliteStore, n: int) -> None:
    # %06d: updated_at strings sort as text; many ties on purpose (ten sessions per second)
    rows = [
        (f"sess-{i:07d}", OWNER, f"/work/p{i % 10}", STAMP, updated(i), None, "{}")
        for i in range(n)
    ]
    conn = store._conn
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO acp_sessions (session_id, owner, cwd, created_at, updated_at, title, state, entries)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
        rows,
    )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")


async def fill_postgres(url: str, n: int) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO acp_sessions (session_id, owner, cwd, created_at, updated_at, title, state, entries)"
            " SELECT 'sess-' || lpad(i::text, 7, '0'), %s, '/work/p' || (i %% 10), %s,"
            " '2026-01-01T' || lpad((i / 36000)::text, 2, '0') || ':' || lpad((i / 600 %% 60)::text, 2, '0')"
            " || ':' || lpad((i / 10 %% 60)::text, 2, '0') || '.000000Z', NULL, '{}', 0"
            " FROM generate_series(0, %s) AS i",
            [OWNER, STAMP, n - 1],
        )
        await conn.execute("ANALYZE acp_sessions")


async def time_list(store: SessionStore, pages: int) -> dict[str, float]:
    async def one(**kw: Any) -> tuple[float, str | None]:
        t0 = time.perf_counter()
        page = await store.list(OWNER, limit=50, **kw)
        return (time.perf_counter() - t0) * 1000, page.next_cursor

    first = [(await one())[0] for _ in range(20)]
    walked: list[float] = []
    cursor: str | None = None
    while len(walked) < pages:
        ms, cursor = await one(after=cursor)
        walked.append(ms)
        if cursor is None:
            break
    # a cursor at the far end (oldest first-written sessions): 54 sessions after it
    end_cursor = "2026-01-01T00:00:05.000000Z|sess-0000055"
    deep = [(await one(after=end_cursor))[0] for _ in range(20)]
    cwd = [(await one(cwd="/work/p3"))[0] for _ in range(20)]
    return {
        "first page median": statistics.median(first),
        f"pages walked ({len(walked)}) median": statistics.median(walked),
        f"pages walked ({len(walked)}) max": max(walked),
        "page at the end median": statistics.median(deep),
        "cwd-filtered page median": statistics.median(cwd),
    }


async def time_append(store: SessionStore, rounds: int = 200) -> dict[str, float]:
    await store.create(SessionRecord(OWNER, "append-target", "/work", STAMP, STAMP))
    out: dict[str, float] = {}
    for batch in (1, 10, 100):
        entries = [
            {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": {"type": "text", "text": TEXT}}
        ] * batch
        n = max(20, rounds // batch * 4)
        t0 = time.perf_counter()
        for _ in range(n):
            await store.save(
                OWNER, "append-target", updated_at=STAMP, title=None, state={"mode": "code"}, entries=entries
            )
        per_save = (time.perf_counter() - t0) / n * 1e6
        out[f"save of {batch:3d}: us/save"] = per_save
        out[f"save of {batch:3d}: us/entry"] = per_save / batch
    return out


def show(name: str, figures: dict[str, float], unit: str) -> None:
    print(f"\n{name}")
    for key, value in figures.items():
        print(f"  {key:34s} {value:10.2f} {unit if 'us/' not in key else ''}")


async def run_sqlite(n: int, pages: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="acp-bench-store-"))
    try:
        store = SqliteStore(folder / "s.db")
        t0 = time.perf_counter()
        fill_sqlite(store, n)
        print(f"SQLite: {n:,} sessions filled in {time.perf_counter() - t0:.1f} s (setup)")
        show(f"SqliteStore list, page of 50 over {n:,} sessions (goal <= 20 ms)", await time_list(store, pages), "ms")
        show("SqliteStore append", await time_append(store), "")
        await store.aclose()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def run_postgres(url: str | None, n: int, pages: int) -> None:
    cluster = None
    if url is None:
        from pg_cluster import PgCluster, bindir

        if bindir() is None:
            print("\nPostgreSQL: not installed (no pg_config --bindir); skipped")
            return
        cluster = PgCluster()
        cluster.start()
        url = cluster.new_database()
        print("\nPostgreSQL: a throwaway cluster on a Unix socket (fsync=off, as in the tests)")
    try:
        store = await PostgresStore.open(url)
        t0 = time.perf_counter()
        await fill_postgres(url, n)
        print(f"PostgreSQL: {n:,} sessions filled in {time.perf_counter() - t0:.1f} s (setup)")
        show(f"PostgresStore list, page of 50 over {n:,} sessions (goal <= 20 ms)", await time_list(store, pages), "ms")
        show("PostgresStore append", await time_append(store), "")
        await store.aclose()
    finally:
        if cluster is not None:
            cluster.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--pages", type=int, default=200, help="pages walked by cursor")
    parser.add_argument("--pg-url", help="an existing PostgreSQL database (its acp_* tables are created)")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    asyncio.run(run_sqlite(args.sessions, args.pages))
    if not args.no_pg:
        asyncio.run(run_postgres(args.pg_url, args.sessions, args.pages))


if __name__ == "__main__":
    main()
