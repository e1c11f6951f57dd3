"""The WebSocket profile of the remote transport (part of `remote`): one ACP connection per
socket, JSON-RPC in text frames (binary frames are ignored, as the RFD says); the 101 answer
carries `Acp-Connection-Id`. Refusals (Host, Origin, credentials, no room) come before the
accept: as an HTTP answer where the server offers `websocket.http.response`, else a close."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
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
        # Memory per connection (thousands may be open, most idle): this coroutine, in the
        # server's task, holds the connection for its whole life, so it is the only frame kept
        # beside the reader's (its own task) and the connection's: the pump runs here, inline,
        # and the admission apart (`_open`), its locals gone once it returns.
        opened = await self._open(path, scope, receive, send)
        if opened is None:
            return
        link, channel = opened
        del opened
        self.links[link.id] = link
        try:
            headers = [(b"acp-connection-id", link.id.encode())]
            await send({"type": "websocket.accept", "headers": headers})
            del headers
            # Either end (the link closed, the reader returned) stops the pump (`_Pump.stop`).
            pump = _Pump(asyncio.current_task(), channel)
            stop = pump.stop
            deadline = self.limits.caps.initialize_timeout
            loop = asyncio.get_running_loop()
            timer = None if deadline is None else loop.call_later(deadline, self._unspoken, link)
            reader = asyncio.ensure_future(_read(link, receive, self.budget, timer, stop))
            del timer  # the reader's: cancelled (and let go) with the first message, or at its end
            link.on_close(stop)  # never undone: the link is closed below, which drops it
            outbox = link.outbox
            try:
                while not pump.stopped:
                    waiter = channel.waiter()
                    if waiter is not None:
                        await waiter
                        continue  # pushed to, or stopped
                    batch = channel.take()
                    pump.sending = True
                    for i, line in enumerate(batch):
                        try:
                            text = line[:-1].decode("utf-8", "surrogatepass")
                            await send({"type": "websocket.send", "text": text})
                        except BaseException:
                            pump.sending = False
                            channel.untake(batch[i:])
                            raise
                        outbox.sent(line)
                    pump.sending = False
                    # Nothing sent is held while the pump waits (each idle connection would).
                    batch, line, text = [], b"", ""
                    link.touch()
            except asyncio.CancelledError:
                if not pump.uncancel():  # not ours (the server's): passed on, after the close
                    raise
            except Exception:  # the client is gone (a send failed): closed below, like any end
                _log.debug("remote connection %s: sending failed", link.id, exc_info=True)
            finally:
                pump.task = None  # no cancelling from here on
                # The client left (the reader returned), or the server ends it (the link ended,
                # or a send failed): then the socket is closed here.
                left = reader.done() and not reader.cancelled() and reader.exception() is None
                left = left and reader.result()
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
                if not left:  # bounded: a client that stopped reading may never take it
                    with contextlib.suppress(Exception):
                        closing = send({"type": "websocket.close", "code": _WS_GOING_AWAY})
                        await asyncio.wait_for(closing, _CLOSE_TIMEOUT)
        finally:
            del self.links[link.id]
            await link.close()
            self.gone()

    async def _open(
        self, path: str, scope: Scope, receive: Receive, send: Send
    ) -> tuple[Link, Channel] | None:
        """The upgrade admitted (or refused: None) and its agent made. Apart from `__call__`:
        nothing of it (the connect message, the principal) stays for the connection's life."""
        message = await receive()
        if message["type"] != "websocket.connect":
            return None
        if scope["path"] != path:
            await send({"type": "websocket.close", "code": 1008})
            return None
        who = await self.admit("websocket", scope)
        if isinstance(who, Refusal):
            await self._refuse(scope, send, who)
            return None
        client = client_address(scope)
        refusal = await self.room(client)
        if refusal is not None:
            await self._refuse(scope, send, refusal)
            return None
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
            return None
        return self._link(agent, channel, client), channel

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


async def _read(
    link: Link,
    receive: Receive,
    budget: Budget,
    timer: asyncio.TimerHandle | None,
    done: Callable[[], None],
) -> bool:
    """Client frames into the agent's inbox: True once the client disconnected, False if the
    connection ended first; `done()` at the end, whichever. A frame over the app's budget is
    answered -32000. `timer` (the `initialize_timeout`) is cancelled once a message is
    delivered: every connection would hold it for its first seconds otherwise. (A reader
    cancelled before its first step leaves it to fire: `_unspoken` passes over a closed link.)"""
    try:
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
                if timer is not None:
                    timer.cancel()
                    timer = None
                if not ok:
                    return False
    finally:
        if timer is not None:
            timer.cancel()
        done()


class _Pump:
    """What stops the pump (in `WsTransport.__call__`): `stop`, once the link ends or the
    reader does. From then on the pump sends nothing more, and a send under way (waiting on a
    client that stopped reading) is cancelled: the task is told apart from the server's own
    cancellation by `cancelled` (and, from Python 3.11, its count of cancellations)."""

    __slots__ = ("task", "stopped", "sending", "cancelled", "_channel")

    def __init__(self, task: asyncio.Task[Any] | None, channel: Channel) -> None:
        self.task = task
        self.stopped = False
        self.sending = False  # awaiting a send, which may wait on the client for ever
        self.cancelled = False
        self._channel = channel

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self._channel.wake()
        if self.sending and self.task is not None:  # never from the task itself: it is in a send
            self.cancelled = True
            self.task.cancel()

    def uncancel(self) -> bool:
        """Whether the CancelledError being handled was `stop`'s alone (then it is undone)."""
        if not self.cancelled:
            return False
        task = self.task
        if sys.version_info >= (3, 11) and task is not None:
            return task.uncancel() == 0  # the server may have cancelled this task too
        return True
