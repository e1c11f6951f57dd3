"""Turns for a connection's request handlers: at most `limit` hold a slot (run) at once, the
others wait for one in arrival order. A flood of requests on one connection then takes the
event loop a few handlers at a time, and the loop's other connections get their turns in
between; the requests are still read, admitted and answered, only started later.

A handler waiting on the peer (a request to the other side, e.g. a permission prompt, from the
handler or from a task it started, which shares its context: `owner`) gives its slot up for
the wait: only the peer can end that wait, and the peer may be waiting for one of its queued
requests first. Back from the wait, it runs without queueing again.

A slot is a lease (`lease` seconds): a handler still running when it ends runs on without
counting, so long turns (a model call, a tool run) never keep a connection's other requests
(a new session, a list, another session's prompt) waiting for them to finish; a flood of
cheap requests is still started a few at a time."""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from typing import Any

__all__ = ["Slots", "dropped", "owner"]

# The slot-holding handler whose work the current task does (tasks it starts inherit it).
owner: contextvars.ContextVar[tuple[Slots, asyncio.Task[Any]] | None] = contextvars.ContextVar(
    "acp_slot_owner", default=None
)


def dropped(table: dict[Any, Any], key: Any) -> None:
    """`key` out of `table`; once empty, the table's memory is given back (a dict that held a
    key keeps its hash table until `clear()`). The connection's task tables use it too."""
    table.pop(key, None)
    if not table:
        table.clear()


class Slots:
    """Slots for tasks; `take` waits for one (first come, first served), `give` frees it."""

    __slots__ = ("_limit", "_lease", "_running", "_holders", "_waiting", "_away", "_leases")

    def __init__(self, limit: int, lease: float | None = None) -> None:
        if limit < 1:
            raise ValueError(f"a slot limit must be positive, got {limit!r}")
        if lease is not None and not lease > 0:
            raise ValueError(f"a slot lease must be positive seconds or None, got {lease!r}")
        self._limit = limit
        self._lease = lease
        self._leases: dict[asyncio.Task[Any], asyncio.TimerHandle] = {}  # holders' lease ends
        self._running = 0  # slots held, each by one task in _holders
        # A dict, cleared as it empties, like every table here (see `dropped`): an idle
        # connection holds its Slots, and an empty set is 216 bytes, an empty dict 64.
        self._holders: dict[asyncio.Task[Any], None] = {}
        # Made when a handler first has to wait: most connections never do, and every idle one
        # holds its Slots (an empty deque alone is 0.6 KiB).
        self._waiting: deque[asyncio.Future[None]] | None = None
        self._away: dict[asyncio.Task[Any], int] = {}  # holders waiting on the peer: how many waits

    @property
    def waiting(self) -> int:
        return 0 if self._waiting is None else len(self._waiting)

    @property
    def running(self) -> int:
        """Slots held now (by handlers within their lease)."""
        return self._running

    async def take(self, task: asyncio.Task[Any]) -> None:
        """Until `task` holds a slot. Cancelled while waiting, it holds none (or holds the one
        just handed over, which `give` frees: the caller calls it in any case)."""
        if self._running < self._limit and not self._waiting:
            self._running += 1
            self._hold(task)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = self._waiting
        if waiting is None:
            waiting = self._waiting = deque()
        waiting.append(waiter)
        try:
            await waiter  # `give` handed its slot over: already counted
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._hold(task)
            else:
                waiting.remove(waiter)
            raise
        self._hold(task)

    def _hold(self, task: asyncio.Task[Any]) -> None:
        self._holders[task] = None
        if self._lease is not None:
            loop = asyncio.get_running_loop()
            self._leases[task] = loop.call_later(self._lease, self._lease_ended, task)

    def _lease_ended(self, task: asyncio.Task[Any]) -> None:
        dropped(self._leases, task)
        self._hand_over(task)  # it runs on, uncounted; a later `give` or `away` finds no slot

    def give(self, task: asyncio.Task[Any]) -> None:
        """`task` is done: its slot (if it holds one) goes to the first waiter."""
        dropped(self._away, task)
        if task in self._holders:
            self._hand_over(task)

    def _hand_over(self, task: asyncio.Task[Any]) -> None:
        dropped(self._holders, task)
        lease = self._leases.get(task)
        if lease is not None:
            dropped(self._leases, task)
            lease.cancel()
        waiting = self._waiting
        while waiting:
            waiter = waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._running -= 1

    def away(self, task: asyncio.Task[Any]) -> None:
        """`task`'s work waits on the peer: its slot is free meanwhile (counted per wait)."""
        if task in self._away:
            self._away[task] += 1
        elif task in self._holders:
            self._away[task] = 1
            self._hand_over(task)

    def back(self, task: asyncio.Task[Any]) -> None:
        """A wait on the peer ended: with none left, `task` runs at once, even over the limit
        (queueing again could deadlock with the peer); its `give` brings the count back down."""
        waits = self._away.get(task)
        if waits is None:
            return
        if waits > 1:
            self._away[task] = waits - 1
            return
        dropped(self._away, task)
        self._running += 1
        self._hold(task)
