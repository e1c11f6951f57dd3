"""Streamable HTTP connections' state and their SSE streams (part of `remote`): an
`HttpConnection` routes the agent's messages to the connection's stream or a session's, and
`serve_stream` answers one `GET` with its stream until the client leaves, a newer `GET`
replaces it, or the connection ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from .agent import Agent
from .jsonline import loads
from .remote_limits import Budget
from .remote_link import Channel, Link
from .remote_rate import Pace
from .remote_wire import Limits, Receive, Send, id_key, named_session


class HttpConnection:
    """One Streamable HTTP connection: its link, its streams and the routing state."""

    def __init__(
        self,
        agent: Agent,
        limits: Limits,
        client: str,
        budget: Budget,
        client_pace: Callable[[], float] | None = None,
    ) -> None:
        self.principal = agent.principal  # every request of the connection must name it
        self.posting = 0  # POSTs being handled: the client is there
        caps = limits.caps
        self.max_streams = caps.max_streams
        rate, burst = caps.stream_rate, caps.stream_burst
        self.stream_pace = None if rate is None else Pace(rate, burst, caps.rate_wait)  # GETs
        self.main = Channel()
        self.sessions: dict[str, Channel] = {}  # session streams the client has opened
        self.session_of: dict[tuple[bool, Any], str] = {}  # request id -> Acp-Session-Id
        self.waiters: dict[tuple[bool, Any], asyncio.Future[bytes]] = {}  # initialize answers
        self.link = Link(
            agent,
            self.route,
            ctx=limits.ctx,
            max_message_size=limits.max_message_size,
            send_buffer=limits.send_buffer,
            shutdown_grace=limits.shutdown_grace,
            limits=limits.caps,
            client=client,
            budget=budget,
            client_pace=client_pace,
        )

    def watched(self) -> bool:
        """Whether the client is there: a stream open or a POST being handled."""
        if self.posting or self.main.stop is not None:
            return True
        return any(channel.stop is not None for channel in self.sessions.values())

    def route(self, line: bytes) -> None:
        message = loads(line)  # we encoded it: always a JSON object
        session: Any = None
        if "method" not in message:
            key = id_key(message.get("id"))
            if key is not None:
                waiter = self.waiters.pop(key, None)
                if waiter is not None:
                    if not waiter.done():
                        waiter.set_result(line)
                    self.link.outbox.sent(line)
                    return
                session = self.session_of.pop(key, None)
        else:
            session = named_session(message)
        channel = self.sessions.get(session) if session.__class__ is str else None
        (channel or self.main).push(line)

    def has_room(self, session: str | None) -> bool:
        """Whether `stream(session)` would give a channel (not one session stream too many)."""
        if session is None or session in self.sessions or self.max_streams is None:
            return True
        return len(self.sessions) < self.max_streams

    def stream(self, session: str | None) -> Channel | None:
        """The stream's channel; None if it would be one session stream too many."""
        if session is None:
            return self.main
        channel = self.sessions.get(session)
        if channel is None:
            if not self.has_room(session):
                return None
            channel = self.sessions[session] = Channel()
        return channel


async def serve_stream(
    link: Link, channel: Channel, receive: Receive, send: Send, keepalive: float
) -> None:
    """One SSE stream (a GET) for `channel`, until the client leaves, a newer GET for the
    same stream replaces it, or the connection ends."""
    link.streamed = True
    stop = asyncio.Event()
    if channel.stop is not None:
        channel.stop.set()  # a newer GET for the same stream replaces the older
    channel.stop = stop
    start = {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
    }
    await send(start)
    undo = link.on_close(stop.set)
    streamer = asyncio.ensure_future(_stream(link, channel, send, keepalive))
    gone = asyncio.ensure_future(_disconnected(receive))
    replaced = asyncio.ensure_future(stop.wait())  # or the connection ended
    tasks: set[asyncio.Future[Any]] = {streamer, gone, replaced}
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        undo()
        client_gone = gone.done()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if channel.stop is stop:
            channel.stop = None
        link.touch()  # the reaper's grace for a client without a stream starts now
        if not client_gone:
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _stream(link: Link, channel: Channel, send: Send, keepalive: float) -> None:
    outbox = link.outbox
    while True:
        if not channel.items:
            try:
                await asyncio.wait_for(channel.wait(), keepalive)
            except asyncio.TimeoutError:
                body = b": keepalive\n\n"
                await send({"type": "http.response.body", "body": body, "more_body": True})
            continue
        batch = channel.take()
        for i, line in enumerate(batch):
            # Taken once sent: cancelled mid-send (the client left), the rest waits
            # for the stream's next GET.
            try:
                body = b"data: " + line[:-1] + b"\n\n"
                await send({"type": "http.response.body", "body": body, "more_body": True})
            except BaseException:
                channel.untake(batch[i:])
                raise
            outbox.sent(line)
        link.touch()


async def _disconnected(receive: Receive) -> None:
    """Returns when the client goes away (the request body, if any, is read and dropped)."""
    while (await receive())["type"] != "http.disconnect":
        pass
