"""One remote connection's plumbing: the agent's `Connection` served over in-memory queues
instead of stdio, with bounded buffers both ways (part of `remote`).

The agent runs on the same JSON-RPC runtime as over stdio: its reader is an `Inbox` of whole
messages from the transport, its writer an `Outbox` that hands each message it writes to
the transport's `Channel`s. Both are bounded in bytes: a client sending faster than the agent
reads waits on `Inbox.put` (the transport stops reading its socket), and an agent writing
faster than the client reads waits in `drain()` (its handler pauses), so a slow reader never
grows the server's memory beyond about `send_buffer` bytes per connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from .agent import Agent, ClientProxy
from .connection import Connection
from .dispatch import Dispatcher
from .methods import AGENT_HANDLES
from .remote_limits import Admission, Budget, Limits
from .types import DecodeContext

_log = logging.getLogger(__name__)


_LARGE = 64 * 1024  # a read this large lets the connection dispatch it before it counts as done


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


# Every connection holds these while idle, so they are lean: lists, not deques, and one
# future for the one reader instead of an asyncio.Event (each Event carries a deque, ~0.8 KiB).
class Inbox:
    """Client->agent messages (each ending in a newline), the connection's `Reader`: `read()`
    returns all that is queued. `put` waits while more than `limit` bytes are unread (but
    always takes one message). What a read returned stays taken from the app's budget until
    the next read: the connection parses and dispatches it in between, in more copies."""

    __slots__ = ("_items", "_size", "_limit", "_eof", "_reader", "_room", "_budget", "_lent")

    def __init__(self, limit: int, budget: Budget | None = None) -> None:
        self._budget = budget  # the app's: what is queued here was taken from it by the transport
        self._items: list[bytes] = []
        self._size = 0
        self._limit = limit
        self._eof = False
        self._reader: asyncio.Future[None] | None = None
        self._room: asyncio.Event | None = None  # made when a put first has to wait
        self._lent = 0  # bytes the last read returned, given back at the next

    async def put(self, data: bytes) -> bool:
        """Queue one message (taken from the budget by the caller); False if the connection is
        over (the message is dropped and given back)."""
        while self._size and self._size + len(data) > self._limit and not self._eof:
            if self._room is None:
                self._room = asyncio.Event()
            self._room.clear()
            await self._room.wait()
        if self._eof:
            if self._budget is not None:
                self._budget.give(len(data))
            return False
        self._items.append(data)
        self._size += len(data)
        _wake(self._reader)
        return True

    def close(self) -> None:
        """EOF for the agent: it reads what is queued, then b""."""
        self._eof = True
        _wake(self._reader)
        if self._room is not None:
            self._room.set()

    async def read(self, n: int = -1) -> bytes:
        if self._lent:  # the connection is done with what the last read returned
            if self._lent >= _LARGE:  # once its notification worker has run (it holds the parse)
                await asyncio.sleep(0)
            if self._budget is not None:
                self._budget.give(self._lent)
            self._lent = 0
        while not self._items:
            if self._eof:
                return b""
            self._reader = asyncio.get_running_loop().create_future()
            try:
                await self._reader
            finally:
                self._reader = None
        items, self._items, self._lent, self._size = self._items, [], self._size, 0
        if self._room is not None:
            self._room.set()
        return items[0] if len(items) == 1 else b"".join(items)

    def release(self) -> None:
        """Drop what the agent will never read (its connection ended), and give it back."""
        if self._budget is not None:
            self._budget.give(self._size + self._lent)
        self._items, self._size, self._lent = [], 0, 0


class Channel:
    """Agent->client messages for one consumer (a WebSocket, or one SSE stream), which takes
    them in batches (`take`) and gives back what it could not send (`untake`)."""

    __slots__ = ("items", "_waiter", "stop")

    def __init__(self) -> None:
        self.items: list[bytes] = []
        self._waiter: asyncio.Future[None] | None = None
        self.stop: asyncio.Event | None = None  # set to end the SSE stream reading this

    def push(self, line: bytes) -> None:
        self.items.append(line)
        _wake(self._waiter)

    def waiter(self) -> asyncio.Future[None] | None:
        """For a consumer awaiting the future itself (no coroutine frame kept per connection
        while it waits): what `wait` would await, or None if something is pushed already."""
        if self.items:
            return None
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        return waiter

    def wake(self) -> None:
        """End a `wait` now, with nothing pushed (its consumer is told to stop elsewhere)."""
        _wake(self._waiter)

    async def wait(self) -> None:
        """Until something is pushed."""
        if not self.items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def take(self) -> list[bytes]:
        items, self.items = self.items, []
        return items

    def untake(self, items: list[bytes]) -> None:
        self.items[:0] = items


class Outbox:
    """The agent connection's `Writer`: `write` gets one whole message (the connection writes
    each in one call) and routes it to a channel; `drain` waits while more than `limit` bytes
    are routed but not yet sent."""

    __slots__ = ("_route", "_limit", "size", "closed", "_room")

    def __init__(self, route: Callable[[bytes], None], limit: int) -> None:
        self._route = route
        self._limit = limit
        self.size = 0
        self.closed = False
        self._room: asyncio.Event | None = None  # made when a drain first has to wait

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("the remote connection is closed")
        self.size += len(data)
        self._route(data)

    def sent(self, data: bytes) -> None:
        """A consumer sent `data` (taken from a channel) to the client."""
        self.size -= len(data)
        if self._room is not None and self.size <= self._limit:
            self._room.set()

    async def drain(self) -> None:
        while self.size > self._limit and not self.closed:
            if self._room is None:
                self._room = asyncio.Event()
            self._room.clear()
            await self._room.wait()

    def close(self) -> None:
        self.closed = True
        if self._room is not None:
            self._room.set()


class Link:
    """One remote connection: its id, its agent (from the factory) served by a `Connection`
    over an `Inbox`/`Outbox` pair, the activity clock the idle timeout reads, and the hooks
    run once when it ends (`on_close`)."""

    __slots__ = (
        "id",
        "inbox",
        "outbox",
        "connection",
        "last_activity",
        "closed",
        "task",
        "_hooks",
        "client",
        "messages",
        "streamed",
    )

    def __init__(
        self,
        agent: Agent,
        route: Callable[[bytes], None],
        *,
        ctx: DecodeContext | None,
        max_message_size: int,
        send_buffer: int,
        shutdown_grace: float,
        limits: Limits | None = None,
        client: str = "",
        budget: Budget | None = None,
        client_pace: Callable[[], float] | None = None,
    ) -> None:
        self.id = os.urandom(16).hex()  # 128 random bits: not guessable
        self.client = client  # the client's address, for the per-client cap
        self.messages = 0  # received: a connection with at most one and no stream is fresh
        self.streamed = False  # an SSE stream was opened
        self.inbox = Inbox(max(send_buffer, 1), budget)
        self.outbox = Outbox(route, send_buffer)
        self.connection = Connection(
            Dispatcher(agent, AGENT_HANDLES, ctx),
            self.inbox,
            self.outbox,
            max_message_size=max_message_size,
            shutdown_grace=shutdown_grace,
            admit=None if limits is None else Admission(limits, client_pace),
            request_timeout=None if limits is None else limits.request_timeout,
            max_running=None if limits is None else limits.max_running,
            slot_lease=None if limits is None else limits.slot_lease,
        )
        agent.on_connect(ClientProxy(self.connection, ctx))
        loop = asyncio.get_running_loop()
        self.last_activity = loop.time()
        self.closed = False  # set once the link is being torn down
        self._hooks: list[Callable[[], None]] = []
        self.task: asyncio.Task[None] = loop.create_task(self.connection.run())
        self.task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:  # a bug in the runtime
            _log.error("remote connection %s failed", self.id, exc_info=task.exception())
        self.outbox.close()
        self._close()
        self.inbox.release()

    def on_close(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run `hook` when the link ends (now if it has); returns the undo."""
        if self.closed:
            hook()
        else:
            self._hooks.append(hook)
        return lambda: self._hooks.remove(hook) if hook in self._hooks else None

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self.inbox.close()
            hooks, self._hooks = self._hooks, []
            for hook in hooks:
                hook()

    def end(self) -> None:
        """Start ending the link now (counted as closed at once); `close` waits for it."""
        self._close()

    def touch(self) -> None:
        self.last_activity = asyncio.get_running_loop().time()

    async def deliver(self, data: bytes) -> bool:
        """One client->agent message (no newline inside: see `frame`)."""
        self.touch()
        self.messages += 1
        return await self.inbox.put(data)

    @property
    def fresh(self) -> bool:
        """Initialized at most, never used since: what a flood of bare connections looks like."""
        return self.messages <= 1 and not self.streamed

    def idle_for(self, now: float) -> float:
        """Seconds with no traffic and nothing in flight (0 while busy); a connection whose
        queued output is stuck behind a client that stopped reading counts as idle."""
        stats = self.connection.stats()
        if self.outbox.size == 0 and (stats["inflight"] or stats["pending"]):
            return 0.0
        return now - self.last_activity

    async def close(self) -> None:
        """End the connection: EOF for the agent, whose handlers still running are cancelled
        (after `shutdown_grace`); returns once its tasks are done."""
        self._close()
        await asyncio.wait({self.task})  # its failure, if any, was logged by _ended
