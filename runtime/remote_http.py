"""The RFD's Streamable HTTP profile, as the `Reader`/`Writer` pair a `Connection` runs on.

Every message we send is one POST (`Content-Type: application/json`): `initialize` answers
200 with the response as JSON and the `Acp-Connection-Id` header, everything else 202. Then
messages from the server arrive on SSE GET streams (`Accept: text/event-stream`): one for
the connection, opened right after `initialize`, and one per session (`Acp-Session-Id`),
opened before a request naming a session is posted (so `session/load`'s replay has a stream
to arrive on) and when a response names a new one (`session/new`). Every POST about a
session carries `Acp-Session-Id`: requests and notifications whose params name it, our
answers to the server's requests (the session of the stream the request came on), and
`$/cancel_request` for a session's request. DELETE ends the connection.

All streams feed one inbox, in arrival order per stream, so a response is taken on whichever
stream the server sends it (servers differ). A POST answered with an HTTP error fails the
request it carried (a JSON-RPC error with `data.httpStatus`); a POST that cannot be sent, or
the end of the connection stream, ends the connection (the reader sees EOF). `httpx` is
imported only here, when a connection is opened; typed as `Any`, so this type-checks without it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from collections.abc import Coroutine
from typing import Any, Final, cast

from .remote_messages import as_line, id_key, parse, session_in
from .remote_options import RemoteOptions, RemoteUnavailable, import_optional
from .remote_sse import sse_data

__all__ = ["StreamableHttpTransport", "open_streamable_http"]

_log = logging.getLogger(__name__)

CONNECTION_HEADER: Final = "Acp-Connection-Id"
SESSION_HEADER: Final = "Acp-Session-Id"
_INSTALL: Final = "'httpx[http2]'"
_HTTP_ERROR: Final = -32603  # JSON-RPC internal error: what a request refused by HTTP fails with
_DELETE_TIMEOUT: Final = 5.0
_POST_HEADERS: Final = {"Accept": "application/json", "Content-Type": "application/json"}
CROSS_STREAM_GRACE: Final = 0.05
"""Seconds an answer about a session that came on another stream than the session's waits."""


class StreamableHttpTransport:
    """One Streamable HTTP connection: `reader` and `writer` for the `Connection`, `aclose()`."""

    def __init__(self, url: str, options: RemoteOptions, httpx: Any) -> None:
        self.url = url
        self._options = options
        self._httpx = httpx
        self._connection_id: str | None = None
        self._inbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._pending: list[bytes] = []
        self._send_lock = asyncio.Lock()  # POSTs go out one at a time, in write order
        # our request id -> its session, and whether the early GET of that session's stream
        # failed (a server that knows the session only once this request is answered)
        self._ours: dict[tuple[bool, Any], tuple[str | None, bool]] = {}
        self._theirs: dict[tuple[bool, Any], str | None] = {}  # their request id -> session
        self._streams: dict[str | None, asyncio.Task[None]] = {}  # None: the connection stream
        self._opening: dict[str, asyncio.Future[bool]] = {}
        self._refused: set[str] = set()  # sessions whose stream the server would not open
        self._tasks: set[asyncio.Task[None]] = set()  # answers held until their stream opens
        self._closing = False
        self._eof = False
        self._http2 = options.http2
        self._posts: Any = None
        self._versions = (True, True)  # HTTP/1.1 allowed, HTTP/2 allowed
        self._make_clients()

    # -- the HTTP clients --------------------------------------------------------------------
    def _make_clients(self) -> None:
        """The client for POST and DELETE. Each GET stream gets a client of its own (its own
        TCP connection), and POSTs go one at a time: on one HTTP/2 connection, httpcore 1.0
        stalls a request whose response headers another request's reader has already taken
        off the socket, while that reader holds the connection's read lock waiting for data
        of its own stream (two open SSE streams and a third request reproduce it: the hang of
        the Python SDK's client). One request per connection at a time cannot stall so.
        Cookies are one store for all of them (the options' jar)."""
        scheme = urllib.parse.urlsplit(self.url).scheme.lower()
        # http:// has no ALPN: HTTP/2 there is prior knowledge (h2c), so HTTP/1.1 is off.
        http1 = self._http2 is not True and not (self._http2 is None and scheme == "http")
        self._versions = (http1, self._http2 is not False)
        try:
            self._posts = self._client()
        except ImportError as exc:  # httpx without h2
            raise RemoteUnavailable(
                f"Streamable HTTP needs HTTP/2, for which httpx needs the 'h2' package ({exc}); "
                f"install it with: pip install {_INSTALL}"
            ) from None

    def _client(self) -> Any:
        http1, http2 = self._versions
        return self._httpx.AsyncClient(
            http1=http1,
            http2=http2,
            timeout=self._httpx.Timeout(self._options.open_timeout, read=None),
            verify=self._options.tls(),
            headers=dict(self._options.headers),
            cookies=self._options.cookies,
            trust_env=False,  # an ACP endpoint is reached directly: no proxy from the environment
        )

    # -- Reader / Writer -----------------------------------------------------------------
    @property
    def reader(self) -> StreamableHttpTransport:
        return self

    @property
    def writer(self) -> StreamableHttpTransport:
        return self

    @property
    def connection_id(self) -> str | None:
        """The `Acp-Connection-Id` the server gave in its answer to `initialize`."""
        return self._connection_id

    async def read(self, n: int = -1) -> bytes:
        data = await self._inbox.get()
        if not data:
            self._inbox.put_nowait(b"")  # EOF stays EOF for any later read
        return data

    def write(self, data: bytes) -> None:
        if self._closing or self._eof:
            raise ConnectionResetError("the connection is closed")
        self._pending.append(data)

    async def drain(self) -> None:
        async with self._send_lock:
            while self._pending:
                data = self._pending.pop(0)
                for line in data.split(b"\n"):
                    if line.strip():
                        await self._post(line)

    def close(self) -> None:
        """Stop writing; `aclose()` ends the connection on the server."""
        self._closing = True

    async def aclose(self) -> None:
        """DELETE the connection, stop its streams; the reader then sees EOF."""
        self._closing = True
        if self._connection_id is not None and not self._eof:
            try:
                response = await asyncio.wait_for(
                    self._posts.delete(self.url, headers={CONNECTION_HEADER: self._connection_id}),
                    _DELETE_TIMEOUT,
                )
                _log.debug("DELETE answered %s", response.status_code)
            except (self._httpx.HTTPError, OSError, asyncio.TimeoutError) as exc:
                _log.debug("DELETE failed: %s", exc)
        self._end(None)
        streams = list(self._streams.values()) + list(self._tasks)
        for task in streams:
            task.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
        await _close_client(self._posts)

    def _end(self, reason: str | None) -> None:
        """The connection is over: the reader sees EOF (once)."""
        if not self._eof:
            self._eof = True
            if reason is not None and not self._closing:
                _log.info("the connection to %s ended: %s", self.url, reason)
            self._inbox.put_nowait(b"")

    # -- sending -----------------------------------------------------------------------
    def _session_of_outgoing(self, message: dict[str, Any]) -> str | None:
        method, params = message.get("method"), message.get("params")
        if method is None:  # our answer to one of their requests
            return self._theirs.pop(id_key(message.get("id")), None)
        if method == "$/cancel_request" and isinstance(params, dict):
            entry = self._ours.get(id_key(cast(dict[str, Any], params).get("requestId")))
            return None if entry is None else entry[0]
        return session_in(params)

    async def _post(self, line: bytes) -> None:
        message = parse(line) or {}
        method = message.get("method")
        request = isinstance(method, str) and "id" in message
        session = self._session_of_outgoing(message)
        if request:
            self._ours[id_key(message["id"])] = (session, False)
        if self._connection_id is None:
            if method == "initialize" and request:
                await self._initialize(line, message["id"])
            elif request:
                self._fail(message["id"], 400, f"no connection: send initialize before {method}")
            else:
                _log.warning("dropped a message sent before initialize: %s", line[:200])
            return
        if (
            request
            and session is not None
            and session not in self._streams
            and session not in self._refused
        ):
            if not await self._open_session(session):
                self._ours[id_key(message["id"])] = (session, True)
        headers = {CONNECTION_HEADER: self._connection_id, **_POST_HEADERS}
        if session is not None:
            headers[SESSION_HEADER] = session
        response = await self._send_post(line, headers)
        if response.status_code in (200, 202):
            await self._body(response.content)
        elif request:
            self._fail(message["id"], response.status_code, response.text)
        else:
            status, text = response.status_code, response.text[:200]
            _log.warning("the server refused (HTTP %s %s): %s", status, text, line[:200])

    async def _send_post(self, line: bytes, headers: dict[str, str], h2c: bool = False) -> Any:
        """POST `line`. `h2c`: HTTP/2 by prior knowledge (the default for http://) may fall
        back to HTTP/1.1 when the server drops it (uvicorn would)."""
        httpx = self._httpx
        try:
            return await self._posts.post(self.url, content=line, headers=headers)
        except httpx.HTTPError as exc:
            unreachable = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
            if h2c and isinstance(exc, httpx.TransportError) and not unreachable:
                _log.info("%s does not speak HTTP/2 (%r): HTTP/1.1", self.url, exc)
                await _close_client(self._posts)
                self._http2 = self._options.http2 = False  # reconnects too: same server
                self._make_clients()
                return await self._send_post(line, headers)
            self._end(f"POST failed: {type(exc).__name__}: {exc}")
            raise ConnectionResetError(
                f"cannot POST to {self.url}: {type(exc).__name__}: {exc}"
            ) from exc

    async def _initialize(self, line: bytes, request_id: Any) -> None:
        headers = dict(_POST_HEADERS)
        h2c = self._http2 is None and urllib.parse.urlsplit(self.url).scheme.lower() == "http"
        response = await self._send_post(line, headers, h2c)
        if response.status_code != 200:
            self._fail(request_id, response.status_code, response.text)
            return
        connection_id = response.headers.get(CONNECTION_HEADER)
        if connection_id:
            self._connection_id = connection_id
            failure = await self._open_stream(None)
            if failure is not None:
                await self._body(response.content)
                self._end(f"the server would not open the connection stream: {failure}")
                return
        await self._body(response.content)

    def _fail(self, request_id: Any, status: int, text: str) -> None:
        """Fail our request `request_id`: the server refused it with HTTP `status`."""
        self._ours.pop(id_key(request_id), None)
        error = {
            "code": _HTTP_ERROR,
            "message": f"HTTP {status}: {text.strip()[:200] or 'refused'}",
            "data": {"httpStatus": status},
        }
        self._inbox.put_nowait(
            as_line(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode())
        )

    # -- receiving -----------------------------------------------------------------------
    async def _body(self, content: bytes) -> None:
        """A POST's body: a JSON-RPC message (initialize's answer; any server may answer so)."""
        if content.strip():
            await self._receive(content, None)

    async def _receive(self, data: bytes, scope: str | None) -> None:
        """One message from the server, from the stream of session `scope` (None: the
        connection's, or a POST's body)."""
        message = parse(data)
        if message is not None:
            msg_id = message.get("id")
            if isinstance(message.get("method"), str) and "id" in message:
                self._theirs[id_key(msg_id)] = scope or session_in(message.get("params"))
            elif "method" not in message and "id" in message:
                entry = self._ours.pop(id_key(msg_id), None)
                made = session_in(message.get("result"))
                if entry is not None and "result" in message:
                    # A session made (session/new), or one the server would not stream before
                    # this request (session/load): its stream opens before the answer is seen.
                    # In a task of its own: the stream this came on keeps being read meanwhile.
                    opening = made if made is not None and made not in self._streams else None
                    if opening is None and entry[1] and entry[0] is not None:
                        opening = entry[0]
                    if opening is not None:
                        self._hold(self._deliver_after(opening, data))
                        return
                # The RFD puts session/load's answer on the connection stream and its replay
                # on the session's: two streams, whose order on arrival nobody promises. The
                # answer waits a moment, so that updates sent before it are seen before it.
                if entry is not None and entry[0] is not None and entry[0] != scope:
                    if entry[0] in self._streams:
                        self._hold(self._deliver_later(data))
                        return
        self._inbox.put_nowait(as_line(data))

    def _hold(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver_after(self, session: str, data: bytes) -> None:
        await self._open_session(session)
        self._inbox.put_nowait(as_line(data))

    async def _deliver_later(self, data: bytes) -> None:
        await asyncio.sleep(CROSS_STREAM_GRACE)
        self._inbox.put_nowait(as_line(data))

    async def _open_session(self, session: str) -> bool:
        """Open the stream of `session` unless it is open (or opening); whether it is open."""
        if session in self._streams:
            return True
        opening = self._opening.get(session)
        if opening is not None:
            return await opening
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._opening[session] = future
        failure: str | None = "not opened"
        try:
            failure = await self._open_stream(session)
            if failure is None:
                self._refused.discard(session)
            else:
                self._refused.add(session)
                _log.debug("no stream for session %s: %s", session, failure)
        finally:
            del self._opening[session]
            future.set_result(failure is None)
        return failure is None

    async def _open_stream(self, session: str | None) -> str | None:
        """Open the connection stream (None) or a session's; why not, if it was not opened."""
        assert self._connection_id is not None
        headers = {CONNECTION_HEADER: self._connection_id, "Accept": "text/event-stream"}
        if session is not None:
            headers[SESSION_HEADER] = session
        client = self._client()
        request = client.build_request("GET", self.url, headers=headers)
        try:
            response = await asyncio.wait_for(
                client.send(request, stream=True), self._options.open_timeout
            )
        except (self._httpx.HTTPError, OSError, asyncio.TimeoutError) as exc:
            await _close_client(client)
            return f"{type(exc).__name__}: {exc}"
        if response.status_code != 200:
            try:
                text = (await response.aread()).decode("utf-8", "replace")
            except self._httpx.HTTPError:
                text = ""
            await response.aclose()
            await _close_client(client)
            return f"HTTP {response.status_code} {text.strip()[:200]}"
        task = asyncio.ensure_future(self._read_stream(client, response, session))
        self._streams[session] = task
        return None

    async def _read_stream(self, client: Any, response: Any, session: str | None) -> None:
        try:
            async for data in sse_data(response.aiter_bytes()):
                await self._receive(data, session)
        except (self._httpx.HTTPError, OSError) as exc:
            _log.debug("stream %s failed: %s", session or "(connection)", exc)
        finally:
            self._streams.pop(session, None)
            try:
                await response.aclose()
            except Exception as exc:  # noqa: BLE001 - the stream is over either way
                _log.debug("closing a stream failed: %s", exc)
            await _close_client(client)
            if session is None:
                if self._tasks:  # answers held back still go before the end
                    await asyncio.wait(set(self._tasks), timeout=self._options.open_timeout)
                self._end("the server closed the connection stream")


async def _close_client(client: Any) -> None:
    try:
        await client.aclose()
    except Exception as exc:  # noqa: BLE001 - a half-dead client must not stop the close
        _log.debug("closing an HTTP client failed: %s", exc)


async def open_streamable_http(url: str, options: RemoteOptions) -> StreamableHttpTransport:
    """A Streamable HTTP connection to `url`: nothing is sent until the `initialize` request."""
    httpx = import_optional("httpx", "an ACP Streamable HTTP connection", _INSTALL)
    return StreamableHttpTransport(url, options, httpx)
