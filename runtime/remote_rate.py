"""Rate limits for a remote agent's expensive admissions (part of `remote`): new connections
per client address, sessions opened per connection. A `Pace` is a token bucket kept as the
time its next token is due (GCRA): `rate` per second, `burst` at once. Over the rate, an
admission waits its turn (first come, first served) when that turn is near, and is refused
with the time to retry after when it is further than `wait` seconds away."""

from __future__ import annotations

import time
from typing import Final

__all__ = ["Pace", "Paces"]

_PRUNE_AT: Final = 4096  # client addresses remembered before the replenished ones are dropped


class Pace:
    """One token bucket: `rate` tokens a second, `burst` at most at once."""

    __slots__ = ("_interval", "_tolerance", "_wait", "_due")

    def __init__(self, rate: float, burst: int, wait: float) -> None:
        self._interval = 1.0 / rate
        self._tolerance = (burst - 1) * self._interval  # how far ahead of now tokens may be spent
        self._wait = wait
        self._due = 0.0  # when the bucket is full again (the next token's theoretical time)

    def admit(self, now: float | None = None) -> float:
        """Seconds to wait before admitting (0: now), a token taken; or, when that would be more
        than `wait`, the negative of the seconds after which to retry (nothing taken)."""
        now = time.monotonic() if now is None else now
        due = max(self._due, now)
        delay = due - self._tolerance - now
        if delay > self._wait:
            return -(delay - self._wait)
        self._due = due + self._interval
        return max(delay, 0.0)

    def idle(self, now: float) -> bool:
        """Full again: forgetting it changes nothing."""
        return self._due <= now


class Paces:
    """A `Pace` per key (a client address), made on first use; the full ones are forgotten when
    many are held, so memory follows the addresses active within the last `burst / rate` s."""

    __slots__ = ("_rate", "_burst", "_wait", "_paces")

    def __init__(self, rate: float, burst: int, wait: float) -> None:
        self._rate, self._burst, self._wait = rate, burst, wait
        self._paces: dict[str, Pace] = {}

    def admit(self, key: str) -> float:
        """As `Pace.admit`, for `key`'s bucket."""
        now = time.monotonic()
        pace = self._paces.get(key)
        if pace is None:
            if len(self._paces) >= _PRUNE_AT:
                self._paces = {k: p for k, p in self._paces.items() if not p.idle(now)}
            pace = self._paces[key] = Pace(self._rate, self._burst, self._wait)
        return pace.admit(now)
