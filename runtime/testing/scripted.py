"""The scripted client peer for tests (`ScriptedClient`), the wire lines it records (`Line`) and
the replies it gets (`Reply`). (`testing` re-exports them; its docstring shows the use.)"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from .. import jsonline, types
from ..connection import (
    DEFAULT_MAX_MESSAGE_SIZE,
    Connection,
    ConnectionClosed,
    Direction,
    Reader,
    Writer,
)
from ..dispatch import Dispatcher, RequestError
from ..methods import CLIENT_HANDLES, METHODS


def as_object(value: Any) -> dict[str, Any] | None:
    """`value` if it is a JSON object, else None."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def as_list(value: Any) -> list[Any] | None:
    """`value` if it is a JSON array, else None."""
    return cast("list[object]", value) if isinstance(value, list) else None


@dataclasses.dataclass(frozen=True)
class Line:
    """One line on the wire, as it was written (without its newline)."""

    index: int
    """Its position among every line recorded by the same peer, both directions."""
    raw: bytes
    message: Any
    """The parsed JSON value, or None when the line is not JSON (see `error`)."""
    error: str | None = None
    """Why the line is not JSON; None when it is."""

    @property
    def object(self) -> dict[str, Any] | None:
        """The message, if it is a JSON object."""
        return as_object(self.message)

    @property
    def method(self) -> str | None:
        message = self.object
        method = None if message is None else message.get("method")
        return method if isinstance(method, str) else None

    @property
    def is_response(self) -> bool:
        message = self.object
        return (
            message is not None
            and "method" not in message
            and ("result" in message or "error" in message)
        )

    def get(self, key: str) -> Any:
        """A member of the message (None if absent, or if the message is not an object)."""
        message = self.object
        return None if message is None else message.get(key)

    def session_id(self) -> Any:
        params = as_object(self.get("params"))
        return None if params is None else params.get("sessionId")

    def text(self, limit: int = 400) -> str:
        """The line for a report, cut to `limit` characters."""
        text = self.raw.decode("utf-8", "replace")
        return text if len(text) <= limit else text[:limit] + f"... ({len(self.raw)} bytes)"


def _parse(raw: bytes) -> tuple[Any, str | None]:
    """A line as the connection parses it (NaN, Infinity and out-of-range numbers are not JSON)."""
    try:
        return jsonline.loads(raw), None
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return None, str(exc)[:200]


Answer = Any
"""What a script gives for a request: the result (a generated type, or its JSON), a
`RequestError` to answer with an error, or a callable taking the decoded params and
returning (or awaiting) either."""

SILENCE_CAP = 20
"""A wait by silence (`ScriptedClient.call`) ends after this many times its timeout however
much the agent sends or computes: an agent that streams forever cannot hold a check forever."""
BUSY_CAP = 4
"""...and after this many times its timeout however much the agent computes without a word: an
agent that spins cannot either."""
BUSY_SHARE = 0.02
"""The share of one CPU an agent's processes must use while it sends nothing for its silence
not to count: an agent waiting on something uses next to none; one that imports on a machine
with ten runnable processes a core still gets about a tenth."""

# The id list of the request being sent by the current task (see ScriptedClient.call).
_sending: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "acp_testing_sending", default=None
)


@dataclasses.dataclass
class Reply:
    """What came back for one request `ScriptedClient.call` sent."""

    method: str
    id: Any
    response: Line | None = None
    """The response line, or None (timed out, or the connection closed first)."""
    timed_out: bool = False
    timeout: float | None = None
    """The silence it was given (`ScriptedClient.call`'s `timeout`), None: no limit."""
    closed: bool = False
    """The connection closed (the agent exited or closed its output) before the answer."""

    @property
    def ok(self) -> bool:
        return self.response is not None and self.response.get("error") is None

    @property
    def result(self) -> Any:
        return None if self.response is None else self.response.get("result")

    def get(self, key: str) -> Any:
        """A member of the result (None if absent, or if the result is not an object)."""
        result = as_object(self.result)
        return None if result is None else result.get(key)

    @property
    def error(self) -> Any:
        """The raw JSON-RPC error object, or None."""
        return None if self.response is None else self.response.get("error")

    @property
    def error_code(self) -> Any:
        error = as_object(self.error)
        return None if error is None else error.get("code")

    def describe(self) -> str:
        if self.response is not None:
            return self.response.text()
        if self.closed:
            return f"no answer to {self.method}: the agent closed the connection"
        return f"no answer to {self.method}"


class _ScriptHandler:
    """The Dispatcher's handler: every client method answered from the script."""

    def __init__(self, script: Mapping[str, Answer]) -> None:
        self._script = script
        self._by_handler = {
            spec.handler: name for name, spec in METHODS.items() if name in CLIENT_HANDLES
        }

    def __getattr__(self, name: str) -> Callable[[Any], Awaitable[Any]]:
        # Only for names normal lookup did not find: a handler name from METHODS, or nothing.
        method = None if name == "_by_handler" else self._by_handler.get(name)
        if method is None:
            raise AttributeError(name)

        async def handle(params: Any) -> Any:
            return await self._answer(method, params)

        return handle

    async def _answer(self, method: str, params: Any) -> Any:
        spec = METHODS[method]
        if spec.kind == "notification":
            return None  # recorded by the tap; nothing to answer
        if method not in self._script:
            raise RequestError.method_not_found(method)
        answer: Any = self._script[method]
        if callable(answer) and not hasattr(answer, "to_dict"):
            answer = answer(params)
        if isinstance(answer, Awaitable):
            answer = await cast("Awaitable[object]", answer)
        if isinstance(answer, RequestError):
            raise answer
        if answer is None or hasattr(answer, "to_dict") or spec.decode_result is None:
            return answer
        # Plain JSON from the script: decoded, so a script that does not fit the schema fails here.
        return spec.decode_result(answer, None)

    async def ext_method(self, method: str, params: Any) -> Any:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: Any) -> None:
        return None


class ScriptedClient:
    """A client peer for tests, on the generic connection: see the module docstring.

    Use it as an async context manager: entering starts serving, leaving closes our output
    (the agent sees EOF) and waits at most `close_timeout` seconds for the agent's side to end.
    """

    def __init__(
        self,
        reader: Reader,
        writer: Writer,
        script: Mapping[str, Answer] | None = None,
        *,
        ctx: types.DecodeContext | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        close_timeout: float = 1.0,
    ) -> None:
        self.script: Mapping[str, Answer] = dict(script or {})
        self.lines: list[Line] = []
        """Every line, both directions, in order (`received` and `sent` are views of it)."""
        self.received: list[Line] = []
        self.sent: list[Line] = []
        self._responses: dict[tuple[bool, Any], Line] = {}
        self._sent_methods: dict[tuple[bool, Any], str] = {}
        self._arrived = asyncio.Event()
        self.heard_at = 0.0
        """When the agent last sent a line (`time.monotonic()`): silence counts from it."""
        self.progress: Callable[[], float | None] | None = None
        """The CPU seconds the agent's processes have used (set by the opener of a process):
        a wait by silence also goes on while the agent computes (see `call`)."""
        self.close_timeout = close_timeout
        self.connection = Connection(
            Dispatcher(_ScriptHandler(self.script), CLIENT_HANDLES, ctx or types.DecodeContext()),
            reader,
            writer,
            max_message_size=max_message_size,
            shutdown_grace=close_timeout,
            tap=self._record,
        )
        self._task: asyncio.Task[None] | None = None
        self._writer = writer

    # -- recording -------------------------------------------------------------------
    def _record(self, direction: Direction, raw: bytes) -> None:
        """The connection's wire tap: every raw line, in order, before decoding (in) or as
        written (out; synchronously in the sending task, which `call` relies on)."""
        if direction == "in":
            self._record_in(raw)
        else:
            self._record_out(raw)

    def _record_in(self, raw: bytes) -> None:
        message, error = _parse(raw)
        line = Line(len(self.lines), raw, message, error)
        self.lines.append(line)
        self.received.append(line)
        if line.is_response:
            msg_id = line.get("id")
            self._responses.setdefault((isinstance(msg_id, str), msg_id), line)
        self.heard_at = time.monotonic()
        self._arrived.set()

    def _record_out(self, raw: bytes) -> None:
        message, error = _parse(raw)
        line = Line(len(self.lines), raw, message, error)
        self.lines.append(line)
        self.sent.append(line)
        if line.object is not None and "id" in line.object and line.method is not None:
            msg_id = line.object["id"]
            self._sent_methods[(isinstance(msg_id, str), msg_id)] = line.method
            ids = _sending.get()
            if ids is not None:
                ids.append(msg_id)

    def sent_method(self, msg_id: Any) -> str | None:
        """The method of the request we sent with this id."""
        return self._sent_methods.get((isinstance(msg_id, str), msg_id))

    # -- lifecycle -------------------------------------------------------------------
    async def __aenter__(self) -> ScriptedClient:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self.connection.run())

    @property
    def agent_closed(self) -> bool:
        """The agent's output reached EOF."""
        return self._task is not None and self._task.done()

    async def aclose(self) -> None:
        """Close our output (the agent sees EOF); wait a bounded time for the agent's EOF."""
        await self.connection.close()
        task = self._task
        if task is not None and not task.done():
            done, _ = await asyncio.wait([task], timeout=self.close_timeout)
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    # -- talking ---------------------------------------------------------------------
    async def call(self, method: str, params: Any, timeout: float | None = None) -> Reply:
        """Send a request; the reply (never raises for what the agent does).

        `timeout` is a time of silence, not a total: it restarts with every line the agent
        sends (a long stream never times out while it flows), at most to `SILENCE_CAP` times
        `timeout` in all, and it is extended while the agent's processes compute (`progress`:
        an agent importing on a loaded machine is slow, not silent), to `BUSY_CAP` times.
        Then the request is abandoned (`$/cancel_request` is sent); the reply says `timed_out`."""
        ids: list[Any] = []
        context = contextvars.copy_context()
        context.run(_sending.set, ids)
        # The task runs in `context` (Python 3.10 has no create_task(context=)), so the
        # tap, called as the request is written, sees `ids` and notes the id it was given.
        task: asyncio.Task[Any] = context.run(
            asyncio.ensure_future, self.connection.request(method, params)
        )
        reply = Reply(method, None, timeout=timeout)
        try:
            if timeout is not None and not await self.until_silent(task, timeout):
                reply.timed_out = True  # the task was cancelled: `$/cancel_request` is sent
            await task
        except asyncio.CancelledError:
            if not reply.timed_out:
                raise
        except TimeoutError:  # the connection's own request timeout
            reply.timed_out = True
        except ConnectionClosed:
            reply.closed = True
        except (RequestError, types.DecodeError):
            pass  # an error response: in `response`
        except Exception:  # noqa: BLE001 - an answer we could not even read: still recorded
            pass
        if ids:
            reply.id = ids[0]
            reply.response = self.response_to(ids[0])
        if reply.response is None and not reply.timed_out:
            reply.closed = True
        return reply

    async def until_silent(self, task: asyncio.Future[Any], timeout: float) -> bool:
        """Wait for `task` while the agent is not silent for `timeout` seconds (see `call`);
        False (and `task` cancelled) if it fell silent, or the cap was reached, first."""
        start = time.monotonic()
        cap = start + timeout * SILENCE_CAP
        since = start  # when the silence (or the last look at the agent's CPU) began
        cpu = None if self.progress is None else self.progress()
        while True:
            wait = min(max(since, self.heard_at) + timeout, cap) - time.monotonic()
            if wait > 0:
                done, _ = await asyncio.wait([task], timeout=wait)
                if done:
                    return True
                continue  # it may have spoken meanwhile: the silence counts from then
            now = time.monotonic()
            if now >= cap:
                break
            used = None if self.progress is None else self.progress()
            busy = used is not None and cpu is not None and used - cpu >= BUSY_SHARE * (now - since)
            if busy and now < start + timeout * BUSY_CAP:
                cpu, since = used, now  # it computes: slow, not silent
                continue
            break
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return False

    async def notify(self, method: str, params: Any) -> None:
        await self.connection.notify(method, params)

    async def send_raw(self, data: bytes) -> Line:
        """Write one line as given (a probe's malformed input, a request with an id of our
        choosing), bypassing the connection; recorded like every line sent. Its line."""
        self._record_out(data)
        line = self.sent[-1]
        try:
            self._writer.write(data + b"\n")
            await self._writer.drain()
        except (ConnectionError, RuntimeError, ValueError):
            pass  # the agent is gone: the probe sees no answer
        return line

    async def call_raw(self, message: dict[str, Any], timeout: float) -> Line | None:
        """Send a request with its own `id` (string or integer) as one raw line; the response
        carrying exactly that id (same JSON type), or None after `timeout` s of silence."""
        msg_id = message.get("id")
        await self.send_raw(jsonline.dumps(message)[:-1])
        key = (isinstance(msg_id, str), msg_id)

        def answer(line: Line) -> bool:
            found = line.get("id")
            return line.is_response and (isinstance(found, str), found) == key

        # Like `call`, `timeout` is a time of silence.
        waiting = asyncio.ensure_future(self.wait_for(answer, timeout * SILENCE_CAP))
        if not await self.until_silent(waiting, timeout):
            return None
        return waiting.result()

    def response_to(self, msg_id: Any) -> Line | None:
        return self._responses.get((isinstance(msg_id, str), msg_id))

    async def wait_for(self, predicate: Callable[[Line], bool], timeout: float) -> Line | None:
        """The first received line (already here, or arriving within `timeout`) that matches."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = 0
        while True:
            for line in self.received[seen:]:
                if predicate(line):
                    return line
            seen = len(self.received)
            remaining = deadline - loop.time()
            if remaining <= 0 or self.agent_closed:
                return None
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                pass
