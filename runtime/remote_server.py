"""Serve an agent remotely: an ASGI 3 application speaking the ACP remote transport (the RFD
"Streamable HTTP & WebSocket Transport") on one path, `/acp` by default.

    from mypkg import asgi_app
    app = asgi_app(MyAgent)          # uvicorn mymod:app   /   hypercorn mymod:app

- `GET` with `Upgrade: websocket` (see `remote_server_ws`): one ACP connection per socket,
  JSON-RPC in text frames (binary frames are ignored); the 101 answer carries `Acp-Connection-Id`.
- Streamable HTTP (see `remote_server_http`): `POST` `initialize` answers 200 with the JSON
  response and `Acp-Connection-Id`, every other POST 202; server->client messages go on
  long-lived SSE `GET` streams, one for the connection and one per session; `DELETE` ends the
  connection. The RFD requires HTTP/2 for it: serve it with hypercorn (h2c or TLS).

Each connection gets its own agent from `make_agent()`, served by the same `Connection`
runtime as over stdio, so one `Agent` subclass serves both unchanged. Sessions belong to the
agent: to let a client reconnect and `session/load`, have the factory give every agent one
shared session store; the transport never refuses a session it does not know.

Limits: `max_message_size` (as over stdio: an oversize message is refused with -32600 under
its own id, or 413 for an HTTP body), `max_connections` (503 / WebSocket close 1013 beyond),
`idle_timeout` (a connection with no traffic and nothing in flight, or whose client stopped
reading, is closed), `send_buffer` (bytes queued per connection before the agent waits).
A client that goes away ends its connection: its agent's running turns are cancelled.

Cookies: the app sets none and never touches the header lists a wrapping middleware adds to
(`Set-Cookie` on every response passes through), so a load balancer's affinity cookie works.

Standard library only; the ASGI server is the user's choice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Final

from .agent import Agent
from .principal import Principal
from .remote_auth import Authenticate, AuthRequest, BearerTokens, Gate, Refusal, auth_request
from .remote_limits import Budget, limit_error, limit_refusal, too_fast
from .remote_limits import Limits as Caps
from .remote_link import Link
from .remote_rate import Paces
from .remote_server_http import HttpTransport
from .remote_server_ws import WsTransport
from .remote_wire import (
    AnyReceive,
    AnySend,
    Limits,
    Receive,
    Scope,
    Send,
    request_headers,
    send_error,
    send_refusal,
)
from .types import DecodeContext

__all__ = ["DEFAULT_PATH", "AsgiApp", "AuthRequest", "BearerTokens", "Caps", "asgi_app"]

_log = logging.getLogger(__name__)

DEFAULT_PATH: Final = "/acp"


class AsgiApp:
    """The ASGI application `asgi_app` returns; `connections` counts the live ones."""

    def __init__(
        self, make_agent: Callable[[], Agent], path: str, limits: Limits, gate: Gate
    ) -> None:
        self.make_agent = make_agent
        self.path = path
        self.limits = limits
        self.gate = gate
        self.budget = Budget(limits.caps.max_inflight_bytes)  # bytes in flight, every connection
        caps = limits.caps
        self._connection_paces = (
            None
            if caps.connection_rate is None
            else Paces(caps.connection_rate, caps.connection_burst, caps.rate_wait)
        )
        sessions = (  # per client address, shared by both profiles
            None
            if caps.client_session_rate is None
            else Paces(caps.client_session_rate, caps.client_session_burst, caps.rate_wait)
        )
        streams = (  # SSE stream opens per client address (Streamable HTTP only)
            None
            if caps.client_stream_rate is None
            else Paces(caps.client_stream_rate, caps.client_stream_burst, caps.rate_wait)
        )
        self.http = HttpTransport(
            make_agent, limits, self._room, self._gone, self.budget, sessions, streams
        )
        self.ws = WsTransport(  # the same per-address session buckets as over HTTP
            make_agent,
            limits,
            self.budget,
            self._admit,
            self._room,
            self._close_soon,
            self._gone,
            sessions,
        )
        self.websockets = self.ws.links  # the live WebSocket connections by id
        self._reaper: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()  # idle connections being closed
        self._authenticating = 0  # requests inside the authentication hook

    @property
    def connections(self) -> int:
        return len(self.websockets) + len(self.http.links)

    async def _room(self, client: str) -> Refusal | None:
        """Whether one more connection from `client` may start (None) or why not. Over the
        client's `connection_rate`, it waits its turn (up to `rate_wait`; 429 beyond)."""
        paces = self._connection_paces
        delay = 0.0 if paces is None else paces.admit(client)
        if delay < 0:
            rate = self.limits.caps.connection_rate or 0.0
            error = too_fast("connection_rate", rate, -delay, "this client address's")
            return limit_refusal(429, error)
        if delay:
            await asyncio.sleep(delay)
        full = self._full(client)
        if full is None:
            return None
        if paces is not None:  # refused: the connection_rate token is given back
            paces.refund(client)
        error = limit_error(full, f"too many connections ({full})", 5.0)
        return limit_refusal(503, error)

    def _full(self, client: str) -> str | None:
        """Over a cap, the oldest fresh connection (of that client, for its own cap) is evicted
        to make room; the cap, if none is (None: room)."""
        self._start_reaper()
        cap, per_client = self.limits.max_connections, self.limits.caps.max_per_client
        # Under both caps even counting every link held (closed ones too), whoever's they are:
        # room, without the scan below (a scan per new connection made opening N of them
        # O(N^2): 28% of the CPU opening 3,000, profiled).
        held = len(self.websockets) + len(self.http.links)
        if (cap is None or held < cap) and (per_client is None or held < per_client):
            return None
        live = [link for link in (*self.websockets.values(), *self.http.links.values())]
        live = [link for link in live if not link.closed]
        mine = [link for link in live if link.client == client]
        if per_client is not None and len(mine) >= per_client:
            return None if self._evict(mine) else "max_per_client"
        if cap is not None and len(live) >= cap:
            return None if self._evict(live) else "max_connections"
        return None

    def _evict(self, links: list[Link]) -> bool:
        # Not one fresh for less than evict_after: a client between its initialize and its
        # next message looks fresh too (a flood from its address evicted it in that moment).
        since = asyncio.get_running_loop().time() - self.limits.caps.evict_after
        oldest = next((link for link in links if link.fresh and link.last_activity <= since), None)
        if oldest is None:
            return False
        _log.info("remote connection %s evicted: never used, and a new one needs room", oldest.id)
        self._close_soon(oldest)
        return True

    def _close_soon(self, link: Link) -> None:
        link.end()  # counted as gone from now on
        self._closing.add(task := asyncio.get_running_loop().create_task(link.close()))
        task.add_done_callback(self._closing.discard)

    async def __call__(self, scope: Scope, receive: AnyReceive, send: AnySend) -> None:
        """ASGI 3: typed to be accepted by every server's own ASGI types (see `AnySend`)."""
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "websocket":
            await self.ws(self.path, scope, receive, send)
        elif kind == "http":
            if scope["path"] != self.path:
                await send_error(send, 404, None, -32600, f"no ACP endpoint at {scope['path']}")
                return
            who = await self._admit("http", scope)
            if isinstance(who, Refusal):
                await send_refusal(send, who)
            else:
                await self.http(scope, receive, send, who)

    async def _admit(self, kind: str, scope: Scope) -> Principal | Refusal:
        """Host, Origin and credentials, before any upgrade or body is read."""
        headers = request_headers(scope)
        refusal = self.gate.exposure(headers)
        if refusal is not None:
            return refusal
        if self._authenticating >= self.limits.caps.max_authenticating:
            detail = "too many requests being authenticated (max_authenticating)"
            return limit_refusal(503, limit_error("max_authenticating", detail, 1.0))
        self._authenticating += 1
        try:
            return await self.gate.principal(auth_request(kind, scope, headers))
        except Exception:
            _log.exception("the authentication hook failed")
            return Refusal(500, "the server could not check the credentials")
        finally:
            self._authenticating -= 1

    # -- lifespan ------------------------------------------------------------------
    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def aclose(self) -> None:
        """End every connection (their agents see EOF) and stop the idle reaper."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        links = [*self.websockets.values(), *self.http.links.values()]
        await asyncio.gather(*(link.close() for link in links), return_exceptions=True)

    # -- idle timeout ----------------------------------------------------------------
    def _gone(self) -> None:
        """A connection ended: with none left, the reaper stops (it restarts with the next)."""
        if not self.connections and self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    def _start_reaper(self) -> None:
        timeouts = (self.limits.idle_timeout, self.limits.caps.http_idle_timeout)
        if self._reaper is None and any(t is not None for t in timeouts):
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        timeout, unwatched = self.limits.idle_timeout, self.limits.caps.http_idle_timeout
        tick = min(t for t in (timeout, unwatched, 20.0) if t is not None) / 4
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(tick)
            if not self.connections:  # nothing to watch: started again with the next one
                self._reaper = None
                return
            now = loop.time()
            for link in [*self.websockets.values(), *self.http.links.values()]:
                if link.closed:
                    continue
                if timeout is not None and link.idle_for(now) > timeout:
                    _log.info("remote connection %s idle for %.0f s: closed", link.id, timeout)
                    self._close_soon(link)
                elif unwatched is not None and self.http.unwatched_for(link, now) > unwatched:
                    # Nobody reads it and nobody asks: the client vanished (or went half-open).
                    _log.info("remote connection %s: no stream, no request: closed", link.id)
                    self._close_soon(link)


def asgi_app(
    make_agent: Callable[[], Agent],
    *,
    path: str = DEFAULT_PATH,
    max_message_size: int = 8 * 1024 * 1024,
    max_connections: int | None = 1000,
    idle_timeout: float | None = 600.0,
    send_buffer: int = 1024 * 1024,
    shutdown_grace: float = 0.0,
    keepalive: float = 15.0,
    ctx: DecodeContext | None = None,
    limits: Caps | None = None,
    authenticate: Authenticate | None = None,
    allow_unauthenticated: bool = False,
    allowed_hosts: Iterable[str] | None = None,
    allowed_origins: Iterable[str] | None = None,
    www_authenticate: str = 'Bearer realm="acp"',
) -> AsgiApp:
    """An ASGI 3 application serving agents from `make_agent()` (one per connection) over
    WebSocket and Streamable HTTP at `path`.

    `max_message_size`: bytes per message (a WebSocket frame or a POST body); raise the ASGI
    server's own WebSocket limit (uvicorn `--ws-max-size`, hypercorn
    `websocket_max_message_size`, both 16 MiB) if you go above it. `max_connections`: live
    connections (None: no limit). `idle_timeout`: seconds (None: never). `send_buffer`: bytes
    of output queued per connection before the agent's sends wait. `shutdown_grace`: seconds
    a disconnected connection's running handlers get before they are cancelled. `keepalive`:
    seconds between SSE comments on a quiet stream (keeps proxies from timing it out).
    `ctx`: the decode context handed to every connection's dispatcher. `limits`: the caps
    and deadlines against hostile or vanished clients (see `remote_limits.Limits`).

    Who may connect (see `remote_auth`; every check runs before an upgrade or a body is read):
    `authenticate(request) -> Principal | None` (sync or async; e.g. `BearerTokens`) names
    the caller, None refuses with 401 and `WWW-Authenticate: <www_authenticate>`; without it
    only loopback clients are served, unless `allow_unauthenticated` (behind a gate of your
    own). The principal is set as `agent.principal` right after `make_agent()` returns, before
    the agent's first message, and owns the connection: over Streamable HTTP every request of
    a connection must name the same principal (else 404, as for an unknown connection).
    `allowed_hosts` (default `127.0.0.1:*`, `localhost:*`, `[::1]:*`) and `allowed_origins`
    (default those as `http://` and `https://` origins) guard against DNS rebinding and web
    pages: a mismatch gets 403. `:*` matches any port, `*` anything."""
    if not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")
    for name, value in (
        ("max_message_size", max_message_size),
        ("send_buffer", send_buffer),
        ("keepalive", keepalive),
    ):
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value!r}")
    settings = Limits(
        max_message_size=max_message_size,
        max_connections=max_connections,
        idle_timeout=idle_timeout,
        send_buffer=send_buffer,
        shutdown_grace=shutdown_grace,
        keepalive=keepalive,
        ctx=ctx,
        caps=Caps() if limits is None else limits,
    )
    gate = Gate(
        authenticate,
        allow_unauthenticated=allow_unauthenticated,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        challenge=www_authenticate,
    )
    return AsgiApp(make_agent, path, settings, gate)
