"""The state of a JSON-RPC connection and its sending half (part of `connection`): our
requests (`request`, matched to their answers by id, `timeout=`), notifications, error
answers, the wire taps, and the errors the connection raises. `connection_inbound` handles
what arrives, `connection` reads it and shuts down at EOF.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import sys
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Final

from .dispatch import INTERNAL_ERROR, Dispatcher, RequestError, brief
from .jsonline import dumps
from .slots import Slots, dropped, owner
from .streams import Reader, Writer
from .wiretap import WIRE_LOG_ENV, Direction, Tap, WireLog

# The logger of `connection`, whose part this is (as before the split).
_log = logging.getLogger(__name__.rpartition(".")[0] + ".connection")

DEFAULT_MAX_MESSAGE_SIZE: Final = 64 * 1024 * 1024
DEFAULT_SHUTDOWN_GRACE: Final = 1.0
CANCEL_REQUEST: Final = "$/cancel_request"
_NOTIFY_HEADS: dict[str, bytes] = {}  # notify_encoded: method -> its line's head
# Every connection's queue of notifications before its first: never appended to (`maxlen` 0
# would drop what was), replaced by a deque of its own with the worker.
_NO_NOTIFICATIONS: Final[deque[tuple[int, str, Any]]] = deque(maxlen=0)

# The connection whose notification is being handled, in the worker and every task a
# notification handler starts (tasks inherit it): their requests must not wait for the worker.
notifying: contextvars.ContextVar[ConnectionBase | None] = contextvars.ContextVar(
    "acp_notifying", default=None
)


def cancelled_itself(task: asyncio.Task[Any] | None) -> bool:
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


def valid_id(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, str)
        or (isinstance(value, int) and not isinstance(value, bool))
    )


def id_key(value: Any) -> tuple[bool, Any]:
    return (isinstance(value, str), value)


class ConnectionBase:
    """A connection's state and its sending half; `Connection` is the whole."""

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
        # Every idle connection of a remote server holds these (`dropped`).
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
        key = id_key(request_id)
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
            dropped(self._pending, key)
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
        dropped(self._background, task)

    async def _cancel_quietly(self, request_id: Any) -> None:
        try:
            await self.notify(CANCEL_REQUEST, {"requestId": request_id})
        except ConnectionClosed:
            pass

    async def _after(self, seq: int) -> None:
        """Wait until the notifications that arrived before a response are handled."""
        if self._done or notifying.get() is self:
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

    async def close(self) -> None:
        """Stop writing; the peer sees EOF."""
        self._closed = True
        try:
            self._writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass
        if self._done and self._wire_log is not None:  # nothing more will be read either
            self._wire_log.close()
