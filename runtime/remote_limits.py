"""What one client may hold on a remote agent (part of `remote`): `Limits`, the caps and
deadlines `asgi_app(limits=...)` enforces against hostile or vanished clients, and
`Admission`, the per-connection check the JSON-RPC runtime asks before it starts a handler.

Bytes in flight (received from clients, not yet read by their agents: POST bodies being read,
messages queued for an agent) are bounded per connection by `send_buffer` (a client sending
faster than its agent reads waits: the transport stops reading its socket) and for the whole
app by `max_inflight_bytes` (a `Budget`): a message that does not fit is refused, -32000 under
its own id over WebSocket, 503 with `Retry-After` for a POST, and the connection goes on.

Going over a cap never ends a connection that is in use: a request over `max_pending` or
`max_sessions` gets a JSON-RPC error under its own id (-32000, the details say which limit),
an SSE stream over `max_streams` a 429 with a JSON-RPC body, a new connection over
`max_connections` / `max_per_client` first evicts the oldest connection still *fresh*
(initialized but never used since: no second message, no stream) for `evict_after` seconds,
and only when none is, is refused with 503. So a flood of bare `initialize` requests evicts
itself, not new clients, nor a client between its `initialize` and its next message.

Fair turns and rates: at most `max_running` handlers of a connection run at once, the rest
wait in arrival order (see `slots`), and a handler counts for at most `slot_lease` seconds (a
long turn never keeps the connection's other requests waiting for its end); sessions opened
(`session_rate` per connection, `client_session_rate` per client address), SSE stream opens
(`stream_rate` per connection, `client_stream_rate` per client address: an address's opens are
spread over time, not let through in step on each of its connections) and new connections
(`connection_rate` per client address) are paced by token buckets (`remote_rate`): over a
rate, an admission waits its turn up to `rate_wait` seconds, and is refused beyond (-32000
with `data.retryAfter`; 429 with `Retry-After` for a new connection or a stream). A refusal by
one bucket gives back the token another had just taken for it. Every refusal of a limit or a
rate is the same JSON-RPC error on both profiles (`limit_error`: -32000, `data.details`,
`data.limit`, `data.retryAfter` when waiting helps), and over HTTP (429, 503) `Retry-After`
says the same in whole seconds (`limit_refusal`).

Deadlines: a WebSocket that has not sent a message within `initialize_timeout` is closed; a
Streamable HTTP connection with no open SSE stream and no POST in progress for
`http_idle_timeout` is reaped (its turns cancelled, the agent's pending requests to that
client fail with `ConnectionClosed`); a POST whose body has not all arrived `body_timeout`
after its head gets 408 (the ASGI servers time out heads, not bodies: hypercorn's only read
timeout would also close silent SSE streams); every request the agent sends the client is
given up after `request_timeout` unless the caller passed its own `timeout=`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, cast

from .dispatch import RequestError
from .remote_auth import Refusal
from .remote_rate import Pace

__all__ = [
    "LIMIT_EXCEEDED",
    "RATES",
    "Admission",
    "Budget",
    "Limits",
    "limit_error",
    "limit_refusal",
]

LIMIT_EXCEEDED: Final = -32000  # a JSON-RPC server error: the request was refused, not failed
_OPENING: Final = frozenset({"session/load", "session/resume", "session/fork"})


@dataclass(frozen=True)
class Limits:
    """Per-connection and per-client caps (None: no cap) and deadlines in seconds."""

    max_pending: int | None = 256  # client requests being handled at once, per connection
    max_sessions: int | None = 1024  # sessions a connection may open (new, load, resume, fork)
    max_streams: int | None = 64  # SSE session streams per Streamable HTTP connection
    max_per_client: int | None = 256  # live connections per client address
    max_authenticating: int = 256  # requests inside the `authenticate` hook at once
    initialize_timeout: float | None = 10.0  # a new WebSocket's first message
    evict_after: float = 0.25  # seconds a connection is fresh before it may be evicted for room
    http_idle_timeout: float | None = 30.0  # no stream open and no request: the HTTP end
    body_timeout: float | None = 30.0  # a POST's whole body (a slow body is a slowloris)
    request_timeout: float | None = None  # the agent's requests to the client
    max_inflight_bytes: int | None = 64 * 1024 * 1024  # received, not yet read by an agent: the app
    max_running: int | None = 8  # handlers running at once, per connection; the rest wait (FIFO)
    slot_lease: float | None = 0.1  # seconds a handler counts in max_running; then it runs on
    connection_rate: float | None = 50.0  # new connections a second, per client address
    connection_burst: int = 100  # ... of which at once
    session_rate: float | None = 20.0  # sessions opened a second, per connection
    session_burst: int = 50  # ... of which at once
    client_session_rate: float | None = 200.0  # sessions opened a second, per client address
    client_session_burst: int = 400  # ... of which at once
    stream_rate: float | None = 10.0  # SSE stream opens (GETs) a second, per HTTP connection
    stream_burst: int = 10  # ... of which at once
    client_stream_rate: float | None = 50.0  # SSE stream opens a second, per client address
    client_stream_burst: int = 50  # ... of which at once
    rate_wait: float = 5.0  # over a rate: waited for up to this long, refused beyond

    def __post_init__(self) -> None:
        caps = (
            ("max_pending", self.max_pending),
            ("max_sessions", self.max_sessions),
            ("max_streams", self.max_streams),
            ("max_per_client", self.max_per_client),
            ("max_inflight_bytes", self.max_inflight_bytes),
            ("max_running", self.max_running),
            ("connection_burst", self.connection_burst),
            ("session_burst", self.session_burst),
            ("client_session_burst", self.client_session_burst),
            ("stream_burst", self.stream_burst),
            ("client_stream_burst", self.client_stream_burst),
        )
        for name, value in caps:
            if value is not None and value < 1:
                raise ValueError(f"Limits.{name} must be a positive integer or None, got {value!r}")
        if self.max_authenticating < 1:
            raise ValueError(
                f"Limits.max_authenticating must be positive, got {self.max_authenticating!r}"
            )
        deadlines = (
            ("initialize_timeout", self.initialize_timeout),
            ("http_idle_timeout", self.http_idle_timeout),
            ("body_timeout", self.body_timeout),
            ("request_timeout", self.request_timeout),
            ("slot_lease", self.slot_lease),
            ("connection_rate", self.connection_rate),
            ("session_rate", self.session_rate),
            ("client_session_rate", self.client_session_rate),
            ("stream_rate", self.stream_rate),
            ("client_stream_rate", self.client_stream_rate),
        )
        for name, seconds in deadlines:
            if seconds is not None and not seconds > 0:
                raise ValueError(
                    f"Limits.{name} must be positive (seconds, or a rate a second) or None, "
                    f"got {seconds!r}"
                )
        if not self.evict_after >= 0:
            raise ValueError(f"Limits.evict_after must be seconds >= 0, got {self.evict_after!r}")
        if not self.rate_wait >= 0:
            raise ValueError(f"Limits.rate_wait must be seconds >= 0, got {self.rate_wait!r}")


RATES: Final = (
    "connection_rate",
    "session_rate",
    "client_session_rate",
    "stream_rate",
    "client_stream_rate",
)
"""The `Limits` fields that are rates: `Limits(**dict.fromkeys(RATES))` paces nothing (a load
test from one address)."""


def limit_error(limit: str, details: str, retry: float | None = None) -> RequestError:
    """The one JSON-RPC error of every limit's and rate's refusal, on both profiles: -32000
    "Limit exceeded", `data.details` (for people), `data.limit` (the `Limits` or `asgi_app`
    field) and, when waiting helps, `data.retryAfter` (seconds)."""
    data: dict[str, Any] = {"details": details, "limit": limit}
    if retry is not None:
        data["retryAfter"] = round(retry, 3)
    return RequestError(LIMIT_EXCEEDED, "Limit exceeded", data)


def limit_refusal(status: int, error: RequestError) -> Refusal:
    """`error` (a `limit_error`) as an HTTP refusal (429 or 503), with `Retry-After` in whole
    seconds, rounded up, when the error says when: the one place the header is written."""
    data = cast("dict[str, Any]", error.data)
    retry = data.get("retryAfter")
    # Rounded up, here without `math`: the generated runtime imports a fixed list of modules.
    whole = None if retry is None else max(1, -int(-retry // 1))
    headers = () if whole is None else ((b"retry-after", str(whole).encode()),)
    return Refusal(status, data["details"], headers, error)


def over(limit: str, value: int) -> RequestError:
    return limit_error(limit, f"over this connection's {limit} limit of {value}")


def too_fast(limit: str, rate: float, retry: float, whose: str) -> RequestError:
    """Over a rate: the seconds to retry after in the data's `retryAfter`."""
    details = f"over {whose} {limit} of {rate:g} a second: retry after {retry:.1f} s"
    return limit_error(limit, details, retry)


class Admission:
    """The caps a connection's runtime checks before it starts a request's handler, and the
    rates of opening sessions (this connection's, and its client address's `client_pace`):
    over a rate, the handler waits its turn (the seconds returned) or is refused."""

    __slots__ = ("_pending", "_sessions", "_opened", "_loaded", "_limits", "_pace", "_client")

    def __init__(self, limits: Limits, client_pace: Callable[[], float] | None = None) -> None:
        self._limits = limits
        self._pending = limits.max_pending
        self._sessions = limits.max_sessions
        self._opened = 0  # session/new requests admitted
        # Session ids loaded, resumed or forked (each counts once); made on the first: an empty
        # set is 216 bytes, and most connections never load one.
        self._loaded: set[str] | None = None
        rate, burst, wait = limits.session_rate, limits.session_burst, limits.rate_wait
        self._pace = None if rate is None else Pace(rate, burst, wait)
        self._client = client_pace

    def __call__(self, method: str, params: Any, inflight: int) -> RequestError | float | None:
        if self._pending is not None and inflight >= self._pending:
            return over("max_pending", self._pending)
        if method != "session/new" and method not in _OPENING:
            return None
        cap = self._sessions
        session: Any = None
        if cap is not None:
            fields = cast("dict[str, Any]", params) if params.__class__ is dict else {}
            session = fields.get("sessionId")
            loaded = self._loaded
            if (
                loaded is not None
                and method != "session/new"
                and isinstance(session, str)  # an unhashable id must not reach the set
                and session in loaded
            ):
                return None
            if self._opened + (0 if loaded is None else len(loaded)) >= cap:
                return over("max_sessions", cap)
        paced = self._paced()
        if isinstance(paced, RequestError):
            return paced
        if cap is not None:  # counted once admitted
            if method == "session/new" or not isinstance(session, str):
                self._opened += 1
            elif self._loaded is None:
                self._loaded = {session}
            else:
                self._loaded.add(session)
        return paced or None

    def _paced(self) -> RequestError | float:
        """The wait before a session opens, or the refusal (over a rate by more than
        `rate_wait`)."""
        delay = 0.0 if self._pace is None else self._pace.admit()
        if delay < 0:
            retry = -delay
            rate = self._limits.session_rate or 0.0
            return too_fast("session_rate", rate, retry, "this connection's")
        if self._client is not None:
            more = self._client()
            if more < 0:
                if self._pace is not None:  # refused: the connection's token is given back
                    self._pace.refund()
                rate = self._limits.client_session_rate or 0.0
                return too_fast("client_session_rate", rate, -more, "this client address's")
            delay = max(delay, more)
        return delay


class Budget:
    """Bytes in flight across an app (`limit` None: unbounded). With nothing in flight one
    message is always taken, however large (`max_message_size` bounds it)."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> bool:
        if self.limit is not None and self.used and self.used + size > self.limit:
            return False
        self.used += size
        return True

    def give(self, size: int) -> None:
        self.used -= size
