"""The byte streams a connection runs on: what it reads from and writes to, and streams on this
process's stdin/stdout (pipes through the event loop, files and ttys through threads)."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, Final, Protocol

CHUNK: Final = 256 * 1024
"""How much a connection asks its reader for at a time."""


class Writer(Protocol):
    """What the connection writes to: an asyncio StreamWriter or anything shaped like it."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class Reader(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class _ThreadWriter:
    """Writes to a file object from a thread: for stdout that is not a pipe (a file, a tty)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._pending: list[bytes] = []
        self._lock = asyncio.Lock()  # concurrent drains must hit the file in write order

    def write(self, data: bytes) -> None:
        self._pending.append(data)

    async def drain(self) -> None:
        async with self._lock:
            if not self._pending:
                return
            data, self._pending = b"".join(self._pending), []
            await asyncio.get_running_loop().run_in_executor(None, self._write, data)

    def _write(self, data: bytes) -> None:
        self._stream.write(data)
        self._stream.flush()

    def close(self) -> None:
        # Flush only: stdout's descriptor stays open for the rest of the process.
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass


class _ThreadReader:
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def read(self, n: int = -1) -> bytes:
        data: bytes = await asyncio.get_running_loop().run_in_executor(None, self._stream.read1, n)
        return data


# stat.S_IFMT / S_IFIFO / S_IFSOCK (POSIX values), kept here to keep the import list minimal.
_S_IFMT: Final = 0o170000
_S_IFIFO: Final = 0o010000
_S_IFSOCK: Final = 0o140000


def _is_pipe(stream: Any) -> bool:
    """A pipe or socket, which the event loop can poll; files, ttys and /dev/null it cannot
    (epoll refuses them, and only later, in a callback: the read would then hang)."""
    if sys.platform == "win32":
        return False  # the proactor loop cannot poll inherited stdio handles
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return (mode & _S_IFMT) in (_S_IFIFO, _S_IFSOCK)


async def stdio_streams() -> tuple[Reader, Writer]:
    """Streams on this process's stdin/stdout (pipes via the event loop, else threads)."""
    loop = asyncio.get_running_loop()
    reader: Reader
    writer: Writer
    if _is_pipe(sys.stdin):
        stream_reader = asyncio.StreamReader(limit=CHUNK)
        # closefd=False: closing the transport must not close the process's fd 0.
        stdin = os.fdopen(sys.stdin.fileno(), "rb", closefd=False)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream_reader), stdin)
        reader = stream_reader
    else:
        reader = _ThreadReader(sys.stdin.buffer)
    if _is_pipe(sys.stdout):
        stdout = os.fdopen(sys.stdout.fileno(), "wb", closefd=False)
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, stdout
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    else:
        writer = _ThreadWriter(sys.stdout.buffer)
    return reader, writer
