"""Rate limits (part of `remote`): a remote agent's expensive admissions (new connections per
client address, sessions opened, SSE streams opened) and, with a cost, bytes (the WebSocket byte
rate of examples/ws_budget.py). A `Pace` is a token bucket kept as the time its next token is
due (GCRA): `rate` tokens a second, `burst` at once. Over the rate, an admission waits its turn
(first come, first served) when that turn is near, and is refused with the time to retry after
when it is further than `wait` seconds away (`wait` None: never refused, it waits its turn)."""

from __future__ import annotations

import time
from typing import Final

__all__ = ["Pace", "Paces"]

_PRUNE_AT: Final = 4096  # client addresses remembered before the replenished ones are dropped


class Pace:
    """One token bucket: `rate` tokens a second, `burst` at most at once."""

    __slots__ = ("_interval", "_tolerance", "_wait", "_due")

    def __init__(self, rate: float, burst: float, wait: float | None) -> None:
        self._interval = 1.0 / rate
        self._tolerance = (burst - 1) * self._interval  # how far ahead of now a token may be spent
        self._wait = float("inf") if wait is None else wait
        self._due = 0.0  # when the bucket is full again (the next token's theoretical time)

    def admit(self, now: float | None = None, cost: float = 1) -> float:
        """Seconds to wait before admitting `cost` tokens (0: now), taken; or, when that would
        be more than `wait`, the negative of the seconds after which to retry (nothing taken).
        Booked at once: admissions that wait keep their order."""
        now = time.monotonic() if now is None else now
        due = max(self._due, now)
        delay = due - self._tolerance - now
        if cost != 1:  # the bucket must hold all of it: its tokens after the first are due too
            delay += (cost - 1) * self._interval
        if delay > self._wait:
            return -(delay - self._wait)
        self._due = due + cost * self._interval
        return max(delay, 0.0)

    def refund(self, cost: float = 1) -> None:
        """Give back what an `admit` took: a later check refused what it had let through, and
        a refusal must not cost the client a token of another bucket."""
        self._due -= cost * self._interval

    def idle(self, now: float) -> bool:
        """Full again: forgetting it changes nothing."""
        return self._due <= now


class Paces:
    """A `Pace` per key (a client address), made on first use; the full ones are forgotten when
    many are held, so memory follows the addresses active within the last `burst / rate` s."""

    __slots__ = ("_rate", "_burst", "_wait", "_paces")

    def __init__(self, rate: float, burst: float, wait: float | None) -> None:
        self._rate, self._burst, self._wait = rate, burst, wait
        self._paces: dict[str, Pace] = {}

    def admit(self, key: str, cost: float = 1, now: float | None = None) -> float:
        """As `Pace.admit`, for `key`'s bucket."""
        now = time.monotonic() if now is None else now
        pace = self._paces.get(key)
        if pace is None:
            if len(self._paces) >= _PRUNE_AT:
                self._paces = {k: p for k, p in self._paces.items() if not p.idle(now)}
            pace = self._paces[key] = Pace(self._rate, self._burst, self._wait)
        return pace.admit(now, cost)

    def refund(self, key: str, cost: float = 1) -> None:
        """As `Pace.refund`, for `key`'s bucket (forgotten meanwhile: it was full already)."""
        pace = self._paces.get(key)
        if pace is not None:
            pace.refund(cost)

    def __len__(self) -> int:
        return len(self._paces)
