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

Beside this module: `jsonline` (parsing and encoding a line, skimming an oversize one),
`streams` (the reader/writer shapes, `stdio_streams`) and `wiretap` (`Tap`, `WireLog`);
their public names are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final

from .dispatch import INTERNAL_ERROR, Dispatcher, RequestError, brief
from .jsonline import HELD_FROM, Skim, dumps, loads, loads_held
from .slots import Slots, owner
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

DEFAULT_MAX_MESSAGE_SIZE: Final = 64 * 1024 * 1024
DEFAULT_SHUTDOWN_GRACE: Final = 1.0
CANCEL_REQUEST: Final = "$/cancel_request"
_NOTIFY_HEADS: dict[str, bytes] = {}  # notify_encoded: method -> its line's head
# Every connection's queue of notifications before its first: never appended to (`maxlen` 0
# would drop what was), replaced by a deque of its own with the worker.
_NO_NOTIFICATIONS: Final[deque[tuple[int, str, Any]]] = deque(maxlen=0)

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


def _wire_log_from_env() -> WireLog | None:
    path = os.environ.get(WIRE_LOG_ENV)
    if not path:
        return None
    try:
        return WireLog(path)
    except OSError as exc:
        _log.warning("cannot open the wire log %s=%s: %s", WIRE_LOG_ENV, path, exc)
        return None


def _expire(future: asyncio.Future[Any], method: str) -> None:
    if not future.done():
        future.set_exception(TimeoutError(f"no answer to {method} in time"))


def _dropped(table: dict[Any, Any], key: Any) -> None:
    """`key` out of `table`, and the table's memory given back once it is empty."""
    table.pop(key, None)
    if not table:
        table.clear()


def _valid_id(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, str)
        or (isinstance(value, int) and not isinstance(value, bool))
    )


def _id_key(value: Any) -> tuple[bool, Any]:
    return (isinstance(value, str), value)


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
        admit: Callable[[str, Any, int], RequestError | float | None] | None = None,
        request_timeout: float | None = None,
        max_running: int | None = None,
        slot_lease: float | None = None,
    ) -> None:
        """`tap` sees every raw line (see `Tap`); with `ACP_WIRE_LOG=<path>` in the
        environment, a `WireLog` on that path is added as a second tap. `admit(method,
        params, handlers_running)` may refuse a request before its handler starts (its error
        is the answer: the remote transport's caps) or return the seconds its handler waits
        first (a rate limit); `request_timeout` is the `timeout` of every `request` that names
        none; `max_running` bounds the handlers running at once, each for at most `slot_lease`
        seconds (see `Slots`)."""
        self.dispatcher = dispatcher
        self._reader = reader
        self._writer = writer
        self.max_message_size = max_message_size
        self.shutdown_grace = shutdown_grace
        self._admit = admit
        self.request_timeout = request_timeout
        self._slots = None if max_running is None else Slots(max_running, slot_lease)
        self._next_id = 0
        self._pending: dict[tuple[bool, Any], tuple[asyncio.Future[Any], list[int]]] = {}
        # Dicts, not sets, for the tasks too, each cleared as it empties: an empty set is 216
        # bytes, an empty dict 64, and one that held a key keeps its table until `clear()`.
        # Every idle connection of a remote server holds these (`_dropped`).
        self._inflight: dict[tuple[bool, Any], asyncio.Task[None]] = {}
        self._started: dict[asyncio.Task[None], None] = {}  # request handlers that began to run
        self._cancelled_by_peer: dict[asyncio.Task[None], None] = {}
        self._background: dict[asyncio.Task[None], None] = {}
        # Notifications not yet handled, in arrival order. The worker task and its deque (~0.8
        # KiB) are made with the first one (many connections never get one: a remote server
        # holds thousands of idle ones); until then, the shared empty `_NO_NOTIFICATIONS`. A
        # deque and one wake-up future, set only while the worker is idle, instead of an
        # asyncio.Queue: its put/get pair cost more per message than parsing it.
        self._notifications: deque[tuple[int, str, Any]] = _NO_NOTIFICATIONS
        self._idle: asyncio.Future[None] | None = None  # the idle worker waits on it
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
            "queued_notifications": len(self._notifications),
        }

    # -- sending -----------------------------------------------------------------------
    async def _send(self, message: dict[str, Any]) -> None:
        await self._write(dumps(message))

    async def _write(self, data: bytes) -> None:
        """Write one encoded message (a line of JSON ending in a newline)."""
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
        if timeout is None:
            timeout = self.request_timeout
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        seq: list[int] = [0]
        key = _id_key(request_id)
        self._pending[key] = (future, seq)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        timer = None if timeout is None else loop.call_later(timeout, _expire, future, method)
        # The handler whose work this is gives its slot up while the peer answers (`Slots`).
        holder = None if self._slots is None else owner.get()
        if holder is not None and holder[0] is self._slots:
            holder[0].away(holder[1])
        else:
            holder = None
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
            if holder is not None:
                holder[0].back(holder[1])
            _dropped(self._pending, key)
            if timer is not None:
                timer.cancel()
            if future.done() and not future.cancelled():
                # Retrieved: the send may have failed first (the peer gone mid-write: EOF
                # failed the future, then the write raised), which nothing else awaits.
                future.exception()
        if self._handled < seq[0]:
            await self._after(seq[0])
        return result

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        # The loop keeps only weak references to tasks: hold them until they finish.
        task = asyncio.ensure_future(coro)
        self._background[task] = None
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        _dropped(self._background, task)

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
        await self._write(dumps(message))  # not via _send: a coroutine less per notification

    async def notify_encoded(self, method: str, params: bytes) -> None:
        """`notify` with `params` already encoded: one JSON object as UTF-8, no newline. For a
        caller that keeps the bytes it sends (the session layer records each update as sent)."""
        head = _NOTIFY_HEADS.get(method)
        if head is None:  # `{"jsonrpc":"2.0","method":"..."` (the line less its `}` and newline)
            head = dumps({"jsonrpc": "2.0", "method": method})[:-2]
            if len(_NOTIFY_HEADS) < 64:  # a method name is one of a schema's few
                _NOTIFY_HEADS[method] = head
        await self._write(head + b',"params":' + params + b"}\n")

    async def cancel_request(self, request_id: Any) -> None:
        """Ask the peer to cancel one of our requests (`$/cancel_request`)."""
        await self.notify(CANCEL_REQUEST, {"requestId": request_id})

    # -- receiving -----------------------------------------------------------------------
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
            msg_id if "id" in head and _valid_id(msg_id) else None,
            RequestError.invalid_request(detail),
        )

    def _handle_line(self, line: bytes, newline: bool = False) -> Coroutine[Any, Any, None] | None:
        """Take one line in (`newline`: it still ends in its newline); return the error reply
        still to be awaited, or None. The read loop awaits it (so garbage is back-pressured
        too). A plain function, not a coroutine: most lines need no await, and a coroutine per
        line costs more than the rest of it."""
        try:
            message = loads(line) if len(line) < HELD_FROM else loads_held(line)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            if newline:  # the error as the line's without it (positions count lines)
                return self._handle_line(line[:-1])
            if line.strip():  # blank lines are tolerated, not answered
                return self._reply_error(None, RequestError.parse_error(str(exc)[:200]))
            return None
        if message.__class__ is not dict:
            detail = (
                "batch requests are not supported"
                if isinstance(message, list)
                else "a message must be a JSON object"
            )
            return self._reply_error(None, RequestError.invalid_request(detail))
        method = message.get("method")
        if method.__class__ is str and "id" not in message and method != CANCEL_REQUEST:
            # The hot path, a valid notification (most of a prompt turn's traffic): the same
            # checks as below, in the order that decides it soonest.
            params = message.get("params")
            if message.get("jsonrpc") == "2.0" and (
                params.__class__ is dict or params is None or params.__class__ is list
            ):
                # _enqueue, inlined: the worker only needs a call when idle or not started.
                self._received = seq = self._received + 1
                if self._worker is None:
                    self._notifications = deque()
                self._notifications.append((seq, method, params))
                if self._idle is not None or self._worker is None:
                    self._start_or_wake()
                return None
        if method is None and ("result" in message or "error" in message):
            self._resolve(message)  # a response: never answered, whatever is wrong with it
            return None
        has_id = "id" in message
        msg_id = message.get("id")
        reply_id = msg_id if has_id and _valid_id(msg_id) else None
        if message.get("jsonrpc") != "2.0":
            return self._reply_error(
                reply_id, RequestError.invalid_request('"jsonrpc" must be "2.0"')
            )
        if method is None:
            return self._reply_error(
                reply_id, RequestError.invalid_request("not a request, notification or response")
            )
        if method.__class__ is not str:
            return self._reply_error(
                reply_id, RequestError.invalid_request('"method" must be a string')
            )
        params = message.get("params")
        if params is not None and params.__class__ is not dict and params.__class__ is not list:
            # Not a valid request, so not a notification either: answered (id null if absent).
            return self._reply_error(
                reply_id, RequestError.invalid_request('"params" must be an object or an array')
            )
        if not has_id:
            if method == CANCEL_REQUEST:
                self._peer_cancel(params)
                return None
            self._enqueue(method, params)
            return None
        if not _valid_id(msg_id):
            return self._reply_error(
                None, RequestError.invalid_request("id must be a string, an integer or null")
            )
        key = _id_key(msg_id)
        if key in self._inflight:
            return self._reply_error(
                msg_id, RequestError.invalid_request("a request with this id is in flight")
            )
        delay = 0.0
        if self._admit is not None:
            refusal = self._admit(method, params, len(self._inflight))
            if isinstance(refusal, RequestError):
                return self._reply_error(msg_id, refusal)
            if refusal is not None:
                delay = refusal
        task = asyncio.ensure_future(self._serve_request(msg_id, method, params, delay))
        self._inflight[key] = task
        task.add_done_callback(self._forget(key, msg_id))
        return None

    def _enqueue(self, method: str, params: Any) -> None:
        """Queue a notification for the worker; wake it if idle, start it the first time."""
        self._received += 1
        if self._worker is None:
            self._notifications = deque()
        self._notifications.append((self._received, method, params))
        self._start_or_wake()

    def _start_or_wake(self) -> None:
        idle = self._idle
        if idle is not None:
            self._idle = None
            if not idle.done():
                idle.set_result(None)
        elif self._worker is None:
            self._worker = asyncio.ensure_future(self._notification_worker())

    def _forget(self, key: tuple[bool, Any], msg_id: Any) -> Callable[[asyncio.Task[None]], None]:
        def forget(task: asyncio.Task[None]) -> None:
            _dropped(self._inflight, key)
            if self._slots is not None:
                self._slots.give(task)
            started = task in self._started
            _dropped(self._started, task)
            if task in self._cancelled_by_peer:
                _dropped(self._cancelled_by_peer, task)
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
            self._cancelled_by_peer[task] = None
            task.cancel()

    async def _serve_request(
        self, msg_id: Any, method: str, params: Any, delay: float = 0.0
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._started[task] = None
        try:
            if delay:
                await asyncio.sleep(delay)
            if self._slots is not None and task is not None:
                await self._slots.take(task)
                owner.set((self._slots, task))  # this task's context, and its children's
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
            await self._reply_error(msg_id, exc, method)
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

    async def _reply_error(self, msg_id: Any, error: RequestError, method: str = "") -> None:
        try:
            try:
                await self._send({"jsonrpc": "2.0", "id": msg_id, "error": error.to_dict()})
            except (TypeError, ValueError) as exc:  # error data (or code, message) not JSON
                # Reported, never dropped silently: the peer still gets a well-formed error.
                _log.error("error of %s sent without its data: %s", brief(method), str(exc)[:300])
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
        dispatcher = self.dispatcher
        # The handler's call straight from the dispatcher (one coroutine less per message),
        # unless a subclass routes notifications its own way.
        notification_call: Callable[[str, Any], Awaitable[None] | None] = (
            dispatcher.notification_call
            if type(dispatcher).notification is Dispatcher.notification
            else dispatcher.notification
        )
        worker = asyncio.current_task()
        queue = self._notifications
        loop = asyncio.get_running_loop()
        while True:
            if not queue:
                if self._eof:  # nothing more can arrive
                    return
                idle: asyncio.Future[None] = loop.create_future()
                self._idle = idle
                try:
                    await idle
                finally:
                    self._idle = None
                continue
            seq, method, params = queue.popleft()
            try:
                call = notification_call(method, params)
                if call is not None:
                    await call
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
                params = call = None  # dropped before the worker idles: it may be a large message
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

    async def close(self) -> None:
        """Stop writing; the peer sees EOF."""
        self._closed = True
        try:
            self._writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass
        if self._done and self._wire_log is not None:  # nothing more will be read either
            self._wire_log.close()
