"""In-memory byte streams: two connected ends the connection runtime accepts, so an agent and a
client can talk inside one event loop with no OS pipe and no subprocess. (`testing` re-exports
them.)"""

from __future__ import annotations

import asyncio
from typing import Final

_HIGH_WATER: Final = 1024 * 1024


class MemoryStream:
    """One direction of an in-memory byte pipe: the writer end of one side and the reader
    end of the other (it implements both the `Writer` and the `Reader` protocols).

    `write` never blocks; `drain` waits while more than a megabyte is unread, like a pipe
    buffer. `close` is the writer's EOF: reads return what is left, then `b""`.
    """

    def __init__(self, high_water: int = _HIGH_WATER) -> None:
        self._buffer = bytearray()
        self._eof = False
        self._high_water = high_water
        # Created lazily, inside the running loop.
        self._readable: asyncio.Event | None = None
        self._writable: asyncio.Event | None = None

    @property
    def closed(self) -> bool:
        return self._eof

    def write(self, data: bytes) -> None:
        if self._eof:
            raise ConnectionResetError("the stream is closed")
        if data:
            self._buffer += data
            if self._readable is not None:
                self._readable.set()

    async def drain(self) -> None:
        while len(self._buffer) > self._high_water and not self._eof:
            if self._writable is None:
                self._writable = asyncio.Event()
            self._writable.clear()
            await self._writable.wait()

    def close(self) -> None:
        self._eof = True
        for event in (self._readable, self._writable):
            if event is not None:
                event.set()

    async def read(self, n: int = -1) -> bytes:
        while not self._buffer and not self._eof:
            if self._readable is None:
                self._readable = asyncio.Event()
            self._readable.clear()
            await self._readable.wait()
        if n < 0 or n >= len(self._buffer):
            data = bytes(self._buffer)
            self._buffer.clear()
        else:
            data = bytes(self._buffer[:n])
            del self._buffer[:n]
        if self._writable is not None:
            self._writable.set()
        return data


def memory_streams() -> tuple[tuple[MemoryStream, MemoryStream], tuple[MemoryStream, MemoryStream]]:
    """Two connected ends: `((a_reader, a_writer), (b_reader, b_writer))`.

    What `a_writer` writes `b_reader` reads, and the other way round."""
    a_to_b, b_to_a = MemoryStream(), MemoryStream()
    return (b_to_a, a_to_b), (a_to_b, b_to_a)
