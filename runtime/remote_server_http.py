"""The Streamable HTTP profile of the remote transport (part of `remote`).

- `POST`: one JSON-RPC message (`Content-Type: application/json`, else 415). `initialize`
  without `Acp-Connection-Id` makes a connection and answers 200 with the agent's JSON
  response and the `Acp-Connection-Id` header; every other message answers 202 and its
  answer comes on an SSE stream. A request or notification whose params name a `sessionId`
  must carry the same `Acp-Session-Id` (400), except the ones that open a session
  (`session/new`, `session/load`, `session/resume`, `session/fork`: the client has no session
  stream for them yet). Answers to the agent's requests need no session header: their id
  already ties them to the request. Batches: 501. A body over `max_message_size`: 413, with
  the -32600 error under the message's own id when its top level shows one.
- `GET` (`Accept` must name `text/event-stream` itself, 406 otherwise): with
  `Acp-Connection-Id` alone the connection's stream, with `Acp-Session-Id` too that session's.
  A newer GET for the same stream replaces the older. A session id the connection has not
  seen yet is accepted: the RFD's own reconnect flow opens the stream before `session/load`,
  and only the agent knows its sessions.
- Routing of the agent's messages: an answer to a request POSTed with `Acp-Session-Id` (other
  than the session-opening ones) and a request or notification naming a `sessionId` go on
  that session's stream once the client has opened it, before that on the connection's stream
  (a client that never opens session streams still gets everything); the rest go on the
  connection's stream. Messages wait for their stream (bounded by `send_buffer`) while it is
  not open; a dropped stream is never read from again.
- `DELETE`: ends the connection (202); 400 without `Acp-Connection-Id`, 404 if unknown.

Every refusal has a JSON-RPC error body. Unknown connection ids get 404, and so do the ids
of another principal's connections (the app authenticated every request before it got here).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

from .agent import Agent
from .dispatch import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR
from .jsonline import Skim, loads
from .principal import Principal
from .remote_auth import Refusal
from .remote_limits import Budget, limit_refusal, over, too_fast
from .remote_link import Link
from .remote_rate import Paces
from .remote_server_sse import HttpConnection, serve_stream
from .remote_wire import (
    CLOSE,
    JSON_CONTENT,
    Deadline,
    Limits,
    Receive,
    Scope,
    Send,
    client_address,
    frame,
    id_key,
    media_types,
    named_session,
    over_budget,
    request_headers,
    send_error,
    send_refusal,
)

_log = logging.getLogger(__name__)

CONNECTION_HEADER: Final = b"acp-connection-id"
SESSION_HEADER: Final = b"acp-session-id"
SESSION_OPENING: Final = frozenset(
    {"session/new", "session/load", "session/resume", "session/fork"}
)


class HttpTransport:
    """POST, GET and DELETE on the endpoint; `links` holds the live connections by id."""

    def __init__(
        self,
        make_agent: Callable[[], Agent],
        limits: Limits,
        room: Callable[[str], Awaitable[Refusal | None]],
        gone: Callable[[], None],
        budget: Budget,
        sessions: Paces | None = None,
        streams: Paces | None = None,
    ) -> None:
        self.make_agent = make_agent
        self.limits = limits
        self.room = room  # whether one more connection from that client may start
        self.gone = gone  # a connection ended
        self.budget = budget  # the app's bytes in flight: bodies being read, messages queued
        self.sessions = sessions  # sessions opened per client address
        self.streams = streams  # SSE stream opens per client address
        self.links: dict[str, Link] = {}
        self.connections: dict[str, HttpConnection] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send, who: Principal) -> None:
        """One request, from `who` (the transport authenticated it)."""
        method = scope["method"]
        headers = request_headers(scope)
        if method == "POST":
            await self._post(headers, receive, send, who, client_address(scope))
        elif method == "GET":
            await self._get(headers, receive, send, who)
        elif method == "DELETE":
            await self._delete(headers, send, who)
        else:
            allow = ((b"allow", b"GET, POST, DELETE"),)
            await send_error(
                send, 405, None, INVALID_REQUEST, f"method {method} not allowed", headers=allow
            )

    def unwatched_for(self, link: Link, now: float) -> float:
        """Seconds an HTTP connection has had no stream open and no request (0 if watched, or
        not one of ours)."""
        state = self.connections.get(link.id)
        return 0.0 if state is None or state.watched() else now - link.last_activity

    def _lookup(self, headers: dict[bytes, bytes], who: Principal) -> HttpConnection | str:
        raw = headers.get(CONNECTION_HEADER)
        if raw is None:
            return "missing the Acp-Connection-Id header"
        state = self.connections.get(raw.decode("latin-1"))
        # Another principal's connection is answered as unknown: a connection id alone never
        # lets anyone in, and the answer does not tell that it exists.
        if state is None or state.link.closed or state.principal.id != who.id:
            return "unknown Acp-Connection-Id (the connection ended, or never existed)"
        return state

    # -- POST ----------------------------------------------------------------------
    async def _post(
        self,
        headers: dict[bytes, bytes],
        receive: Receive,
        send: Send,
        who: Principal,
        client: str,
    ) -> None:
        if media_types(headers.get(b"content-type", b""))[0] != b"application/json":
            await send_error(
                send, 415, None, INVALID_REQUEST, "Content-Type must be application/json"
            )
            return
        body = await self._body(receive, send)
        if body is None:
            return
        try:
            message = loads(body)
        except (ValueError, RecursionError) as exc:
            await send_error(send, 400, None, PARSE_ERROR, str(exc)[:200])
            return
        if isinstance(message, list):
            await send_error(send, 501, None, INVALID_REQUEST, "batch requests are not supported")
            return
        if message.__class__ is not dict:
            await send_error(send, 400, None, INVALID_REQUEST, "a message must be a JSON object")
            return
        fields: dict[str, Any] = message
        msg_id = fields.get("id") if id_key(fields.get("id")) is not None else None
        method = fields.get("method")
        is_request = method.__class__ is str and "id" in fields
        if CONNECTION_HEADER not in headers and method == "initialize" and is_request:
            await self._initialize(body, fields, send, who, client)
            return
        state = self._lookup(headers, who)
        if isinstance(state, str):
            status = 400 if CONNECTION_HEADER not in headers else 404
            await send_error(send, status, msg_id, INVALID_REQUEST, state)
            return
        raw_session = headers.get(SESSION_HEADER)
        session = None if raw_session is None else raw_session.decode("latin-1")
        if method.__class__ is str and method not in SESSION_OPENING:
            named = named_session(fields)
            if named is not None and session != named:
                detail = (
                    f"{method} names session {named}: the Acp-Session-Id header must too"
                    if session is None
                    else f"Acp-Session-Id {session} does not match the params' sessionId {named}"
                )
                await send_error(send, 400, msg_id, INVALID_REQUEST, detail)
                return
            key = id_key(fields.get("id"))
            if session is not None and is_request and key is not None:
                state.session_of[key] = session
        waiter: asyncio.Future[bytes] | None = None
        if method == "initialize" and is_request and (key := id_key(fields.get("id"))) is not None:
            waiter = state.waiters[key] = asyncio.get_running_loop().create_future()
        del message, fields
        state.posting += 1
        try:
            data = frame(body)
            if not self.budget.take(len(data)):
                await self._over_budget(send, msg_id)
                return
            if not await state.link.deliver(data):
                await send_error(send, 404, msg_id, INVALID_REQUEST, "the connection ended")
                return
            del body, data  # no copy outlives the message's delivery
            if waiter is not None:
                await self._answer(state, waiter, send)
            else:
                await send({"type": "http.response.start", "status": 202, "headers": []})
                await send({"type": "http.response.body", "body": b""})
        finally:
            state.posting -= 1
            state.link.touch()

    async def _body(self, receive: Receive, send: Send) -> bytes | None:
        """The request body, or None once refused (413, 408) or if the client went away."""
        limit = self.limits.max_message_size
        chunks: list[bytes] = []
        size = 0
        skim: Skim | None = None
        deadline = Deadline(self.limits.caps.body_timeout)
        budget, taken, spent = self.budget, 0, False  # spent: the app's budget ran out
        try:
            while True:
                message = await receive()  # the only await: where the deadline's cancel lands
                if message["type"] == "http.disconnect":
                    return None
                chunk: bytes = message.get("body", b"")
                if skim is not None:
                    skim.feed(chunk, 0, len(chunk))
                else:
                    size += len(chunk)
                    chunks.append(chunk)
                    spent = not budget.take(len(chunk))
                    taken += 0 if spent else len(chunk)
                    if size > limit or spent:  # keep only the top level, to answer under its id
                        skim = Skim()
                        for part in chunks:
                            skim.feed(part, 0, len(part))
                        chunks.clear()
                        budget.give(taken)
                        taken = 0
                if not message.get("more_body", False):
                    break
        except asyncio.CancelledError:
            if not deadline.expired():
                raise
            detail = f"the request body did not arrive within {self.limits.caps.body_timeout:g} s"
            await send_error(send, 408, None, INVALID_REQUEST, detail, headers=CLOSE)
            return None
        finally:
            deadline.cancel()
            budget.give(taken)  # taken again, whole, when the message is delivered
        if skim is None:
            return b"".join(chunks)
        head = skim.head()
        msg_id = head.get("id") if head is not None and id_key(head.get("id")) is not None else None
        if spent and size <= limit:
            await self._over_budget(send, msg_id)
            return None
        detail = f"message larger than the maximum of {limit} bytes"
        await send_error(send, 413, msg_id, INVALID_REQUEST, detail)
        return None

    async def _over_budget(self, send: Send, msg_id: Any) -> None:
        await send_refusal(send, limit_refusal(503, over_budget(self.budget)), msg_id)

    async def _initialize(
        self, body: bytes, fields: dict[str, Any], send: Send, who: Principal, client: str
    ) -> None:
        msg_id = fields.get("id")
        key = id_key(msg_id)
        if key is None:
            await send_error(
                send, 400, None, INVALID_REQUEST, "id must be a string, an integer or null"
            )
            return
        refusal = await self.room(client)
        if refusal is not None:
            await send_refusal(send, refusal, msg_id)
            return
        data = frame(body)
        if not self.budget.take(len(data)):
            await self._over_budget(send, msg_id)
            return
        try:
            agent = self.make_agent()
            agent.principal = who
        except Exception:
            self.budget.give(len(data))
            _log.exception("the agent factory failed")
            await send_error(send, 500, msg_id, INTERNAL_ERROR, "cannot start an agent")
            return
        pace = None if self.sessions is None else partial(self.sessions.admit, client)
        state = HttpConnection(agent, self.limits, client, self.budget, pace)
        link = state.link
        self.links[link.id] = link
        self.connections[link.id] = state
        link.task.add_done_callback(lambda _: self._drop(link.id))
        waiter = state.waiters[key] = asyncio.get_running_loop().create_future()
        await link.deliver(data)
        del body, data
        await self._answer(state, waiter, send)

    def _drop(self, link_id: str) -> None:
        self.links.pop(link_id, None)
        if self.connections.pop(link_id, None) is not None:
            self.gone()

    async def _answer(
        self, state: HttpConnection, waiter: asyncio.Future[bytes], send: Send
    ) -> None:
        """200 with the agent's answer to `initialize` (the one POST answered in its body)."""
        either: set[asyncio.Future[Any]] = {waiter, state.link.task}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            waiter.cancel()
            await send_error(
                send,
                500,
                None,
                INTERNAL_ERROR,
                "the connection ended before initialize was answered",
            )
            return
        headers = [JSON_CONTENT, (CONNECTION_HEADER, state.link.id.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": waiter.result()[:-1]})

    # -- GET: the SSE streams --------------------------------------------------------
    async def _get(
        self, headers: dict[bytes, bytes], receive: Receive, send: Send, who: Principal
    ) -> None:
        if headers.get(b"upgrade", b"").lower() == b"websocket":
            await send_error(
                send, 400, None, INVALID_REQUEST, "this server did not accept the WebSocket upgrade"
            )
            return
        if b"text/event-stream" not in media_types(headers.get(b"accept", b"")):
            await send_error(
                send, 406, None, INVALID_REQUEST, "Accept must include text/event-stream"
            )
            return
        state = self._lookup(headers, who)
        if isinstance(state, str):
            await send_error(
                send, 400 if CONNECTION_HEADER not in headers else 404, None, INVALID_REQUEST, state
            )
            return
        raw_session = headers.get(SESSION_HEADER)
        session = None if raw_session is None else raw_session.decode("latin-1")
        if not state.has_room(session):  # refused before the rates: no token spent on it
            await _too_many_streams(send, state)
            return
        caps, pace, client = self.limits.caps, state.stream_pace, state.link.client
        delay = 0.0 if pace is None else pace.admit()
        if delay < 0:
            rate = caps.stream_rate or 0.0
            error = too_fast("stream_rate", rate, -delay, "this connection's")
            await send_refusal(send, limit_refusal(429, error))
            return
        if self.streams is not None:
            # The address's own turn too: its connections' opens, each paced alone, came in
            # step (one per connection at every tick), bursts that a turn waited behind.
            spread = self.streams.admit(client)
            if spread < 0:
                if pace is not None:  # refused: the connection's token is given back
                    pace.refund()
                rate = caps.client_stream_rate or 0.0
                error = too_fast("client_stream_rate", rate, -spread, "this client address's")
                await send_refusal(send, limit_refusal(429, error))
                return
            delay = max(delay, spread)
        if delay:  # its turn (a flood of stream opens is held to the rate)
            await asyncio.sleep(delay)
        channel = state.stream(session)
        if channel is None:  # another GET took the last room while this one waited its turn
            if pace is not None:
                pace.refund()
            if self.streams is not None:
                self.streams.refund(client)
            await _too_many_streams(send, state)
            return
        await serve_stream(state.link, channel, receive, send, self.limits.keepalive)

    # -- DELETE ----------------------------------------------------------------------
    async def _delete(self, headers: dict[bytes, bytes], send: Send, who: Principal) -> None:
        state = self._lookup(headers, who)
        if isinstance(state, str):
            await send_error(
                send, 400 if CONNECTION_HEADER not in headers else 404, None, INVALID_REQUEST, state
            )
            return
        await state.link.close()
        self._drop(state.link.id)
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def _too_many_streams(send: Send, state: HttpConnection) -> None:
    error = over("max_streams", state.max_streams or 0)
    await send_refusal(send, limit_refusal(429, error))
