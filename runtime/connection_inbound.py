"""What arrives on a JSON-RPC connection, once read and split into lines (part of
`connection`): each line parsed and routed, requests served in tasks of their own (answered,
cancelled by `$/cancel_request`, refused by `admit`), notifications handled one at a time in
arrival order by a worker, responses delivered to our requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from .connection_base import (
    CANCEL_REQUEST,
    ConnectionBase,
    ConnectionClosed,
    InvalidResponse,
    cancelled_itself,
    id_key,
    notifying,
    valid_id,
)
from .dispatch import Dispatcher, RequestError, brief
from .jsonline import HELD_FROM, loads, loads_held
from .slots import dropped, owner

# The logger of `connection`, whose part this is (as before the split).
_log = logging.getLogger(__name__.rpartition(".")[0] + ".connection")


class ConnectionInbound(ConnectionBase):
    """The receiving half: `_handle_line` takes each line in."""

    def _handle_line(self, line: bytes, newline: bool = False) -> Coroutine[Any, Any, None] | None:
        """Take one line in (`newline`: it still ends in its newline); return the error reply
        still to be awaited, or None. The read loop awaits it (so garbage is back-pressured
        too). A plain function, not a coroutine: most lines need no await, and a coroutine per
        line costs more than the rest of it."""
        try:
            message = loads(line) if len(line) < HELD_FROM else loads_held(line)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            if newline:  # the error as the line's without it (positions count lines)
                return self._handle_line(line[:-1])
            if line.strip():  # blank lines are tolerated, not answered
                return self._reply_error(None, RequestError.parse_error(str(exc)[:200]))
            return None
        if message.__class__ is not dict:
            detail = (
                "batch requests are not supported"
                if isinstance(message, list)
                else "a message must be a JSON object"
            )
            return self._reply_error(None, RequestError.invalid_request(detail))
        method = message.get("method")
        if method.__class__ is str and "id" not in message and method != CANCEL_REQUEST:
            # The hot path, a valid notification (most of a prompt turn's traffic): the same
            # checks as below, in the order that decides it soonest.
            params = message.get("params")
            if message.get("jsonrpc") == "2.0" and (
                params.__class__ is dict or params is None or params.__class__ is list
            ):
                # _enqueue, inlined: the worker only needs a call when idle or not started.
                self._received = seq = self._received + 1
                if self._worker is None:
                    self._notifications = deque()
                self._notifications.append((seq, method, params))
                if self._idle is not None or self._worker is None:
                    self._start_or_wake()
                return None
        if method is None and ("result" in message or "error" in message):
            self._resolve(message)  # a response: never answered, whatever is wrong with it
            return None
        has_id = "id" in message
        msg_id = message.get("id")
        reply_id = msg_id if has_id and valid_id(msg_id) else None
        if message.get("jsonrpc") != "2.0":
            return self._reply_error(
                reply_id, RequestError.invalid_request('"jsonrpc" must be "2.0"')
            )
        if method is None:
            return self._reply_error(
                reply_id, RequestError.invalid_request("not a request, notification or response")
            )
        if method.__class__ is not str:
            return self._reply_error(
                reply_id, RequestError.invalid_request('"method" must be a string')
            )
        params = message.get("params")
        if params is not None and params.__class__ is not dict and params.__class__ is not list:
            # Not a valid request, so not a notification either: answered (id null if absent).
            return self._reply_error(
                reply_id, RequestError.invalid_request('"params" must be an object or an array')
            )
        if not has_id:
            if method == CANCEL_REQUEST:
                self._peer_cancel(params)
                return None
            self._enqueue(method, params)
            return None
        if not valid_id(msg_id):
            return self._reply_error(
                None, RequestError.invalid_request("id must be a string, an integer or null")
            )
        key = id_key(msg_id)
        if key in self._inflight:
            return self._reply_error(
                msg_id, RequestError.invalid_request("a request with this id is in flight")
            )
        delay = 0.0
        if self._admit is not None:
            refusal = self._admit(method, params, len(self._inflight))
            if isinstance(refusal, RequestError):
                return self._reply_error(msg_id, refusal)
            if refusal is not None:
                delay = refusal
        task = asyncio.ensure_future(self._serve_request(msg_id, method, params, delay))
        self._inflight[key] = task
        task.add_done_callback(self._forget(key, msg_id))
        return None

    def _enqueue(self, method: str, params: Any) -> None:
        """Queue a notification for the worker; wake it if idle, start it the first time."""
        self._received += 1
        if self._worker is None:
            self._notifications = deque()
        self._notifications.append((self._received, method, params))
        self._start_or_wake()

    def _start_or_wake(self) -> None:
        idle = self._idle
        if idle is not None:
            self._idle = None
            if not idle.done():
                idle.set_result(None)
        elif self._worker is None:
            self._worker = asyncio.ensure_future(self._notification_worker())

    def _forget(self, key: tuple[bool, Any], msg_id: Any) -> Callable[[asyncio.Task[None]], None]:
        def forget(task: asyncio.Task[None]) -> None:
            dropped(self._inflight, key)
            if self._slots is not None:
                self._slots.give(task)
            started = task in self._started
            dropped(self._started, task)
            if task in self._cancelled_by_peer:
                dropped(self._cancelled_by_peer, task)
                if not started and task.cancelled():
                    # Cancelled before its handler ever ran (the request and its
                    # `$/cancel_request` came in one read): _serve_request could not answer.
                    self._spawn(self._reply_error(msg_id, RequestError.cancelled()))

        return forget

    def _fail_pending(self, msg_id: Any, error: Exception) -> bool:
        """Fail our request `msg_id` with `error`; False if no such request is waiting."""
        entry = self._pending.get(id_key(msg_id)) if valid_id(msg_id) else None
        if entry is None:
            return False
        future, seq = entry
        seq[0] = self._received
        if not future.done():
            future.set_exception(error)
        return True

    def _resolve(self, message: dict[str, Any]) -> None:
        msg_id = message.get("id")
        entry = self._pending.get(id_key(msg_id)) if valid_id(msg_id) else None
        if entry is None:
            if (
                isinstance(msg_id, int)
                and not isinstance(msg_id, bool)
                and 0 <= msg_id < self._next_id
            ):
                # One of ours that timed out or was cancelled (or answered twice).
                _log.debug("late response for id %s ignored", msg_id)
            elif "error" in message:
                _log.warning(
                    "error response for unknown id %s: %s", brief(msg_id), brief(message["error"])
                )
            else:
                _log.debug("response for unknown id %s ignored", brief(msg_id))
            return
        future, seq = entry
        # Notifications that arrived before this response are delivered before it.
        seq[0] = self._received
        if future.done():
            return
        if message.get("jsonrpc") != "2.0":
            future.set_exception(InvalidResponse('"jsonrpc" must be "2.0"'))
        elif "error" in message:
            future.set_exception(RequestError.from_dict(message["error"]))
        else:
            future.set_result(message.get("result"))

    def _peer_cancel(self, params: Any) -> None:
        if (
            not isinstance(params, dict)
            or "requestId" not in params
            or not valid_id(params["requestId"])
        ):
            return
        task = self._inflight.get(id_key(params["requestId"]))
        if task is not None and not task.done():
            self._cancelled_by_peer[task] = None
            task.cancel()

    async def _serve_request(
        self, msg_id: Any, method: str, params: Any, delay: float = 0.0
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._started[task] = None
        try:
            if delay:
                await asyncio.sleep(delay)
            if self._slots is not None and task is not None:
                await self._slots.take(task)
                owner.set((self._slots, task))  # this task's context, and its children's
            result = await self.dispatcher.request(method, params)
        except asyncio.CancelledError:
            if task in self._cancelled_by_peer:
                await self._reply_error(msg_id, RequestError.cancelled())
                return
            if cancelled_itself(task):
                raise
            # Nobody cancelled this request: the handler awaited something cancelled elsewhere.
            _log.exception("handler for %s failed", brief(method))
            await self._reply_error(msg_id, RequestError.internal_error())
            return
        except RequestError as exc:
            await self._reply_error(msg_id, exc, method)
            return
        except ConnectionClosed as exc:  # the peer went away mid-handler: nobody to answer
            _log.debug("handler for %s stopped: %s", brief(method), exc)
            return
        except Exception:
            # The traceback goes to our log (stderr), never to the peer.
            _log.exception("handler for %s failed", brief(method))
            await self._reply_error(msg_id, RequestError.internal_error())
            return
        try:
            await self._send({"jsonrpc": "2.0", "id": msg_id, "result": result})
        except ConnectionClosed:
            pass
        except (
            Exception
        ) as exc:  # the handler returned something that is not JSON (nothing was written)
            _log.error("result of %s is not JSON: %s", brief(method), brief(exc))
            await self._reply_error(msg_id, RequestError.internal_error())

    async def _notification_worker(self) -> None:
        notifying.set(self)
        dispatcher = self.dispatcher
        # The handler's call straight from the dispatcher (one coroutine less per message),
        # unless a subclass routes notifications its own way.
        notification_call: Callable[[str, Any], Awaitable[None] | None] = (
            dispatcher.notification_call
            if type(dispatcher).notification is Dispatcher.notification
            else dispatcher.notification
        )
        worker = asyncio.current_task()
        queue = self._notifications
        loop = asyncio.get_running_loop()
        while True:
            if not queue:
                if self._eof:  # nothing more can arrive
                    return
                idle: asyncio.Future[None] = loop.create_future()
                self._idle = idle
                try:
                    await idle
                finally:
                    self._idle = None
                continue
            seq, method, params = queue.popleft()
            try:
                call = notification_call(method, params)
                if call is not None:
                    await call
            except asyncio.CancelledError:
                if cancelled_itself(worker):
                    raise
                _log.exception("notification handler for %s failed", brief(method))
            except ConnectionClosed as exc:
                _log.debug("notification handler for %s stopped: %s", brief(method), exc)
            except Exception:
                _log.exception("notification handler for %s failed", brief(method))
            finally:
                self._handled = seq
                params = call = None  # dropped before the worker idles: it may be a large message
                if self._waiters:
                    self._wake()
