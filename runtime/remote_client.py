"""Reach a remote ACP agent: the RFD's WebSocket and Streamable HTTP profiles, on one `/acp` URL.

`ws://` / `wss://` speak WebSocket (the `websockets` library), `http://` / `https://` Streamable
HTTP (`httpx`, with HTTP/2 through `h2`). Neither library is needed to import this package:
each is imported when a connection of its kind is opened, and a missing one raises
`RemoteUnavailable` naming what to install.

Both profiles end in the same place as a subprocess's pipes: a `Reader` and a `Writer` of
newline-delimited JSON-RPC, which the package's one `Connection` serves (`remote_ws` and
`remote_http` are those adapters). `RemoteAgent` is the handle, like `AgentProcess` for a
spawned agent: `.proxy` calls the agent, `.connection` serves it. It keeps one cookie store
(`http.cookiejar.CookieJar`) for every request of every connection it opens, so a load
balancer's affinity cookie comes back on each POST, GET, upgrade and reconnect.
`reconnect()` opens a new connection to the same URL; sessions outlive connections, so
`session/load` then resumes one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .connection import Connection, Reader, Writer
from .remote_options import (
    DEFAULT_OPEN_TIMEOUT,
    RemoteOptions,
    RemoteUnavailable,
    Transport,
    profile_of,
)

if TYPE_CHECKING:
    import http.cookiejar

__all__ = [
    "DEFAULT_OPEN_TIMEOUT",
    "RemoteAgent",
    "RemoteOptions",
    "RemoteUnavailable",
    "remote_peer",
]

P = TypeVar("P")


async def open_transport(url: str, options: RemoteOptions) -> Transport:
    """Open a connection to `url` with the profile its scheme names."""
    if profile_of(url) == "websocket":
        from .remote_ws import open_websocket

        return await open_websocket(url, options)
    from .remote_http import open_streamable_http

    return await open_streamable_http(url, options)


async def _settle(task: asyncio.Future[Any], timeout: float) -> None:
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class RemoteAgent(Generic[P]):
    """A remote agent: `proxy` calls it, `connection` serves the current connection.

    `cookies` is the store shared by every request and reconnect. `reconnect()` replaces the
    connection with a new one to the same URL (then `initialize` and `session/load` as usual).
    """

    def __init__(
        self,
        url: str,
        wire: Callable[[Reader, Writer], tuple[P, Connection]],
        options: RemoteOptions,
    ) -> None:
        self.url = url
        self.options = options
        self.profile = profile_of(url)
        """'websocket' or 'http' (Streamable HTTP)."""
        self._wire = wire
        self._transport: Transport | None = None
        self._serving: asyncio.Future[None] | None = None
        self._proxy: P | None = None
        self._connection: Connection | None = None

    @property
    def proxy(self) -> P:
        if self._proxy is None:
            raise RuntimeError("the remote agent is not connected")
        return self._proxy

    @property
    def connection(self) -> Connection:
        if self._connection is None:
            raise RuntimeError("the remote agent is not connected")
        return self._connection

    @property
    def cookies(self) -> http.cookiejar.CookieJar:
        return self.options.cookies

    @property
    def connection_id(self) -> str | None:
        """The server's `Acp-Connection-Id` for the current connection, once it gave one."""
        return None if self._transport is None else self._transport.connection_id

    @property
    def closed(self) -> bool:
        """Whether the current connection is over (closed here, or ended by the server)."""
        return self._serving is None or self._serving.done()

    async def open(self) -> P:
        """Open a connection (the first one, or after `close()`); the new proxy."""
        if not self.closed:
            raise RuntimeError("already connected: close() or reconnect() first")
        transport = await open_transport(self.url, self.options)
        self._transport = transport
        self._proxy, self._connection = self._wire(transport.reader, transport.writer)
        self._serving = asyncio.ensure_future(self._connection.run())
        return self._proxy

    async def reconnect(self) -> P:
        """Close the current connection (if it is still up) and open a new one to the same URL,
        with the same cookies; the new proxy. Requests still pending fail with ConnectionClosed."""
        await self.close()
        return await self.open()

    async def wait_closed(self) -> None:
        """Wait until the current connection is over (the server went away, say)."""
        if self._serving is not None:
            await asyncio.shield(self._serving)

    async def close(self) -> None:
        """End the current connection: our side closes, the transport ends (Streamable HTTP:
        DELETE), and pending requests fail with ConnectionClosed. Safe to call again."""
        connection, transport, serving = self._connection, self._transport, self._serving
        if connection is not None:
            await connection.close()
        if transport is not None:
            await transport.aclose()
        if serving is not None and connection is not None:
            await _settle(serving, connection.shutdown_grace + 1.0)


@contextlib.asynccontextmanager
async def remote_peer(
    url: str, wire: Callable[[Reader, Writer], tuple[P, Connection]], options: RemoteOptions
) -> AsyncGenerator[RemoteAgent[P], None]:
    """Connect to `url` with `wire(reader, writer)` (which returns the proxy and the
    connection), serve it while the context runs, close it on leaving."""
    agent = RemoteAgent(url, wire, options)
    await agent.open()
    try:
        yield agent
    finally:
        await agent.close()
