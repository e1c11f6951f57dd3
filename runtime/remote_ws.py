"""The RFD's WebSocket profile, as the `Reader`/`Writer` pair a `Connection` runs on.

Each JSON-RPC message is one text frame. Incoming frames become lines for the connection
(binary frames are ignored, as the RFD says); each line written goes out as one text frame.
The upgrade request carries the stored cookies, and the cookies the upgrade response sets
are kept. `websockets` is imported only here, when a connection is opened; the types used
of it are the small protocols below, so this module type-checks without it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol, cast

from .remote_cookies import cookie_header, store_cookies
from .remote_messages import as_line
from .remote_options import RemoteOptions, RemoteUnavailable, import_optional, is_tls

__all__ = ["WebSocketTransport", "open_websocket"]

_log = logging.getLogger(__name__)

_INSTALL = "websockets"


class _Socket(Protocol):
    """What is used of a `websockets.asyncio.client.ClientConnection`."""

    async def recv(self) -> str | bytes: ...

    async def send(self, message: str) -> None: ...

    async def close(self, code: int = 1000, reason: str = "") -> None: ...


def _header_values(socket: Any, name: str) -> list[str]:
    response = getattr(socket, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return []
    return [str(value) for value in headers.get_all(name)]


class WebSocketTransport:
    """One WebSocket connection: `reader` and `writer` for the `Connection`, `aclose()`."""

    def __init__(
        self, socket: _Socket, closed_error: type[BaseException], connection_id: str | None
    ) -> None:
        self._socket = socket
        self._closed_error = closed_error
        self._connection_id = connection_id
        self._pending: list[bytes] = []
        self._send_lock = asyncio.Lock()  # concurrent drains must send frames in write order
        self._closing = False
        self._close_task: asyncio.Task[None] | None = None

    @property
    def reader(self) -> WebSocketTransport:
        return self

    @property
    def writer(self) -> WebSocketTransport:
        return self

    @property
    def connection_id(self) -> str | None:
        """The `Acp-Connection-Id` of the upgrade response, if the server sent one."""
        return self._connection_id

    # -- Reader --------------------------------------------------------------------------
    async def read(self, n: int = -1) -> bytes:
        """The next text frame as one line (b"" once the socket is closed)."""
        while True:
            try:
                frame = await self._socket.recv()
            except self._closed_error:
                return b""
            except (OSError, asyncio.IncompleteReadError) as exc:
                _log.debug("websocket read failed: %s", exc)
                return b""
            if isinstance(frame, bytes):
                continue  # binary frames are ignored (RFD)
            return as_line(frame.encode("utf-8", "replace"))  # a frame is one JSON text

    # -- Writer --------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self._closing:
            raise ConnectionResetError("the websocket is closed")
        self._pending.append(data)

    async def drain(self) -> None:
        async with self._send_lock:
            if not self._pending:
                return
            data, self._pending = b"".join(self._pending), []
            for line in data.split(b"\n"):
                if not line.strip():
                    continue
                try:
                    await self._socket.send(line.decode("utf-8", "replace"))
                except self._closed_error as exc:
                    raise ConnectionResetError(f"the websocket is closed: {exc}") from exc

    def close(self) -> None:
        """Close the socket (a WebSocket has no half-close); the reader then sees EOF."""
        if not self._closing:
            self._closing = True
            self._close_task = asyncio.ensure_future(self._close())

    async def _close(self) -> None:
        try:
            await self._socket.close()
        except Exception as exc:  # noqa: BLE001 - closing a dead socket must not raise
            _log.debug("websocket close failed: %s", exc)

    async def aclose(self) -> None:
        self.close()
        if self._close_task is not None:
            await asyncio.wait({self._close_task}, timeout=5.0)


async def open_websocket(url: str, options: RemoteOptions) -> WebSocketTransport:
    """Open the WebSocket at `url` (the upgrade carries `options.headers` and the cookies)."""
    client = import_optional("websockets.asyncio.client", "an ACP WebSocket connection", _INSTALL)
    exceptions = import_optional("websockets.exceptions", "an ACP WebSocket connection", _INSTALL)
    headers = dict(options.headers)
    cookie = cookie_header(options.cookies, url)
    if cookie is not None:
        headers["Cookie"] = cookie
    try:
        socket: Any = await client.connect(
            url,
            additional_headers=headers,
            open_timeout=options.open_timeout,
            # A little over the connection's own limit, so that the connection (not the
            # library) decides about an oversize message.
            max_size=options.max_message_size + 1024,
            proxy=None,  # direct, as over Streamable HTTP (see remote_options)
            **({"ssl": options.tls()} if is_tls(url) else {}),
        )
    except (OSError, TimeoutError, asyncio.TimeoutError) as exc:
        raise RemoteUnavailable(
            f"cannot open the WebSocket {url}: {exc or type(exc).__name__}"
        ) from None
    except exceptions.InvalidStatus as exc:
        status = getattr(getattr(exc, "response", None), "status_code", "?")
        raise RemoteUnavailable(
            f"cannot open the WebSocket {url}: the server answered HTTP {status} to the upgrade"
        ) from None
    except exceptions.WebSocketException as exc:
        raise RemoteUnavailable(f"cannot open the WebSocket {url}: {exc}") from None
    store_cookies(options.cookies, url, _header_values(socket, "Set-Cookie"))
    ids = _header_values(socket, "Acp-Connection-Id")
    closed_error = cast(type[BaseException], exceptions.ConnectionClosed)
    return WebSocketTransport(cast(_Socket, socket), closed_error, ids[0] if ids else None)
