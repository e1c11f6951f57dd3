"""The bundled session stores (issue 27 §3, §6 and the store faults): every one passes the
protocol's own checks (`testing.store_checks.check_store`), `open_store` reads every URL kind
and refuses bad ones clearly, and SQLite/PostgreSQL refuse files and databases not theirs,
survive kill -9 mid-write, and report unwritable files, full disks and a stopped server as
`StoreUnavailable` without losing what was stored. PostgreSQL is a real throwaway cluster
(tests/pg_cluster.py); there are no mocks."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from agent.session_postgres import PostgresStore
from agent.session_sqlite import SqliteStore
from agent.session_store import (
    MemoryStore,
    RecordedBatch,
    RecordedEntry,
    SessionRecord,
    StoreError,
    StoreUnavailable,
    StoreVersionError,
    holder_id,
)
from agent.session_stores import open_store
from agent.testing.store_checks import check_store
from pg_cluster import PgCluster, pg_cluster, pg_cluster_or_skip  # noqa: F401  (pg_cluster: a fixture)

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "generated"
STAMP = "2026-01-01T00:00:00.000000Z"


def rec(sid: str, owner: str = "local:me", cwd: str = "/w") -> SessionRecord:
    return SessionRecord(owner=owner, session_id=sid, cwd=cwd, created_at=STAMP, updated_at=STAMP, state={"m": 1})


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


# --- the protocol's checks, on every bundled store ---------------------------------------------


def test_sqlite_writes_a_recorded_entrys_own_bytes_a_batch_to_a_row(tmp_path: Path) -> None:
    """The bytes sent are the bytes kept (spacing and all); a batch is one row; a newline in an
    entry's bytes (whitespace in JSON) does not split it; a damaged row is a clear StoreError."""
    path = tmp_path / "s.db"

    async def main() -> None:
        store = SqliteStore(path)
        await store.create(rec("s"))
        sent = RecordedEntry({"a": [1, 2]})
        sent.json = b'{"a": [1,\n 2]}'
        await store.save("local:me", "s", updated_at=STAMP, title=None, state={}, entries=[sent, {"b": "\u00e9"}])
        batch = RecordedBatch([{"c": 3}, {"d": None}], [b'{"c": 3}', b'{"d":null}'])
        await store.save("local:me", "s", updated_at=STAMP, title=None, state={}, entries=batch)
        got = [e async for e in store.replay("local:me", "s")]
        assert got == [{"a": [1, 2]}, {"b": "\u00e9"}, {"c": 3}, {"d": None}]
        kept = [e.json for e in got if isinstance(e, RecordedEntry)]
        assert kept == [b'{"a": [1,  2]}', '{"b":"\u00e9"}'.encode(), b'{"c": 3}', b'{"d":null}']
        rows = store._conn.execute("SELECT seq, body FROM acp_entries ORDER BY seq").fetchall()
        assert rows[1] == (2, '{"c": 3}\n{"d":null}')  # the batch's bytes, a row
        store._conn.execute("UPDATE acp_entries SET body = 'NaN' WHERE seq = 2")
        with pytest.raises(StoreError, match="not JSON.*damaged"):
            _ = [e async for e in store.replay("local:me", "s")]
        await store.aclose()

    run(main())



def test_memory_store_passes_check_store() -> None:
    run(check_store(MemoryStore()))


def test_sqlite_store_passes_check_store(tmp_path: Path) -> None:
    async def main() -> None:
        store = await open_store(f"sqlite:{tmp_path / 's.db'}")
        assert isinstance(store, SqliteStore)
        await check_store(store)
        await check_store(store)  # again, on a store that already holds sessions
        await store.aclose()

    run(main())


def test_postgres_store_passes_check_store(pg_cluster: PgCluster) -> None:  # noqa: F811
    async def main() -> None:
        store = await open_store(pg_cluster.new_database())
        assert isinstance(store, PostgresStore)
        await check_store(store)
        await store.aclose()

    run(main())


def test_check_store_catches_a_store_that_leaks_across_owners() -> None:
    """The checks can fail: a store whose get ignores the owner is caught, with the rule named."""

    class Leaky(MemoryStore):
        async def get(self, owner: str, session_id: str) -> SessionRecord | None:
            return self._records.get(session_id)

    with pytest.raises(AssertionError, match="another owner's session is None"):
        run(check_store(Leaky()))


# --- open_store URLs ----------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["", "sqlite:", "mysql://x/y", "Memory", "sqlite3:x.db", "redis://h"])
def test_open_store_refuses_a_bad_url_naming_what_to_write(url: str) -> None:
    with pytest.raises(StoreError) as caught:
        run(open_store(url))
    assert "sqlite:" in str(caught.value) and repr(url) in str(caught.value)


def test_open_store_memory_and_sqlite_forms(tmp_path: Path) -> None:
    assert isinstance(run(open_store("memory")), MemoryStore)
    store = run(open_store(f"sqlite://{tmp_path / 'x.db'}"))  # sqlite:///abs/path
    assert isinstance(store, SqliteStore) and store.path == str(tmp_path / "x.db")
    run(store.aclose())


def test_postgres_unreachable_at_open_is_store_unavailable(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(StoreUnavailable, match="unreachable"):
        run(PostgresStore.open(f"postgresql://postgres@/x?host={tmp_path}", connect_timeout=2))


def test_postgres_without_psycopg_names_what_to_install(tmp_path: Path) -> None:
    """In a process where psycopg cannot be imported, the error names the pip command."""
    code = textwrap.dedent(f"""
        import sys, asyncio
        sys.modules["psycopg"] = None  # import psycopg now raises ImportError
        sys.path.insert(0, {str(GENERATED)!r})
        from agent.session_stores import open_store
        from agent.session_store import StoreError
        try:
            asyncio.run(open_store("postgresql://u@h/db"))
        except StoreError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'psycopg[binary]'" in out.stdout and "postgres` extra" in out.stdout, out


def test_the_sqlite_module_imports_no_psycopg() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(GENERATED)!r}); "
        "import agent.session_stores, agent.session_sqlite; print('psycopg' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out


# --- foreign, corrupt and other-version files and databases ----------------------------------


def _bytes(path: Path) -> bytes:
    return path.read_bytes()


def test_sqlite_refuses_a_file_that_is_not_sqlite_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    before = _bytes(path)
    with pytest.raises(StoreVersionError, match="not a SQLite database"):
        SqliteStore(path)
    assert _bytes(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_sqlite_refuses_a_corrupt_store_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    run(store.create(rec("a")))
    run(store.aclose())
    data = bytearray(path.read_bytes())
    data[0:16] = b"garbage garbage!"  # the header is gone
    path.write_bytes(bytes(data))
    with pytest.raises(StoreVersionError, match="not a SQLite database"):
        SqliteStore(path)
    assert path.read_bytes() == bytes(data)


def test_sqlite_refuses_another_programs_database_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users VALUES (1, 'ada')")
    conn.close()
    before = _bytes(path)
    with pytest.raises(StoreVersionError, match="another program's SQLite database.*users"):
        SqliteStore(path)
    assert _bytes(path) == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # WAL not switched on
    conn.close()


def test_sqlite_refuses_another_version_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    run(SqliteStore(path).aclose())
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE acp_store_meta SET value = '2' WHERE key = 'version'")
    conn.close()
    before = _bytes(path)
    with pytest.raises(StoreVersionError, match="version '2'; this one reads version 1"):
        SqliteStore(path)
    assert _bytes(path) == before


def test_postgres_refuses_foreign_tables_and_other_versions(pg_cluster: PgCluster) -> None:  # noqa: F811
    url = pg_cluster.new_database()
    db = url.split("?")[0].rsplit("/", 1)[1]
    pg_cluster.sql("CREATE TABLE acp_sessions (id int); INSERT INTO acp_sessions VALUES (7)", db)
    with pytest.raises(StoreVersionError, match="not a session store's"):
        run(PostgresStore.open(url))
    assert pg_cluster.sql("SELECT id FROM acp_sessions", db).strip() == "7"

    url = pg_cluster.new_database()
    db = url.split("?")[0].rsplit("/", 1)[1]
    run(run(PostgresStore.open(url)).aclose())  # type: ignore[union-attr]
    pg_cluster.sql("UPDATE acp_store_meta SET value = '9' WHERE key = 'version'", db)
    with pytest.raises(StoreVersionError, match="version '9'"):
        run(PostgresStore.open(url))
    assert pg_cluster.sql("SELECT value FROM acp_store_meta WHERE key = 'version'", db).strip() == "9"


def test_postgres_stores_share_sessions_and_claims(pg_cluster: PgCluster) -> None:  # noqa: F811
    """Two stores on one database (as two hosts would): one sees what the other wrote, and a
    claim one holds is refused to the other."""
    url = pg_cluster.new_database()

    async def main() -> None:
        a, b = await PostgresStore.open(url), await PostgresStore.open(url)
        await a.create(rec("s1"))
        await a.save("local:me", "s1", updated_at=STAMP, title="t", state={}, entries=[{"n": 1}])
        assert [dict(e) async for e in b.replay("local:me", "s1")] == [{"n": 1}]
        assert await a.claim("local:me", "s1", "hostA:1:x")
        assert not await b.claim("local:me", "s1", "hostB:2:y")
        await a.aclose()
        await b.aclose()

    run(main())


# --- faults --------------------------------------------------------------------------------------

WRITER = """
import asyncio, sys
sys.path.insert(0, {generated!r})
from agent.session_sqlite import SqliteStore
from agent.session_store import SessionRecord

async def main():
    store = SqliteStore({path!r})
    n = 0
    while True:  # the parent kills us mid-write
        sid = f"s{{n:06d}}"
        await store.create(SessionRecord("o", sid, "/w", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"))
        await store.save("o", sid, updated_at="2026-01-01T00:00:01Z", title=None, state={{}},
                         entries=[{{"i": i, "pad": "x" * 200}} for i in range(50)])
        print(sid, flush=True)
        n += 1

asyncio.run(main())
"""


def test_sqlite_kill_9_mid_write_loses_nothing_stored(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path)  # created before the writer starts
    code = WRITER.format(generated=str(GENERATED), path=str(path))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    done: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while len(done) < 40 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            done.append(line.strip())
        time.sleep(0.05)  # mid-write of a later session
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert len(done) >= 40, "the writer did not get going"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()

    async def reopen() -> None:
        store = SqliteStore(path)
        for sid in done:  # every session reported stored is whole
            got = await store.get("o", sid)
            assert got is not None and got.entries == 50
            assert [e["i"] async for e in store.replay("o", sid)] == list(range(50))
        page = await store.list("o", limit=10_000)
        for r in page.sessions:  # the one in flight: absent, or created with 0 or all 50 entries
            assert r.entries in (0, 50)
            assert len([e async for e in store.replay("o", r.session_id)]) == r.entries
        await store.aclose()

    run(reopen())


def _make_unwritable(path: Path) -> None:
    """Root ignores permission bits: as root the file is made immutable (chattr +i) instead."""
    if os.geteuid() != 0:
        os.chmod(path, 0o444)
        return
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"running as root and chattr +i failed ({done.stderr.strip()}): no way to make a file unwritable")


def _make_writable(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, timeout=30)
    os.chmod(path, 0o644)


def test_sqlite_unwritable_file_is_store_unavailable_and_reads_still_work(tmp_path: Path) -> None:
    path = tmp_path / "s.db"

    async def main() -> None:
        store = SqliteStore(path)
        await store.create(rec("kept", owner="o"))
        await store.aclose()
        _make_unwritable(path)
        try:
            store = SqliteStore(path)
            got = await store.get("o", "kept")
            assert got is not None  # reads still served
            with pytest.raises(StoreUnavailable, match="not writable.*nothing stored was lost"):
                await store.create(rec("new", owner="o"))
            with pytest.raises(StoreUnavailable, match="not writable"):
                await store.save("o", "kept", updated_at=STAMP, title="x", state={}, entries=[{"n": 1}])
            await store.aclose()
        finally:
            _make_writable(path)

    run(main())
    assert run(_ids(path)) == ["kept"]


async def _ids(path: Path) -> list[str]:
    store = SqliteStore(path)
    page = await store.list("o", limit=100)
    await store.aclose()
    return [r.session_id for r in page.sessions]


def _small_tmpfs(where: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], capture_output=True, timeout=30
    )
    return done.returncode == 0


def test_sqlite_full_disk_is_store_unavailable_and_keeps_what_was_stored(tmp_path: Path) -> None:
    """On a 256 KiB tmpfs when this process may mount one (root); otherwise SQLite's own page
    limit (`max_page_count`) gives the same SQLITE_FULL error through the same code path."""
    disk = tmp_path / "disk"
    mounted = _small_tmpfs(disk)
    if not mounted:
        disk.mkdir(exist_ok=True)
    path = disk / "s.db"
    try:

        async def main() -> str:
            store = SqliteStore(path)
            if not mounted:
                store._conn.execute("PRAGMA max_page_count = 40")
            await store.create(rec("kept", owner="o"))
            await store.save("o", "kept", updated_at=STAMP, title=None, state={}, entries=[{"i": 0}])
            error = ""
            for n in range(10_000):
                try:
                    await store.create(rec(f"big{n}", owner="o"))
                    await store.save(
                        "o", f"big{n}", updated_at=STAMP, title=None, state={}, entries=[{"pad": "x" * 4000}] * 5
                    )
                except StoreUnavailable as exc:
                    error = str(exc)
                    break
            kept = [dict(e) async for e in store.replay("o", "kept")]
            assert kept == [{"i": 0}]
            await store.aclose()
            return error

        error = run(main())
        assert "disk is full" in error and "nothing stored was lost" in error, error
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.close()
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)], capture_output=True, timeout=30)


@pytest.mark.slow
def test_postgres_stopped_mid_operation_then_restarted() -> None:
    """Server stopped while a store is open: calls fail with StoreUnavailable (not a hang, not
    a driver traceback), what was stored is kept, and the same store object recovers once the
    server is back."""
    cluster = pg_cluster_or_skip()
    try:
        url = cluster.new_database()

        async def main() -> None:
            store = await PostgresStore.open(url, connect_timeout=2)
            await store.create(rec("before"))
            await store.save("local:me", "before", updated_at=STAMP, title=None, state={}, entries=[{"n": 1}])
            cluster.stop()
            for _ in range(2):  # the broken connection, then a failed reconnect
                with pytest.raises(StoreUnavailable, match="unreachable.*nothing stored was lost"):
                    await store.save("local:me", "before", updated_at=STAMP, title=None, state={}, entries=[{"n": 2}])
            await asyncio.to_thread(cluster.start)
            assert [dict(e) async for e in store.replay("local:me", "before")] == [{"n": 1}]
            await store.create(rec("after"))
            assert (await store.get("local:me", "after")) is not None
            await store.aclose()

        run(main())
    finally:
        cluster.remove()


SHARER = """
import asyncio, sys
sys.path.insert(0, {generated!r})
from agent.session_sqlite import SqliteStore
from agent.session_store import SessionRecord

async def main():
    store = SqliteStore({path!r})
    for n in range(150):
        sid = f"{tag}-{{n:03d}}"
        await store.create(SessionRecord("o", sid, "/w", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"))
        for k in range(3):
            await store.save("o", sid, updated_at="2026-01-01T00:00:01Z", title=None, state={{}},
                             entries=[{{"k": k, "j": j}} for j in range(5)])
        await store.save("o", "shared", updated_at="2026-01-01T00:00:02Z", title=None, state={{}},
                         entries=[{{"from": {tag!r}, "n": n}}])
    await store.aclose()

asyncio.run(main())
"""


def test_sqlite_two_processes_write_one_file_at_once(tmp_path: Path) -> None:
    """Two processes writing one file concurrently (as two uvicorn workers would): every
    write of both is there, appends to one shared session never collide, the file is sound."""
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    run(store.create(rec("shared", owner="o")))
    run(store.aclose())
    procs = [
        subprocess.Popen([sys.executable, "-c", SHARER.format(generated=str(GENERATED), path=str(path), tag=tag)])
        for tag in ("a", "b")
    ]
    try:
        codes = [p.wait(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
    assert codes == [0, 0]

    async def check() -> None:
        store = SqliteStore(path)
        for tag in ("a", "b"):
            for n in range(150):
                got = await store.get("o", f"{tag}-{n:03d}")
                assert got is not None and got.entries == 15
        shared = [dict(e) async for e in store.replay("o", "shared")]
        for tag in ("a", "b"):  # each process's appends, all there, in its own order
            assert [e["n"] for e in shared if e["from"] == tag] == list(range(150))
        await store.aclose()

    run(check())
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def test_sqlite_claim_is_seen_by_another_process(tmp_path: Path) -> None:
    """A claim taken in one process is refused to another while live, and freed when the
    holder's process dies (kill -9), without waiting for the TTL."""
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    run(store.create(rec("s", owner="o")))
    code = textwrap.dedent(f"""
        import asyncio, sys, time
        sys.path.insert(0, {str(GENERATED)!r})
        from agent.session_sqlite import SqliteStore
        from agent.session_store import holder_id
        store = SqliteStore({str(path)!r})
        print(asyncio.run(store.claim("o", "s", holder_id(), ttl=600)), flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "True"
        mine = holder_id()
        assert not run(store.claim("o", "s", mine))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert run(store.claim("o", "s", mine))
    run(store.aclose())
