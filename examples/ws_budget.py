"""A process-wide budget of WebSocket bytes being received, for uvicorn (`--listen`'s
WebSocket protocol; docs/security.md, "Limits").

uvicorn and websockets hold a message whole, in up to four copies, before the app sees it, so
the app's own budget (`Limits.max_inflight_bytes`) cannot bound what 40 clients sending 7 MiB
messages at once cost: that was 816 MiB. Here each data frame's size is read from its header,
before its payload, and reserved from one budget shared by every connection; a frame that does
not fit waits, its socket no longer read (TCP backpressure), until other messages are done. A
message is done when the app asks for the next one (the app's budget counts it from there).

- With nothing reserved one frame is always taken, whatever its size (`ws_max_size` bounds it),
  so a legitimate large message from a single client is never refused.
- A frame of at most `small` bytes (a prompt, a reply) is taken even over the budget: it
  never waits behind large ones, and costs at most `small` per connection.
- A fragmented or compressed message reserves `max_size` (its size is known only at its end).
- Waiting connections are served first come, first served.

A byte rate per client address (`rate` bytes a second, `burst` at once; None: none) paces the
large frames (over `small`) too: the generated package's token buckets (`remote_rate.Paces`, the
ones `Limits`' rates use), a frame's size its cost. The budget bounds memory, not time: 40 senders of 7 MiB
messages kept the server busy converting and parsing them, and a good client's turns waited
behind that work (p99 6-12x its quiet value). Over its rate a frame is not refused: its
socket is not read until its turn (TCP backpressure), so a sender costs the server at most
`rate` bytes a second of large-message work, whatever it sends. Frames up to `small` are never
paced: prompts and replies do not wait behind an address's large messages. A socket held for the
budget or the rate is not closed for a late pong (the pong is behind the frame that waits).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from agent.remote_rate import Paces  # the generated package's token buckets (its importer puts it on the path)
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import Frame

SMALL = 64 * 1024
RATE = 4 * 1024 * 1024  # large-frame bytes a second per client address (`rate`)
BURST = 16 * 1024 * 1024  # ... at once: two of the largest messages without any wait


class ReceiveBudget:
    """Bytes reserved by frames being received, across every connection of one server."""

    def __init__(self, limit: int, small: int = SMALL, rate: float | None = RATE, burst: int = BURST) -> None:
        if limit < 1 or small < 0:
            raise ValueError(f"a receive budget takes a positive limit, got {limit!r}")
        if rate is not None and (not rate > 0 or burst < 0):
            raise ValueError(f"a byte rate takes a positive rate and burst >= 0, got {rate!r}, {burst!r}")
        self.limit = limit
        self.small = small
        # Large frames' bytes per client address: a token bucket with the frame's size as its
        # cost, never refused (wait None): a frame over the rate waits its turn, however long.
        self.rates = None if rate is None else Paces(rate, burst, wait=None)
        self.used = 0
        self.peak = 0
        self._waiting: deque[BudgetedWebSocket] = deque()

    def take(self, size: int, who: BudgetedWebSocket) -> bool:
        """Reserve `size` for `who`, or queue it (False: `who.granted()` is called later)."""
        if size > self.small and self.used and (self._waiting or self.used + size > self.limit):
            self._waiting.append(who)
            return False
        self._reserve(size)
        return True

    def _reserve(self, size: int) -> None:
        self.used += size
        self.peak = max(self.peak, self.used)

    def give(self, size: int) -> None:
        self.used -= size
        while self._waiting:
            who = self._waiting[0]
            if self.used and self.used + who.wanted > self.limit:
                return
            self._waiting.popleft()
            self._reserve(who.wanted)
            who.granted()

    def forget(self, who: BudgetedWebSocket) -> None:
        if who in self._waiting:
            self._waiting.remove(who)


class BudgetedWebSocket(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, reserving each data frame from `budget` before its payload
    is read. Set the class attribute (see `budgeted`); each server gets its own subclass."""

    budget: ReceiveBudget

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._upgraded = False  # frames follow the request head once it has been seen
        self._head_tail = b""  # the end of the request head so far (its CRLFCRLF may be split)
        self._header = bytearray()  # a frame header being received
        self._payload = 0  # bytes of the current frame's payload still to come
        self._in_message = False  # a fragmented message is being received (reserved whole)
        self._started: deque[int] = deque()  # reserved for messages begun, not yet whole
        self._queued: deque[int] = deque()  # reserved for the messages queued for the app
        self._handed = 0  # reserved for the message the app is working on
        self._held = b""  # bytes not yet fed to websockets, waiting for a reservation
        self.wanted = 0  # the reservation being waited for (0: not waiting)
        self._pacing: asyncio.TimerHandle | None = None  # waiting for its address's byte rate
        self._max_size = self.config.ws_max_size

    # -- receiving -----------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if not self._upgraded:
            seen = self._head_tail + data
            end = seen.find(b"\r\n\r\n")
            if end < 0:
                self._head_tail = seen[-3:]
                super().data_received(data)
                return
            cut = end + 4 - len(self._head_tail)
            self._upgraded, self._head_tail = True, b""
            super().data_received(data[:cut])
            data = data[cut:]
            if not data:
                return
        if self.wanted:  # still waiting: keep it in order behind what is held
            self._held += data
            self._pause()
            return
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        """Feed websockets up to the first frame that must wait for the budget; hold the rest."""
        i, n = 0, len(data)
        while i < n:
            if self._payload:
                step = min(self._payload, n - i)
                self._payload -= step
                i += step
                continue
            take = min(self._header_size() - len(self._header), n - i)
            self._header += data[i : i + take]
            i += take
            if len(self._header) < self._header_size():  # its first two bytes say how long
                continue
            size = self._frame_started()
            if size is None:
                continue
            rates = self.budget.rates
            if rates is not None and size > self.budget.small:
                delay = rates.admit(self.client[0] if self.client else "", cost=size)
                if delay > 0:  # not its address's turn yet: the rest waits, the socket unread
                    self.wanted = size
                    self._held = data[i:]
                    self._pause()
                    self._pacing = self.loop.call_later(delay, self._paced)
                    break
            if self.budget.take(size, self):
                self._started.append(size)
                continue
            self.wanted = size  # fed up to this frame's payload; the rest waits
            self._held = data[i:]
            self._pause()
            break
        if i:
            super().data_received(data if i == n else data[:i])

    def _pause(self) -> None:
        if not self.transport.is_closing():
            self.transport.pause_reading()

    def _header_size(self) -> int:
        if len(self._header) < 2:
            return 2
        length, masked = self._header[1] & 0x7F, self._header[1] & 0x80
        return 2 + (2 if length == 126 else 8 if length == 127 else 0) + (4 if masked else 0)

    def _frame_started(self) -> int | None:
        """A frame header is complete, its payload follows: the bytes to reserve for it, or
        None if it starts no message (a control frame, or a fragment of a message)."""
        head = bytes(self._header)
        self._header.clear()
        length = head[1] & 0x7F
        if length >= 126:
            width = 2 if length == 126 else 8
            length = int.from_bytes(head[2 : 2 + width], "big")
        self._payload = length
        opcode, fin, compressed = head[0] & 0x0F, head[0] & 0x80, head[0] & 0x40
        if opcode not in (0x1, 0x2) or self._in_message:
            if opcode == 0x0 and fin:
                self._in_message = False
            return None  # a control frame (small), or a fragment of a message reserved whole
        self._in_message = not fin
        if self._max_size and length > self._max_size:
            return 0  # websockets refuses it at its header (close 1009)
        return self._max_size if (compressed or not fin) and self._max_size else length

    def _paced(self) -> None:
        """The frame's turn under its address's byte rate: now it waits for the budget."""
        self._pacing = None
        if not self.transport.is_closing() and self.budget.take(self.wanted, self):
            self.granted()

    def granted(self) -> None:
        """The budget took the frame that waited: feed what was held, read on."""
        self._started.append(self.wanted)
        held, self._held, self.wanted = self._held, b"", 0
        if self.transport.is_closing():
            return
        self._feed(held)
        if not self.wanted and not self.read_paused:
            self.transport.resume_reading()

    # websockets' parser keeps the last frame it parsed until the next one is whole: emptied
    # here once uvicorn has its payload, else every connection held a copy of its last message.
    def handle_text(self, event: Frame) -> None:
        super().handle_text(event)
        event.data = b""

    def handle_bytes(self, event: Frame) -> None:
        super().handle_bytes(event)
        event.data = b""

    def handle_cont(self, event: Frame) -> None:
        super().handle_cont(event)
        event.data = b""

    # A held socket is not read, so its pong waits behind the held frame: while the hold lasts
    # (ours, not the peer's doing) its pong deadline starts over instead of closing it (1011).
    def keepalive_timeout(self) -> None:
        if self.wanted and self.ping_timeout is not None and not self.transport.is_closing():
            self.pong_timer = self.loop.call_later(self.ping_timeout, self.keepalive_timeout)
            return
        super().keepalive_timeout()

    # -- the message's reservation follows it to the app ------------------------------
    def send_receive_event_to_app(self) -> None:
        size = self._started.popleft() if self._started else 0  # messages end in order
        if self.close_sent:  # uvicorn drops it
            self.budget.give(size)
        else:
            self._queued.append(size)
        super().send_receive_event_to_app()

    async def receive(self) -> Any:
        if self._handed:  # the app is done with the last message: it asks for the next
            handed, self._handed = self._handed, 0
            self.budget.give(handed)
        message = await super().receive()
        if message["type"] == "websocket.receive" and self._queued:
            self._handed = self._queued.popleft()
        if self.wanted:
            self._pause()  # uvicorn resumed it: still waiting for the budget
        return message

    def connection_lost(self, exc: Exception | None) -> None:
        if self._pacing is not None:
            self._pacing.cancel()
            self._pacing = None
        self.budget.forget(self)
        reserved = sum(self._started) + sum(self._queued) + self._handed
        self._handed, self._held, self.wanted = 0, b"", 0
        self._started.clear()
        self._queued.clear()
        if reserved:
            self.budget.give(reserved)
        super().connection_lost(exc)


def budgeted(limit: int, small: int = SMALL, rate: float | None = RATE, burst: int = BURST) -> type[BudgetedWebSocket]:
    """A `BudgetedWebSocket` class for one server (uvicorn's `ws=`), with its own budget and
    byte rate per client address (`rate` None: no rate)."""
    budget = ReceiveBudget(limit, small, rate, burst)
    return type("BudgetedWebSocket", (BudgetedWebSocket,), {"budget": budget})
