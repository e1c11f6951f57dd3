"""The WebSocket profile of the remote transport (part of `remote`): one ACP connection per
socket, JSON-RPC in text frames (binary frames are ignored, as the RFD says); the 101 answer
carries `Acp-Connection-Id`. Refusals (Host, Origin, credentials, no room) come before the
accept: as an HTTP answer where the server offers `websocket.http.response`, else a close."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

from .agent import Agent
from .principal import Principal
from .remote_auth import Refusal
from .remote_limits import Budget
from .remote_link import Channel, Link
from .remote_rate import Paces
from .remote_wire import (
    Limits,
    Receive,
    Scope,
    Send,
    client_address,
    frame,
    over_budget_line,
    send_refusal,
)

_log = logging.getLogger(__name__)

_WS_TRY_AGAIN: Final = 1013  # "try again later": over max_connections
_WS_GOING_AWAY: Final = 1001  # idle timeout, server shutdown
_WS_POLICY: Final = 1008  # refused: Host, Origin or credentials
_WS_INTERNAL: Final = 1011  # the agent factory failed
_CLOSE_TIMEOUT: Final = 1.0


class WsTransport:
    """WebSocket connections on the endpoint; `links` holds the live ones by id. The app
    passes in what it decides for both profiles: `admit` (who, or a refusal), `room` (whether
    one more connection from that client may start), `close_soon`, `gone` and `sessions` (the
    per-address buckets of sessions opened)."""

    def __init__(
        self,
        make_agent: Callable[[], Agent],
        limits: Limits,
        budget: Budget,
        admit: Callable[[str, Scope], Awaitable[Principal | Refusal]],
        room: Callable[[str], Awaitable[Refusal | None]],
        close_soon: Callable[[Link], None],
        gone: Callable[[], None],
        sessions: Paces | None = None,
    ) -> None:
        self.make_agent = make_agent
        self.limits = limits
        self.budget = budget  # the app's bytes in flight
        self.admit = admit
        self.room = room
        self.close_soon = close_soon
        self.gone = gone
        self.links: dict[str, Link] = {}
        self.sessions = sessions  # sessions opened per client address

    async def __call__(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        if scope["path"] != path:
            await send({"type": "websocket.close", "code": 1008})
            return
        who = await self.admit("websocket", scope)
        if isinstance(who, Refusal):
            await self._refuse(scope, send, who)
            return
        client = client_address(scope)
        refusal = await self.room(client)
        if refusal is not None:
            await self._refuse(scope, send, refusal)
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
        self.links[link.id] = link
        deadline = self.limits.caps.initialize_timeout
        timer = (
            None
            if deadline is None
            else asyncio.get_running_loop().call_later(deadline, self._unspoken, link)
        )
        try:
            await self._serve(link, channel, receive, send)
        finally:
            if timer is not None:
                timer.cancel()
            del self.links[link.id]
            await link.close()
            self.gone()

    async def _serve(self, link: Link, channel: Channel, receive: Receive, send: Send) -> None:
        headers = [(b"acp-connection-id", link.id.encode())]
        await send({"type": "websocket.accept", "headers": headers})
        pump = asyncio.ensure_future(_pump(link, channel, send))
        reader = asyncio.ensure_future(_read(link, receive, self.budget))
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

    def _unspoken(self, link: Link) -> None:
        """A WebSocket silent since it opened, `initialize_timeout` later: closed."""
        if not link.messages and not link.closed:
            _log.info("remote connection %s sent nothing in time: closed", link.id)
            self.close_soon(link)

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
            client_pace=None if self.sessions is None else partial(self.sessions.admit, client),
        )

    @staticmethod
    async def _refuse(scope: Scope, send: Send, refusal: Refusal) -> None:
        extensions: Any = scope.get("extensions")
        if isinstance(extensions, dict) and "websocket.http.response" in extensions:
            await send_refusal(send, refusal, websocket=True)
        elif refusal.status in (429, 503):
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": _WS_TRY_AGAIN, "reason": refusal.detail})
        else:  # closed before accept: the server answers 403, nothing was upgraded
            await send({"type": "websocket.close", "code": _WS_POLICY, "reason": refusal.detail})


async def _read(link: Link, receive: Receive, budget: Budget) -> bool:
    """Client frames into the agent's inbox: True once the client disconnected, False if the
    connection ended first. A frame over the app's budget is answered -32000."""
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
