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
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, Literal, Protocol

from .dispatch import INTERNAL_ERROR, Dispatcher, RequestError, brief

_orjson: Any
try:  # an optional speed-up; never required
    _orjson = importlib.import_module("orjson")
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

_log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_SIZE: Final = 64 * 1024 * 1024
DEFAULT_SHUTDOWN_GRACE: Final = 1.0
CANCEL_REQUEST: Final = "$/cancel_request"
WIRE_LOG_ENV: Final = "ACP_WIRE_LOG"
_CHUNK: Final = 256 * 1024

# The connection whose notification is being handled, in the worker and every task a
# notification handler starts (tasks inherit it): their requests must not wait for the worker.
_notifying: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "acp_notifying", default=None
)


def _cancelled(task: asyncio.Task[Any] | None) -> bool:
    """Whether `task` itself is being cancelled, as opposed to its code having awaited
    something cancelled elsewhere (Python 3.10 cannot tell: there, assume it is)."""
    if sys.version_info >= (3, 11):
        return task is None or task.cancelling() > 0
    return True


class ConnectionClosed(Exception):
    """The connection is over (the peer's EOF, or `close()`): no answer can come any more."""


class InvalidResponse(RequestError):
    """The peer answered one of our requests with something that is not a valid JSON-RPC
    response; raised locally by `request()`, never sent."""

    def __init__(self, detail: str) -> None:
        super().__init__(INTERNAL_ERROR, "Invalid response", {"details": detail})


class MessageTooLarge(InvalidResponse):
    """The answer to one of our requests was larger than `max_message_size` and was dropped."""

    def __init__(self, max_message_size: int) -> None:
        super().__init__(f"response larger than the maximum of {max_message_size} bytes")
        self.max_message_size = max_message_size


class Writer(Protocol):
    """What the connection writes to: an asyncio StreamWriter or anything shaped like it."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class Reader(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


Direction = Literal["in", "out"]
Tap = Callable[[Direction, bytes], None]
"""A wire tap: called with "in" or "out" and each raw line (without its newline), in order."""


class WireLog:
    """A tap appending each line to a file as one JSON object per line:
    `{"ts": <unix time>, "dir": "in" | "out", "pid": <this process>, "line": <the raw text>}`.

    The file is opened for appending (created with mode 0600: it holds everything said,
    tokens included), so the two ends of a connection may share it; `pid` tells them apart.
    Bytes that are not UTF-8 are shown as U+FFFD."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._pid = os.getpid()

    def __call__(self, direction: Direction, line: bytes) -> None:
        if self._fd is None:
            return
        record = {
            "ts": round(time.time(), 6),
            "dir": direction,
            "pid": self._pid,
            "line": line.decode("utf-8", "replace"),
        }
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        while data:  # one write() in practice: appends from several processes stay whole
            data = data[os.write(self._fd, data) :]

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _wire_log_from_env() -> WireLog | None:
    path = os.environ.get(WIRE_LOG_ENV)
    if not path:
        return None
    try:
        return WireLog(path)
    except OSError as exc:
        _log.warning("cannot open the wire log %s=%s: %s", WIRE_LOG_ENV, path, exc)
        return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


_decode = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float).decode


def _loads(line: bytes) -> Any:
    """Parse one line; ValueError (UnicodeDecodeError too) or RecursionError if it is not JSON."""
    # Always the standard library: orjson would read integers beyond 64 bits as floats, and
    # spotting those first costs more than it saves.
    return _decode(line.decode("utf-8"))


# One encoder for every message (json.dumps with options builds a new one per call);
# allow_nan=False: NaN/Infinity are not JSON, so they fail here instead of on the peer.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_encode_ascii = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def _dumps(message: dict[str, Any]) -> bytes:
    """One line of JSON; TypeError or ValueError if `message` is not JSON."""
    if _orjson is not None:
        try:
            data: bytes = _orjson.dumps(message)
            return data + b"\n"
        except TypeError:
            pass  # a big integer, a lone surrogate, deep nesting: the standard library decides
    try:
        try:
            return _encode(message).encode("utf-8") + b"\n"
        except UnicodeEncodeError:  # a lone surrogate: escaped, it is still valid JSON
            return _encode_ascii(message).encode("ascii") + b"\n"
    except RecursionError:
        raise ValueError("nested too deeply to encode") from None


def _expire(future: asyncio.Future[Any], method: str) -> None:
    if not future.done():
        future.set_exception(TimeoutError(f"no answer to {method} in time"))


def _valid_id(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, str)
        or (isinstance(value, int) and not isinstance(value, bool))
    )


def _id_key(value: Any) -> tuple[bool, Any]:
    return (isinstance(value, str), value)


# -- skimming an oversize line ------------------------------------------------------------------
_SKIM_MAX: Final = 64 * 1024  # the most top-level text kept (keys, punctuation, scalars)
_SKIM_STRING: Final = 1024  # a longer top-level string is replaced by a placeholder
_STRING_BODY: Final = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)  # up to a closing quote
_NESTED_MARK: Final = re.compile(rb'["{}\[\]]')  # what matters inside a nested value
_TOP_PLAIN: Final = re.compile(rb'[^"{}\[\]]*')  # separators and scalars at the top level
_QUOTE: Final = 0x22
_BACKSLASH: Final = 0x5C
_OPENERS: Final = (0x7B, 0x5B)


class _Skim:
    """The top level of a line too large to keep, read as it streams past in constant memory.

    Nested values become `[]` and long strings `""` (keys) or `[]` (values), so `head()` is a
    small JSON object with the line's top-level `jsonrpc`, `id`, `method`, `result`/`error`
    keys, or None if the line is not one complete JSON object (or its top level is too big).
    Only the framing is checked, not every byte: it decides whom to answer, nothing more.
    """

    __slots__ = (
        "out",
        "depth",
        "in_str",
        "esc",
        "key_next",
        "is_key",
        "str_at",
        "overflow",
        "started",
        "ended",
        "bad",
    )

    def __init__(self) -> None:
        self.out = bytearray()
        self.depth = 0  # 1 inside the top-level object, more inside nested values
        self.in_str = False
        self.esc = False  # the previous chunk ended inside a string on a backslash
        self.key_next = False  # the next top-level string is a key
        self.is_key = False  # the current top-level string is a key
        self.str_at = 0  # where the current top-level string starts in `out`
        self.overflow = False  # the current top-level string is too long to keep
        self.started = False
        self.ended = False
        self.bad = False

    def feed(self, data: bytes | bytearray, pos: int, end: int) -> None:
        out = self.out
        while pos < end and not self.bad:
            if self.in_str:
                if self.esc:  # the byte after a backslash that ended the previous chunk
                    self.esc = False
                    if self.depth == 1 and not self.overflow:
                        out += data[pos : pos + 1]
                    pos += 1
                    continue
                stop = _STRING_BODY.match(data, pos, end).end()  # type: ignore[union-attr]
                if self.depth == 1 and not self.overflow:
                    out += data[pos:stop]
                    if len(out) - self.str_at > _SKIM_STRING:
                        del out[self.str_at :]
                        self.overflow = True
                pos = stop
                if pos == end:
                    break
                if (
                    data[pos] == _BACKSLASH
                ):  # only at the end: the escaped byte is in the next chunk
                    self.esc = True
                    if self.depth == 1 and not self.overflow:
                        out.append(_BACKSLASH)
                    pos += 1
                    continue
                pos += 1  # the closing quote
                self.in_str = False
                if self.depth == 1:
                    if self.overflow:
                        out += b'""' if self.is_key else b"[]"
                    else:
                        out.append(_QUOTE)
                continue
            if self.depth >= 2:
                found = _NESTED_MARK.search(data, pos, end)
                if found is None:
                    break
                pos = found.end()
                mark = data[pos - 1]
                if mark == _QUOTE:
                    self.in_str = True
                elif mark in _OPENERS:
                    self.depth += 1
                else:
                    self.depth -= 1
                    if self.depth == 1:
                        out += b"[]"  # the nested value's placeholder
                continue
            if self.depth == 1:
                stop = _TOP_PLAIN.match(data, pos, end).end()  # type: ignore[union-attr]
                if stop > pos:
                    plain = bytes(data[pos:stop]).translate(None, b" \t\r\n")
                    if plain:
                        colon, comma = plain.rfind(b":"), plain.rfind(b",")
                        if colon != comma:
                            self.key_next = comma > colon
                        out += plain
                    pos = stop
                    continue
                mark = data[pos]
                pos += 1
                if mark == _QUOTE:
                    self.in_str, self.is_key, self.overflow = True, self.key_next, False
                    self.str_at = len(out)
                    out.append(_QUOTE)
                elif mark in _OPENERS:
                    self.depth = 2
                elif mark == 0x7D:  # the top-level object's closing brace
                    out.append(mark)
                    self.depth, self.ended = 0, True
                else:
                    self.bad = True  # a stray closing bracket
                continue
            # depth 0: before the top-level object, or after it
            stop = _TOP_PLAIN.match(data, pos, end).end()  # type: ignore[union-attr]
            if bytes(data[pos:stop]).strip(b" \t\r\n"):
                self.bad = True  # not an object, or trailing data after it
                break
            pos = stop
            if pos == end:
                break
            if self.started or data[pos] != 0x7B:
                self.bad = True
                break
            self.started = self.key_next = True
            self.depth = 1
            out.append(0x7B)
            pos += 1
        if len(out) > _SKIM_MAX:
            self.bad = True
            out.clear()

    def head(self) -> dict[str, Any] | None:
        """The line's top level as a small object, or None."""
        if self.bad or not self.ended:
            return None
        try:
            value = _decode(self.out.decode("utf-8"))
        except (ValueError, RecursionError):
            return None
        return value if value.__class__ is dict else None


class Connection:
    """One JSON-RPC peer connection; `run()` serves it until EOF."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        reader: Reader,
        writer: Writer,
        *,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
        tap: Tap | None = None,
    ) -> None:
        """`tap` sees every raw line (see `Tap`); with `ACP_WIRE_LOG=<path>` in the
        environment, a `WireLog` on that path is added as a second tap."""
        self.dispatcher = dispatcher
        self._reader = reader
        self._writer = writer
        self.max_message_size = max_message_size
        self.shutdown_grace = shutdown_grace
        self._next_id = 0
        self._pending: dict[tuple[bool, Any], tuple[asyncio.Future[Any], list[int]]] = {}
        self._inflight: dict[tuple[bool, Any], asyncio.Task[None]] = {}
        self._started: set[asyncio.Task[None]] = set()  # request handlers that began to run
        self._cancelled_by_peer: set[asyncio.Task[None]] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._notifications: asyncio.Queue[tuple[int, str, Any] | None] = asyncio.Queue()
        self._received = 0  # sequence number of the last notification received
        self._handled = 0  # sequence number of the last notification handled
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []  # responses held back by _after
        self._worker: asyncio.Task[None] | None = None
        self._eof = False  # the peer stopped sending: no response can arrive any more
        self._closed = False  # we closed our side: nothing more is written
        self._done = False  # shutdown finished: every queued notification handled or dropped
        self._wire_log = _wire_log_from_env()
        taps: list[Tap] = [] if tap is None else [tap]
        if self._wire_log is not None:
            taps.append(self._wire_log)
        self._taps: tuple[Tap, ...] = tuple(taps)
        self._tap_failed = False

    def _tap(self, direction: Direction, line: bytes) -> None:
        for tap in self._taps:
            try:
                tap(direction, line)
            except Exception:
                # Logged, never raised: a debugging aid must not break the connection.
                if not self._tap_failed:
                    self._tap_failed = True
                    _log.exception("the wire tap failed (later failures: debug log)")
                else:
                    _log.debug("the wire tap failed again", exc_info=True)

    def stats(self) -> dict[str, int]:
        """The size of every table the connection keeps per message; all 0 when nothing is
        in flight: our requests awaiting an answer (`pending`), the peer's requests being
        handled (`inflight`, `started`, `cancelled_by_peer`), answers and cancellations being
        sent (`background`), responses held back behind notifications (`waiters`), and
        notifications not yet handled (`queued_notifications`)."""
        return {
            "pending": len(self._pending),
            "inflight": len(self._inflight),
            "started": len(self._started),
            "cancelled_by_peer": len(self._cancelled_by_peer),
            "background": len(self._background),
            "waiters": len(self._waiters),
            "queued_notifications": self._notifications.qsize(),
        }

    # -- sending -----------------------------------------------------------------------
    async def _send(self, message: dict[str, Any]) -> None:
        data = _dumps(message)
        if self._closed:
            raise ConnectionClosed("connection closed")
        if self._taps:  # before write(): taps see the lines in the order they are written
            self._tap("out", data[:-1])
        try:
            # write() queues the whole message at once, so concurrent senders never
            # interleave and order is kept without a lock; drain() is the back-pressure.
            self._writer.write(data)
            await self._writer.drain()
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConnectionClosed(f"cannot write: {exc}") from exc

    async def request(self, method: str, params: Any, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result (raw JSON); errors raise RequestError.

        `params` None is left out of the message (JSON-RPC params are an object or an array).
        With `timeout` (seconds, counted from the call), a request still unanswered then is
        given up: `$/cancel_request` is sent for its id, it is forgotten (a late answer is
        ignored quietly) and `TimeoutError` is raised. Cancelling the calling task does the
        same and raises `CancelledError`. To stop a prompt turn, ACP has `session/cancel`
        (the agent then answers the prompt with `stopReason: "cancelled"`)."""
        if self._eof or self._closed:
            raise ConnectionClosed(f"connection closed; cannot call {method}")
        request_id = self._next_id
        self._next_id += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        seq: list[int] = [0]
        key = _id_key(request_id)
        self._pending[key] = (future, seq)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        timer = None if timeout is None else loop.call_later(timeout, _expire, future, method)
        try:
            await self._send(message)
            result = await future
        except asyncio.CancelledError:
            if not (self._eof or self._closed):
                # Tell the peer we no longer want the answer.
                self._spawn(self._cancel_quietly(request_id))
            raise
        except TimeoutError as exc:
            if future.done() and not future.cancelled() and future.exception() is exc:
                if not (self._eof or self._closed):
                    self._spawn(self._cancel_quietly(request_id))
            raise
        finally:
            self._pending.pop(key, None)
            if timer is not None:
                timer.cancel()
                if future.done() and not future.cancelled():
                    future.exception()  # retrieved: the send may have failed first
        if self._handled < seq[0]:
            await self._after(seq[0])
        return result

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        # The loop keeps only weak references to tasks: hold them until they finish.
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _cancel_quietly(self, request_id: Any) -> None:
        try:
            await self.notify(CANCEL_REQUEST, {"requestId": request_id})
        except ConnectionClosed:
            pass

    async def _after(self, seq: int) -> None:
        """Wait until the notifications that arrived before a response are handled."""
        if self._done or _notifying.get() is self:
            return  # a notification handler (or a task it started) cannot wait for the worker
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((seq, waiter))
        await waiter

    def _wake(self) -> None:
        handled, done = self._handled, self._done
        keep: list[tuple[int, asyncio.Future[None]]] = []
        for seq, waiter in self._waiters:
            if seq <= handled or done:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                keep.append((seq, waiter))
        self._waiters = keep

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification (`params` None is left out)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)

    async def cancel_request(self, request_id: Any) -> None:
        """Ask the peer to cancel one of our requests (`$/cancel_request`)."""
        await self.notify(CANCEL_REQUEST, {"requestId": request_id})

    # -- receiving -----------------------------------------------------------------------
    async def run(self) -> None:
        """Read and serve messages until EOF, then shut down cleanly."""
        self._worker = asyncio.ensure_future(self._notification_worker())
        buffer = bytearray()
        skim: _Skim | None = None  # set while an oversize line streams past
        limit = self.max_message_size
        try:
            while True:
                try:
                    chunk = await self._reader.read(_CHUNK)
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
                        await self._handle_line(line)
                    break
                start = 0
                while True:
                    end = chunk.find(b"\n", start)
                    if end < 0:
                        if skim is not None:
                            skim.feed(chunk, start, len(chunk))
                        else:
                            buffer += chunk[start:]
                            if len(buffer) > limit:
                                skim = _Skim()
                                skim.feed(buffer, 0, len(buffer))
                                buffer.clear()
                        break
                    if skim is not None:
                        skim.feed(chunk, start, end)
                        await self._refuse(skim)
                        skim = None
                    elif buffer:
                        buffer += chunk[start:end]
                        if len(buffer) > limit:
                            whole = _Skim()
                            whole.feed(buffer, 0, len(buffer))
                            await self._refuse(whole)
                        else:
                            line = bytes(buffer)
                            if self._taps:
                                self._tap("in", line)
                            await self._handle_line(line)
                        buffer.clear()
                    elif end - start > limit:
                        whole = _Skim()
                        whole.feed(chunk, start, end)
                        await self._refuse(whole)
                    else:  # the common case: a whole line inside one chunk, no copy into buffer
                        line = chunk[start:end]
                        if self._taps:
                            self._tap("in", line)
                        await self._handle_line(line)
                    start = end + 1
        finally:
            await self._shutdown()

    async def _refuse(self, skim: _Skim) -> None:
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
            msg_id if "id" in head and _valid_id(msg_id) else None,
            RequestError.invalid_request(detail),
        )

    async def _handle_line(self, line: bytes) -> None:
        try:
            message = _loads(line)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            if line.strip():  # blank lines are tolerated, not answered
                await self._reply_error(None, RequestError.parse_error(str(exc)[:200]))
            return
        if message.__class__ is not dict:
            detail = (
                "batch requests are not supported"
                if isinstance(message, list)
                else "a message must be a JSON object"
            )
            await self._reply_error(None, RequestError.invalid_request(detail))
            return
        method = message.get("method")
        if method is None and ("result" in message or "error" in message):
            self._resolve(message)  # a response: never answered, whatever is wrong with it
            return
        has_id = "id" in message
        msg_id = message.get("id")
        reply_id = msg_id if has_id and _valid_id(msg_id) else None
        if message.get("jsonrpc") != "2.0":
            await self._reply_error(
                reply_id, RequestError.invalid_request('"jsonrpc" must be "2.0"')
            )
            return
        if method is None:
            await self._reply_error(
                reply_id, RequestError.invalid_request("not a request, notification or response")
            )
            return
        if method.__class__ is not str:
            await self._reply_error(
                reply_id, RequestError.invalid_request('"method" must be a string')
            )
            return
        params = message.get("params")
        if params is not None and params.__class__ is not dict and params.__class__ is not list:
            # Not a valid request, so not a notification either: answered (id null if absent).
            await self._reply_error(
                reply_id, RequestError.invalid_request('"params" must be an object or an array')
            )
            return
        if not has_id:
            if method == CANCEL_REQUEST:
                self._peer_cancel(params)
                return
            self._received += 1
            self._notifications.put_nowait((self._received, method, params))
            return
        if not _valid_id(msg_id):
            await self._reply_error(
                None, RequestError.invalid_request("id must be a string, an integer or null")
            )
            return
        key = _id_key(msg_id)
        if key in self._inflight:
            await self._reply_error(
                msg_id, RequestError.invalid_request("a request with this id is in flight")
            )
            return
        task = asyncio.ensure_future(self._serve_request(msg_id, method, params))
        self._inflight[key] = task
        task.add_done_callback(self._forget(key, msg_id))

    def _forget(self, key: tuple[bool, Any], msg_id: Any) -> Callable[[asyncio.Task[None]], None]:
        def forget(task: asyncio.Task[None]) -> None:
            self._inflight.pop(key, None)
            started = task in self._started
            self._started.discard(task)
            if task in self._cancelled_by_peer:
                self._cancelled_by_peer.discard(task)
                if not started and task.cancelled():
                    # Cancelled before its handler ever ran (the request and its
                    # `$/cancel_request` came in one read): _serve_request could not answer.
                    self._spawn(self._reply_error(msg_id, RequestError.cancelled()))

        return forget

    def _fail_pending(self, msg_id: Any, error: Exception) -> bool:
        """Fail our request `msg_id` with `error`; False if no such request is waiting."""
        entry = self._pending.get(_id_key(msg_id)) if _valid_id(msg_id) else None
        if entry is None:
            return False
        future, seq = entry
        seq[0] = self._received
        if not future.done():
            future.set_exception(error)
        return True

    def _resolve(self, message: dict[str, Any]) -> None:
        msg_id = message.get("id")
        entry = self._pending.get(_id_key(msg_id)) if _valid_id(msg_id) else None
        if entry is None:
            if (
                isinstance(msg_id, int)
                and not isinstance(msg_id, bool)
                and 0 <= msg_id < self._next_id
            ):
                # One of ours that timed out or was cancelled (or answered twice).
                _log.debug("late response for id %s ignored", msg_id)
            elif "error" in message:
                _log.warning(
                    "error response for unknown id %s: %s", brief(msg_id), brief(message["error"])
                )
            else:
                _log.debug("response for unknown id %s ignored", brief(msg_id))
            return
        future, seq = entry
        # Notifications that arrived before this response are delivered before it.
        seq[0] = self._received
        if future.done():
            return
        if message.get("jsonrpc") != "2.0":
            future.set_exception(InvalidResponse('"jsonrpc" must be "2.0"'))
        elif "error" in message:
            future.set_exception(RequestError.from_dict(message["error"]))
        else:
            future.set_result(message.get("result"))

    def _peer_cancel(self, params: Any) -> None:
        if (
            not isinstance(params, dict)
            or "requestId" not in params
            or not _valid_id(params["requestId"])
        ):
            return
        task = self._inflight.get(_id_key(params["requestId"]))
        if task is not None and not task.done():
            self._cancelled_by_peer.add(task)
            task.cancel()

    async def _serve_request(self, msg_id: Any, method: str, params: Any) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._started.add(task)
        try:
            result = await self.dispatcher.request(method, params)
        except asyncio.CancelledError:
            if task in self._cancelled_by_peer:
                await self._reply_error(msg_id, RequestError.cancelled())
                return
            if _cancelled(task):
                raise
            # Nobody cancelled this request: the handler awaited something cancelled elsewhere.
            _log.exception("handler for %s failed", brief(method))
            await self._reply_error(msg_id, RequestError.internal_error())
            return
        except RequestError as exc:
            await self._reply_error(msg_id, exc)
            return
        except ConnectionClosed as exc:  # the peer went away mid-handler: nobody to answer
            _log.debug("handler for %s stopped: %s", brief(method), exc)
            return
        except Exception:
            # The traceback goes to our log (stderr), never to the peer.
            _log.exception("handler for %s failed", brief(method))
            await self._reply_error(msg_id, RequestError.internal_error())
            return
        try:
            await self._send({"jsonrpc": "2.0", "id": msg_id, "result": result})
        except ConnectionClosed:
            pass
        except (
            Exception
        ) as exc:  # the handler returned something that is not JSON (nothing was written)
            _log.error("result of %s is not JSON: %s", brief(method), brief(exc))
            await self._reply_error(msg_id, RequestError.internal_error())

    async def _reply_error(self, msg_id: Any, error: RequestError) -> None:
        try:
            try:
                await self._send({"jsonrpc": "2.0", "id": msg_id, "error": error.to_dict()})
            except (TypeError, ValueError):  # error data (or code, message) that is not JSON
                # A subclass may have put anything there: checked, whatever the annotations say.
                raw_code: Any = error.code
                raw_message: Any = error.message
                code = raw_code if raw_code.__class__ is int else INTERNAL_ERROR
                message = raw_message if isinstance(raw_message, str) else "error"
                try:
                    await self._send(
                        {
                            "jsonrpc": "2.0",
                            "id": msg_id,
                            "error": {"code": code, "message": message},
                        }
                    )
                except (TypeError, ValueError):
                    await self._send(
                        {
                            "jsonrpc": "2.0",
                            "id": msg_id,
                            "error": {"code": code, "message": "error"},
                        }
                    )
        except ConnectionClosed:
            pass

    async def _notification_worker(self) -> None:
        _notifying.set(self)
        queue = self._notifications
        dispatcher = self.dispatcher
        worker = asyncio.current_task()
        while True:
            item = await queue.get()
            if item is None:
                return
            seq, method, params = item
            try:
                await dispatcher.notification(method, params)
            except asyncio.CancelledError:
                if _cancelled(worker):
                    raise
                _log.exception("notification handler for %s failed", brief(method))
            except ConnectionClosed as exc:
                _log.debug("notification handler for %s stopped: %s", brief(method), exc)
            except Exception:
                _log.exception("notification handler for %s failed", brief(method))
            finally:
                self._handled = seq
                if self._waiters:
                    self._wake()

    async def _shutdown(self) -> None:
        """At EOF: fail our pending requests, give the handlers already running (and the
        notifications already queued) `shutdown_grace` seconds to finish and answer, then
        cancel what is left."""
        self._eof = True
        for future, _ in list(self._pending.values()):
            if not future.done():
                future.set_exception(ConnectionClosed("the peer closed the connection"))
        self._notifications.put_nowait(None)
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

    async def close(self) -> None:
        """Stop writing; the peer sees EOF."""
        self._closed = True
        try:
            self._writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass
        if self._done and self._wire_log is not None:  # nothing more will be read either
            self._wire_log.close()


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
        stream_reader = asyncio.StreamReader(limit=_CHUNK)
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
