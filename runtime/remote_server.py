"""Serve an agent remotely: an ASGI 3 application speaking the ACP remote transport (the RFD
"Streamable HTTP & WebSocket Transport") on one path, `/acp` by default.

    from mypkg import asgi_app
    app = asgi_app(MyAgent)          # uvicorn mymod:app   /   hypercorn mymod:app

- `GET` with `Upgrade: websocket`: one ACP connection per socket, JSON-RPC in text frames
  (binary frames are ignored); the 101 answer carries `Acp-Connection-Id`.
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
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any, Final

from .agent import Agent
from .dispatch import INTERNAL_ERROR, INVALID_REQUEST
from .principal import Principal
from .remote_auth import Authenticate, AuthRequest, BearerTokens, Gate, Refusal, auth_request
from .remote_limits import Budget
from .remote_limits import Limits as Caps
from .remote_link import Channel, Link
from .remote_server_http import HttpTransport
from .remote_wire import (
    AnyReceive,
    AnySend,
    Limits,
    Receive,
    Scope,
    Send,
    client_address,
    frame,
    over_budget_line,
    request_headers,
    send_error,
)
from .types import DecodeContext

__all__ = ["DEFAULT_PATH", "AsgiApp", "AuthRequest", "BearerTokens", "Caps", "asgi_app"]

_log = logging.getLogger(__name__)

DEFAULT_PATH: Final = "/acp"
_WS_TRY_AGAIN: Final = 1013  # "try again later": over max_connections
_WS_GOING_AWAY: Final = 1001  # idle timeout, server shutdown
_WS_POLICY: Final = 1008  # refused: Host, Origin or credentials
_WS_INTERNAL: Final = 1011  # the agent factory failed
_CLOSE_TIMEOUT: Final = 1.0


class AsgiApp:
    """The ASGI application `asgi_app` returns; `connections` counts the live ones."""

    def __init__(
        self, make_agent: Callable[[], Agent], path: str, limits: Limits, gate: Gate
    ) -> None:
        self.make_agent = make_agent
        self.path = path
        self.limits = limits
        self.gate = gate
        self.websockets: dict[str, Link] = {}
        self.budget = Budget(limits.caps.max_inflight_bytes)  # bytes in flight, every connection
        self.http = HttpTransport(make_agent, limits, self._room, self._gone, self.budget)
        self._reaper: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()  # idle connections being closed
        self._authenticating = 0  # requests inside the authentication hook

    @property
    def connections(self) -> int:
        return len(self.websockets) + len(self.http.links)

    def _room(self, client: str) -> bool:
        """Whether one more connection from `client` may start: over a cap, the oldest fresh
        connection (of that client, for its own cap) is evicted to make room."""
        self._start_reaper()
        live = [link for link in (*self.websockets.values(), *self.http.links.values())]
        live = [link for link in live if not link.closed]
        cap, per_client = self.limits.max_connections, self.limits.caps.max_per_client
        mine = [link for link in live if link.client == client]
        if per_client is not None and len(mine) >= per_client:
            return self._evict(mine)
        if cap is not None and len(live) >= cap:
            return self._evict(live)
        return True

    def _evict(self, links: list[Link]) -> bool:
        oldest = next((link for link in links if link.fresh), None)  # dicts keep age order
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
            await self._websocket(scope, receive, send)
        elif kind == "http":
            if scope["path"] != self.path:
                await send_error(send, 404, None, -32600, f"no ACP endpoint at {scope['path']}")
                return
            who = await self._admit("http", scope)
            if isinstance(who, Refusal):
                await send_error(
                    send, who.status, None, _code(who), who.detail, headers=who.headers
                )
            else:
                await self.http(scope, receive, send, who)

    async def _admit(self, kind: str, scope: Scope) -> Principal | Refusal:
        """Host, Origin and credentials, before any upgrade or body is read."""
        headers = request_headers(scope)
        refusal = self.gate.exposure(headers)
        if refusal is not None:
            return refusal
        if self._authenticating >= self.limits.caps.max_authenticating:
            return Refusal(503, "too many requests being authenticated", ((b"retry-after", b"1"),))
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

    # -- WebSocket -----------------------------------------------------------------
    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        if scope["path"] != self.path:
            await send({"type": "websocket.close", "code": 1008})
            return
        who = await self._admit("websocket", scope)
        if isinstance(who, Refusal):
            await self._refuse_websocket(scope, send, who)
            return
        client = client_address(scope)
        if not self._room(client):
            await self._refuse_websocket(scope, send, Refusal(503, "too many connections"))
            return
        channel = Channel()
        try:
            agent = self.make_agent()
            agent.principal = who
        except Exception:
            # Accepted, then closed 1011 ("internal error"): closing before the accept would
            # reach the client as "HTTP 403 to the upgrade", which reads like an auth problem.
            _log.exception("the agent factory failed")
            await send({"type": "websocket.accept"})
            reason = "cannot start an agent"
            await send({"type": "websocket.close", "code": _WS_INTERNAL, "reason": reason})
            return
        link = self._link(agent, channel, client)
        self.websockets[link.id] = link
        deadline = self.limits.caps.initialize_timeout
        timer = (
            None
            if deadline is None
            else asyncio.get_running_loop().call_later(deadline, self._unspoken, link)
        )
        try:
            headers = [(b"acp-connection-id", link.id.encode())]
            await send({"type": "websocket.accept", "headers": headers})
            pump = asyncio.ensure_future(self._pump(link, channel, send))
            reader = asyncio.ensure_future(self._read(link, receive, self.budget))
            undo = link.on_close(lambda: None if pump.cancel() else None)  # stop sending
            try:
                await asyncio.wait({pump, reader}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                undo()
                # The client left (the reader returned), or the server ends it (the pump
                # was stopped, or failed): then the socket is closed here.
                left = reader.done() and not reader.cancelled() and reader.result() is True
                pump.cancel()
                reader.cancel()
                await asyncio.gather(pump, reader, return_exceptions=True)
                if not left:  # bounded: a client that stopped reading may never take it
                    with contextlib.suppress(Exception):
                        closing = send({"type": "websocket.close", "code": _WS_GOING_AWAY})
                        await asyncio.wait_for(closing, _CLOSE_TIMEOUT)
        finally:
            if timer is not None:
                timer.cancel()
            del self.websockets[link.id]
            await link.close()
            self._gone()

    def _unspoken(self, link: Link) -> None:
        """A WebSocket silent since it opened, `initialize_timeout` later: closed."""
        if not link.messages and not link.closed:
            _log.info("remote connection %s sent nothing in time: closed", link.id)
            self._close_soon(link)

    def _link(self, agent: Agent, channel: Channel, client: str) -> Link:
        limits = self.limits
        return Link(
            agent,
            channel.push,
            ctx=limits.ctx,
            max_message_size=limits.max_message_size,
            send_buffer=limits.send_buffer,
            shutdown_grace=limits.shutdown_grace,
            limits=limits.caps,
            client=client,
            budget=self.budget,
        )

    async def _refuse_websocket(self, scope: Scope, send: Send, refusal: Refusal) -> None:
        extensions: Any = scope.get("extensions")
        if isinstance(extensions, dict) and "websocket.http.response" in extensions:
            await send_error(
                send,
                refusal.status,
                None,
                _code(refusal),
                refusal.detail,
                headers=refusal.headers,
                websocket=True,
            )
        elif refusal.status == 503:
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": _WS_TRY_AGAIN, "reason": refusal.detail})
        else:  # closed before accept: the server answers 403, nothing was upgraded
            await send({"type": "websocket.close", "code": _WS_POLICY, "reason": refusal.detail})

    @staticmethod
    async def _read(link: Link, receive: Receive, budget: Budget) -> bool:
        """Client frames into the agent's inbox: True once the client disconnected, False
        if the connection ended first. A frame over the app's budget is answered -32000."""
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "websocket.disconnect":
                return True
            text = message.get("text") if kind == "websocket.receive" else None
            del message  # no copy of a message outlives its delivery (the next one may be late)
            if text is not None:  # binary frames are ignored (the RFD)
                data = frame(text.encode("utf-8", "surrogatepass"))
                del text
                if not budget.take(len(data)):
                    answer = over_budget_line(data, budget)
                    del data
                    if answer is not None and not link.outbox.closed:
                        link.outbox.write(answer)
                    continue
                ok = await link.deliver(data)
                del data
                if not ok:
                    return False

    @staticmethod
    async def _pump(link: Link, channel: Channel, send: Send) -> None:
        """The agent's messages out as text frames, until cancelled (the link's end)."""
        outbox = link.outbox
        while True:
            await channel.wait()
            batch = channel.take()
            for i, line in enumerate(batch):
                try:
                    text = line[:-1].decode("utf-8", "surrogatepass")
                    await send({"type": "websocket.send", "text": text})
                except BaseException:
                    channel.untake(batch[i:])
                    raise
                outbox.sent(line)
            link.touch()


def _code(refusal: Refusal) -> int:
    return INTERNAL_ERROR if refusal.status >= 500 and refusal.status != 503 else INVALID_REQUEST


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
