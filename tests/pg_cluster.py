"""A throwaway PostgreSQL cluster for tests: a real server, never a mock.

`PgCluster` runs initdb and the server from `pg_config --bindir` (Debian's PostgreSQL 15 server
package) in a temp dir of its own, listening on a Unix socket in that dir only (no TCP port),
with trust authentication for that socket. When the suite runs as root it runs them as the
`postgres` user (initdb refuses root) and gives that user the temp dir. It is stopped by the
postmaster's PID. `pg_cluster_or_skip()` skips with the reason on a machine without PostgreSQL.

`pg_cluster` (below; import it into a test module) is one cluster per test module and
pytest-xdist worker: starting one takes about a second, each test takes a fresh database of
it (`new_database()`), and no worker sees another's. A test that stops the server starts a
cluster of its own.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


def bindir() -> Path | None:
    """Where initdb and postgres live, or None when PostgreSQL's server is not installed."""
    candidates = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for path in candidates:
        if (path / "initdb").is_file() and (path / "postgres").is_file():
            return path
    return None


class PgCluster:
    """A cluster in its own temp dir; `url(db)` names a database on its socket."""

    def __init__(self) -> None:
        found = bindir()
        if found is None:
            raise RuntimeError("PostgreSQL's server (initdb, postgres) is not installed")
        self.bin = found
        self.user: str | None = None
        if os.geteuid() == 0:
            self.user = "postgres"
            pwd.getpwnam(self.user)  # KeyError when the package made no such user
        self.root = Path(tempfile.mkdtemp(prefix="acp-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--no-instructions"]
        )  # fmt: skip
        self.pid: int | None = None

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=START_TIMEOUT, user=self.user, cwd=self.root
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    def start(self) -> None:
        # pg_ctl forks the postmaster and waits until it accepts connections; fsync off: a
        # test cluster's durability against power cuts is not what the tests measure.
        options = f"-c listen_addresses='' -k {self.root} -c fsync=off -c max_connections=60"
        self._run([str(self.bin / "pg_ctl"), "start", "-w", "-t", str(int(START_TIMEOUT)), "-D", str(self.data),
                   "-l", str(self.log), "-o", options])  # fmt: skip
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        """Fast shutdown by PID (SIGINT), then SIGKILL if it outlives STOP_TIMEOUT."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        for sig, wait in ((signal.SIGINT, STOP_TIMEOUT), (signal.SIGKILL, 5.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.05)

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@/{db}?host={self.root}"

    def new_database(self) -> str:
        """A fresh empty database's URL (each test gets its own tables)."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.sql(f"CREATE DATABASE {name}")
        return self.url(name)

    def sql(self, statement: str, db: str = "postgres") -> str:
        done = subprocess.run(
            [str(self.bin / "psql"), "-X", "-qAt", "-h", str(self.root), "-U", "postgres", "-d", db, "-c", statement],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"psql {statement!r}: {done.stderr.strip()}")
        return done.stdout

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def pg_cluster_or_skip() -> PgCluster:
    """A started cluster, or a pytest skip saying why there is none."""
    if bindir() is None:
        pytest.skip(
            "PostgreSQL's server is not installed (no pg_config --bindir with initdb): the PostgreSQL tests need it"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install -e '.[test]' (or 'psycopg[binary]')")
    cluster = PgCluster()
    try:
        cluster.start()
    except BaseException:
        cluster.remove()
        raise
    return cluster


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[PgCluster]:
    cluster = pg_cluster_or_skip()
    try:
        yield cluster
    finally:
        cluster.remove()
