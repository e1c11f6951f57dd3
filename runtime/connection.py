"""JSON-RPC 2.0 over newline-delimited streams (stdio or a subprocess's pipes), on asyncio.

- outbound requests are matched to responses by id (peers may answer out of order);
- incoming requests run concurrently, each in its own task;
- incoming notifications are handled one at a time, in arrival order, and a response to one
  of our requests is only delivered after the notifications that arrived before it;
- `$/cancel_request` cancels the named handler, which then answers -32800;
- bad input gets the JSON-RPC error due and the connection keeps serving the next message:
  bytes that are not JSON -32700 (id null); JSON that is not a request -32600; responses are
  never answered (a malformed one fails the request it answers with `InvalidResponse`);
- a line over `max_message_size` is not kept: its top level is skimmed for `id`/`method` as it
  streams past, so an oversize request is refused with -32600 under its own id and an oversize
  response fails the request it answers with `MessageTooLarge` (nothing waits forever);
- at EOF pending outbound requests fail with `ConnectionClosed`; handlers already running
  get `shutdown_grace` seconds to finish and answer (the peer may only have closed its
  writing half), then are cancelled;
- `request(..., timeout=)`: when it expires `$/cancel_request` is sent for that id, the
  pending entry is dropped and `TimeoutError` raised; a late answer is ignored quietly;
- a wire tap (`tap=`, and the file log `ACP_WIRE_LOG=<path>`) sees every raw line in and
  out, in order, before decoding and after encoding.

Nothing received is ever evaluated or imported: messages are only parsed as JSON, and method
names are only looked up in the METHODS table.

This module reads (`run`: lines split out of the reads, oversize ones skimmed) and shuts down
at EOF; its parts: `connection_base` (the state, sending, our requests, the errors) and
`connection_inbound` (each line parsed and routed, requests and notifications served). Beside
them: `jsonline` (parsing and encoding a line, skimming an oversize one), `streams` (the
reader/writer shapes, `stdio_streams`) and `wiretap` (`Tap`, `WireLog`); their public names
are re-exported here.
"""

from __future__ import annotations

import asyncio
import logging

from .connection_base import (
    CANCEL_REQUEST,
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_SHUTDOWN_GRACE,
    ConnectionClosed,
    InvalidResponse,
    MessageTooLarge,
    valid_id,
)
from .connection_inbound import ConnectionInbound
from .dispatch import RequestError, brief
from .jsonline import HELD_FROM, Skim
from .streams import CHUNK, Reader, Writer, stdio_streams
from .wiretap import WIRE_LOG_ENV, Direction, Tap, WireLog

__all__ = [
    "CANCEL_REQUEST",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DEFAULT_SHUTDOWN_GRACE",
    "WIRE_LOG_ENV",
    "Connection",
    "ConnectionClosed",
    "Direction",
    "InvalidResponse",
    "MessageTooLarge",
    "Reader",
    "Tap",
    "WireLog",
    "Writer",
    "stdio_streams",
]

_log = logging.getLogger(__name__)


class Connection(ConnectionInbound):
    """One JSON-RPC peer connection; `run()` serves it until EOF."""

    async def run(self) -> None:
        """Read and serve messages until EOF, then shut down cleanly."""
        buffer = bytearray()
        skim: Skim | None = None  # set while an oversize line streams past
        limit = self.max_message_size
        try:
            while True:
                try:
                    chunk = await self._reader.read(CHUNK)
                except (ConnectionError, OSError) as exc:
                    _log.debug("read failed: %s", exc)
                    break
                if not chunk:  # EOF; a last line without its newline still counts
                    if skim is not None:
                        await self._refuse(skim)
                    elif buffer:
                        line = bytes(buffer)
                        if self._taps:
                            self._tap("in", line)
                        reply = self._handle_line(line)
                        if reply is not None:
                            await reply
                    break
                size = len(chunk)
                if (
                    size > HELD_FROM
                    and size <= limit + 1
                    and not buffer
                    and skim is None
                    and chunk.find(b"\n") == size - 1
                ):
                    # One whole large line (a remote transport's message): parsed as it is, its
                    # newline being JSON whitespace; the split would copy it (~0.4 ms a MiB).
                    if self._taps:
                        self._tap("in", chunk[:-1])
                    reply = self._handle_line(chunk, True)
                    chunk = b""
                    if reply is not None:
                        await reply
                    continue
                # One split per read, in C: the complete lines, and the tail after the last
                # newline (the start of a line still arriving; b"" if the read ended one).
                pieces = chunk.split(b"\n")
                tail = pieces.pop()
                for piece in pieces:
                    if skim is not None:  # the end of an oversize line
                        skim.feed(piece, 0, len(piece))
                        await self._refuse(skim)
                        skim = None
                    elif buffer:  # the end of a line begun in earlier reads
                        buffer += piece
                        if len(buffer) > limit:
                            whole = Skim()
                            whole.feed(buffer, 0, len(buffer))
                            await self._refuse(whole)
                        else:
                            line = bytes(buffer)
                            if self._taps:
                                self._tap("in", line)
                            reply = self._handle_line(line)
                            if reply is not None:
                                await reply
                        buffer.clear()
                    elif len(piece) > limit:
                        whole = Skim()
                        whole.feed(piece, 0, len(piece))
                        await self._refuse(whole)
                    else:  # the common case: a whole line inside one read, no copy into buffer
                        if self._taps:
                            self._tap("in", piece)
                        reply = self._handle_line(piece)
                        if reply is not None:
                            await reply
                if skim is not None:
                    skim.feed(tail, 0, len(tail))
                elif tail:
                    buffer += tail
                    if len(buffer) > limit:
                        skim = Skim()
                        skim.feed(buffer, 0, len(buffer))
                        buffer.clear()
                # Nothing read outlives its dispatch: the next read may wait for a long time.
                chunk = line = piece = tail = b""
                pieces = []
        finally:
            await self._shutdown()

    async def _refuse(self, skim: Skim) -> None:
        """A line over `max_message_size`: answer (or fail) whatever its top level says it is."""
        detail = f"message larger than the maximum of {self.max_message_size} bytes"
        head = skim.head()
        if head is None:  # not a JSON object: like any other garbage
            _log.warning("dropped an oversize line that is not a JSON object")
            await self._reply_error(None, RequestError.invalid_request(detail))
            return
        msg_id = head.get("id")
        method = head.get("method")
        if method is None and ("result" in head or "error" in head):
            if not self._fail_pending(msg_id, MessageTooLarge(self.max_message_size)):
                _log.warning("dropped an oversize response for unknown id %s", brief(msg_id))
            return
        if "id" not in head and method.__class__ is str:
            _log.warning("dropped an oversize %s notification", brief(method))
            return
        await self._reply_error(
            msg_id if "id" in head and valid_id(msg_id) else None,
            RequestError.invalid_request(detail),
        )

    async def _shutdown(self) -> None:
        """At EOF: fail our pending requests, give the handlers already running (and the
        notifications already queued) `shutdown_grace` seconds to finish and answer, then
        cancel what is left."""
        self._eof = True
        for future, _ in list(self._pending.values()):
            if not future.done():
                future.set_exception(ConnectionClosed("the peer closed the connection"))
        idle = self._idle
        if idle is not None and not idle.done():  # the idle worker sees EOF and returns
            idle.set_result(None)
        tasks: list[asyncio.Task[None]] = list(self._inflight.values())
        if self._worker is not None:
            tasks.append(self._worker)
        try:
            if tasks:
                _, late = await asyncio.wait(tasks, timeout=self.shutdown_grace)
                for task in late:
                    task.cancel()
                if late:
                    await asyncio.gather(*late, return_exceptions=True)
            if self._background:  # answers spawned by the above (-32800 for cancelled requests)
                await asyncio.wait(list(self._background), timeout=self.shutdown_grace)
        finally:
            self._done = True
            self._wake()
            await self.close()  # nothing more to say: let the peer see EOF too
