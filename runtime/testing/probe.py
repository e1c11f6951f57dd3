"""The probe agent: the agent side of a client check, one `ProbeSession` per connection the
client opens (each spawn of the probe agent). It answers `initialize` and `session/new`, and
in the client's prompt turns it runs the scenario of `probe_scenario` (every kind of update,
then the requests the client's capabilities allow, then what the client must refuse or
tolerate). It records every line both ways, exactly as written, for `client_verdicts`.
(`client_conformance` is the public façade.)

Built on the generic layer (`Connection`, `Dispatcher`, `METHODS`, `types`), so it serves in
either role's package, in-process or behind `probe_relay` over a socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Final

from .. import jsonline, types
from ..connection import Connection, ConnectionClosed, Direction, Reader, Writer
from ..dispatch import Dispatcher, RequestError
from ..methods import AGENT_HANDLES, METHODS, PROTOCOL_VERSION
from .client_checks import ClientOptions
from .scripted import Line, as_object

MODES: Final = ("ask", "code")
PERMISSION_OPTIONS: Final = ("probe-allow-once", "probe-reject-once")
AGENT_INFO: Final = {"name": "acp-probe-agent", "title": "ACP conformance probe", "version": "1"}
# The first turn runs every step; a turn cut short by session/cancel leaves the rest to the next.
STEPS: Final = ("updates", "permission", "fs-read", "fs-write", "terminal", "ext", "unadvertised")

_sending: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "acp_probe_sending", default=None
)


def parse(raw: bytes, index: int) -> Line:
    try:
        return Line(index, raw, jsonline.loads(raw))
    except (ValueError, RecursionError) as exc:
        return Line(index, raw, None, str(exc)[:200])


def _key(msg_id: Any) -> tuple[bool, Any]:
    return (isinstance(msg_id, str), msg_id)


def typed(method: str, result: Any) -> Any:
    """A result as the generated type the dispatcher encodes (a bug in the probe if it fails)."""
    decode = METHODS[method].decode_result
    return result if decode is None else decode(result, None)


@dataclasses.dataclass
class Asked:
    """One request the probe sent the client, and what became of it."""

    method: str
    params: Any
    id: Any = None
    response: Line | None = None
    timed_out: bool = False
    closed: bool = False
    cancel: Line | None = None
    """The client's session/cancel that arrived while this request was pending."""
    sent_at: int = 0
    """How many lines the connection had when it was sent."""
    silenced_by: Asked | None = None
    """For a request that timed out: the earlier unanswered one the client has said nothing
    since (its silence is that request's fault, not this one's check's)."""

    @property
    def result(self) -> Any:
        return None if self.response is None else self.response.get("result")

    @property
    def error(self) -> dict[str, Any] | None:
        return None if self.response is None else as_object(self.response.get("error"))

    def why(self, timeout: float) -> str:
        """Why there is no result (for a failure's detail)."""
        if self.error is not None:
            return f"answered error {self.error.get('code')} {self.error.get('message')!r}"
        if self.timed_out:
            return f"no answer to {self.method} within {timeout:g} s"
        if self.closed:
            return f"the client closed the connection before answering {self.method}"
        return f"{self.method} answered {self.result!r}"


class Findings:
    """What the checks found over a whole run, every connection together: per check, the
    first failure, the passes, or why it was skipped or not exercised."""

    def __init__(self) -> None:
        self.settled: dict[str, float] = {}
        """Check id -> when (loop time) the run first settled something about it."""
        self.failures: dict[str, tuple[str, Line | None]] = {}
        self.passes: dict[str, list[str]] = {}
        self.skips: dict[str, str] = {}
        self.unexercised: dict[str, str] = {}
        self.warnings: dict[str, list[str]] = {}
        self.blame: dict[int, str] = {}
        """id of an unanswered request -> the check that failed for it."""
        self.silenced: dict[str, tuple[str, Asked]] = {}
        """Check id -> (its detail, the first unanswered request the client fell silent at)."""

    def _mark(self, check_id: str) -> None:
        if check_id not in self.settled:
            self.settled[check_id] = asyncio.get_running_loop().time()

    def fail(
        self, check_id: str, detail: str, line: Line | None = None, asked: Asked | None = None
    ) -> None:
        """A failure; with `asked`, one about that request's answer. One fault, one failure:
        if the client has been silent since an earlier request went unanswered, the silence is
        blamed on that request's check (this one is blocked by it)."""
        self._mark(check_id)
        if asked is not None and asked.silenced_by is not None:
            self.silenced.setdefault(check_id, (detail, asked.silenced_by))
            return
        if asked is not None and (asked.timed_out or asked.closed):
            self.blame.setdefault(id(asked), check_id)
        self.failures.setdefault(check_id, (detail, line))

    def silent_at(self, check_id: str, detail: str, first: Asked) -> None:
        """`check_id` saw only silence, which began at the unanswered request `first`."""
        self._mark(check_id)
        self.silenced.setdefault(check_id, (detail, first))

    def ok(self, check_id: str, detail: str = "") -> None:
        self._mark(check_id)
        self.passes.setdefault(check_id, []).append(detail)

    def skip(self, check_id: str, why: str) -> None:
        self._mark(check_id)
        self.skips.setdefault(check_id, why)

    def not_exercised(self, check_id: str, why: str) -> None:
        self._mark(check_id)
        self.unexercised.setdefault(check_id, why)

    def warn(self, check_id: str, warning: str) -> None:
        found = self.warnings.setdefault(check_id, [])
        if warning not in found:
            found.append(warning)


Turn = Callable[["ProbeSession", str, str, asyncio.Event], Awaitable[None]]
"""A prompt turn: (session, session id, its cwd, set when the client cancels)."""


class _Handler:
    """The Dispatcher's handler: the agent methods the probe answers; the rest get -32601
    (the probe advertises nothing optional)."""

    def __init__(self, session: ProbeSession) -> None:
        self._routes: dict[str, Callable[[Any], Awaitable[Any]]] = {
            "initialize": session.initialize,
            "session/new": session.session_new,
            "session/prompt": session.session_prompt,
            "session/set_mode": session.session_set_mode,
        }
        self._by_handler = {spec.handler: name for name, spec in METHODS.items()}

    def __getattr__(self, name: str) -> Callable[[Any], Awaitable[Any]]:
        method = None if name in ("_routes", "_by_handler") else self._by_handler.get(name)
        if method is None:
            raise AttributeError(name)
        route = self._routes.get(method)

        async def handle(params: Any) -> Any:
            if route is not None:
                return await route(params)
            if METHODS[method].kind == "notification":
                return None  # session/cancel: seen by the tap as it arrives
            raise RequestError.method_not_found(method)

        return handle

    async def ext_method(self, method: str, params: Any) -> Any:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: Any) -> None:
        return None


class Served(_Handler):
    """The probe's agent methods as a transport's connection calls them (`client_remote`):
    connected, it gives the session that connection (`on_connect`, as an `Agent` gets it)."""

    def __init__(self, session: ProbeSession) -> None:
        super().__init__(session)
        self.session = session

    def on_connect(self, peer: Any) -> None:
        self.session.attach(peer.connection)


class ProbeSession:
    """One connection to the client under test: the probe agent's side of it."""

    def __init__(
        self,
        reader: Reader | None,
        writer: Writer | None,
        findings: Findings,
        options: ClientOptions,
        number: int,
        turn: Turn,
    ) -> None:
        """Over `reader`/`writer` the session makes its own connection and records it with a
        tap; without them (a remote one, `client_remote`), `attach` gives it the transport's
        connection and the transport records the wire (`record`)."""
        self.findings = findings
        self.turn = turn
        """What a prompt turn does (`probe_scenario.run_turn`)."""
        self.options = options
        self.number = number
        self.lines: list[Line] = []
        self.received: list[Line] = []
        self.sent: list[Line] = []
        self.sent_methods: dict[tuple[bool, Any], str] = {}
        self.responses: dict[tuple[bool, Any], Line] = {}
        self.asked: list[Asked] = []
        self.init: dict[str, Any] | None = None
        """The client's initialize params (JSON), once it sent them."""
        self.sessions: dict[str, str] = {}
        """Session id -> the cwd the client gave."""
        self.prompts = 0
        self.pending_steps = list(STEPS)
        self.unknown_update: Line | None = None
        self.cancels: dict[str, asyncio.Event] = {}  # session id -> the running turn's cancel
        self.cancel_lines: dict[str, Line] = {}
        self.waiting = 0  # requests of ours awaiting the client's answer
        self.last_activity = asyncio.get_running_loop().time()
        self.requests = 0  # sent on an attached connection: its ids count from 0
        self.recorded = asyncio.Event()  # set on every line recorded (an attached connection)
        self.external = reader is None or writer is None
        if not self.external:
            assert reader is not None and writer is not None
            self.connection = Connection(
                Dispatcher(_Handler(self), AGENT_HANDLES, types.DecodeContext()),
                reader,
                writer,
                shutdown_grace=0.5,
                tap=self._record,
            )

    def handler(self) -> Served:
        """What a transport's dispatcher calls for the agent methods (`attach`ed on connect)."""
        return Served(self)

    def attach(self, connection: Connection) -> None:
        self.connection = connection

    def record(self, direction: Direction, raw: bytes) -> None:
        """One message as the transport carried it (an attached connection)."""
        self._record(direction, raw)
        self.recorded.set()

    async def _sent(self, mark: int, method: str) -> Line | None:
        """Over an attached connection the transport records a message after it is sent:
        the first `method` line sent from `mark` on, once recorded (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.timeout
        while loop.time() < deadline:
            for line in self.sent:
                if line.index >= mark and line.method == method:
                    return line
            self.recorded.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.recorded.wait(), deadline - loop.time())
        return None

    # -- recording -------------------------------------------------------------------
    def _record(self, direction: Direction, raw: bytes) -> None:
        line = parse(raw, len(self.lines))
        self.lines.append(line)
        self.last_activity = asyncio.get_running_loop().time()
        message = line.object
        if direction == "out":
            self.sent.append(line)
            if message is not None and "id" in message and line.method is not None:
                self.sent_methods[_key(message["id"])] = line.method
                ids = _sending.get()
                if ids is not None:
                    ids.append(message["id"])
            return
        self.received.append(line)
        if line.is_response:
            self.responses.setdefault(_key(line.get("id")), line)
        elif line.method == "session/cancel":
            event = self.cancels.get(line.session_id())
            if event is not None and not event.is_set():
                self.cancel_lines[line.session_id()] = line
                event.set()

    def transcript(self) -> list[str]:
        """The connection's lines, `-> ` sent by the probe, `<- ` sent by the client."""
        mine = {line.index for line in self.sent}
        return [("-> " if line.index in mine else "<- ") + line.text(300) for line in self.lines]

    def sent_method(self, msg_id: Any) -> str | None:
        return self.sent_methods.get(_key(msg_id))

    def capability(self, *path: str) -> bool:
        value: Any = (self.init or {}).get("clientCapabilities")
        for key in path:
            value = (as_object(value) or {}).get(key)
        return value is True

    def silent_since(self, asked: Asked) -> Asked | None:
        """The first earlier request that went unanswered, if the client has sent nothing
        since it was sent."""
        for earlier in self.asked:
            if earlier is asked:
                return None
            if earlier.timed_out and not any(
                line.index >= earlier.sent_at for line in self.received
            ):
                return earlier.silenced_by or earlier
        return None

    # -- talking ---------------------------------------------------------------------
    async def ask(self, method: str, params: Any, cancel: asyncio.Event | None = None) -> Asked:
        """Send the client a request and wait (bounded) for its answer. A session/cancel while
        it is pending is noted, and the client gets `timeout` seconds more from then."""
        asked = Asked(method, params, sent_at=len(self.lines))
        self.asked.append(asked)
        ids: list[Any] = []
        context = contextvars.copy_context()
        context.run(_sending.set, ids)
        if self.external:  # the attached connection numbers its requests from 0
            ids.append(self.requests)
            self.requests += 1
        task: asyncio.Future[Any] = context.run(
            asyncio.ensure_future, self.connection.request(method, params)
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.timeout
        self.waiting += 1
        try:
            while not task.done():
                waits: set[asyncio.Future[Any]] = {task}
                watch = None
                if cancel is not None and asked.cancel is None:
                    watch = asyncio.ensure_future(cancel.wait())
                    waits.add(watch)
                await asyncio.wait(
                    waits,
                    timeout=max(0.0, deadline - loop.time()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if watch is not None:
                    watch.cancel()
                if task.done():
                    break
                if cancel is not None and cancel.is_set() and asked.cancel is None:
                    asked.cancel = self.cancel_lines.get(params.get("sessionId"))
                    deadline = loop.time() + self.options.timeout
                    continue
                if loop.time() >= deadline:
                    asked.timed_out = True
                    asked.silenced_by = self.silent_since(asked)
                    task.cancel()  # the connection sends $/cancel_request for it
                    break
        finally:
            self.waiting -= 1
        await asyncio.gather(task, return_exceptions=True)
        if ids:
            asked.id = ids[0]
            asked.response = self.responses.get(_key(ids[0]))
        cancelled = None if cancel is None else self.cancel_lines.get(params.get("sessionId"))
        if (
            asked.cancel is None
            and cancelled is not None
            and cancel is not None
            and cancel.is_set()
        ):
            answer = asked.response
            if answer is None or cancelled.index < answer.index:  # the cancel came first
                asked.cancel = cancelled
        if asked.response is None and not asked.timed_out:
            asked.closed = True
        return asked

    async def update(self, session_id: str, update: dict[str, Any]) -> Line | None:
        """Send one session/update; the line it went out as."""
        mark = len(self.lines)
        try:
            await self.connection.notify(
                "session/update", {"sessionId": session_id, "update": update}
            )
        except ConnectionClosed:
            return None
        if self.external:
            return await self._sent(mark, "session/update")
        return self.lines[-1] if self.lines else None

    # -- the agent methods -----------------------------------------------------------
    async def initialize(self, params: Any) -> Any:
        self.init = params.to_dict()
        return typed(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "agentCapabilities": {
                    "loadSession": False,
                    "promptCapabilities": {
                        "image": False,
                        "audio": False,
                        "embeddedContext": False,
                    },
                    "mcpCapabilities": {"http": False, "sse": False},
                    "sessionCapabilities": {},
                },
                "authMethods": [],
                "agentInfo": dict(AGENT_INFO),
            },
        )

    async def session_new(self, params: Any) -> Any:
        session_id = f"probe-session-{self.number}-{len(self.sessions) + 1}"
        self.sessions[session_id] = params.cwd
        modes = [{"id": mode, "name": mode.capitalize()} for mode in MODES]
        return typed(
            "session/new",
            {
                "sessionId": session_id,
                "modes": {"currentModeId": MODES[0], "availableModes": modes},
            },
        )

    async def session_set_mode(self, params: Any) -> Any:
        if params.session_id not in self.sessions:
            raise RequestError.invalid_params("unknown session", "params.sessionId")
        return typed("session/set_mode", {})

    async def session_prompt(self, params: Any) -> Any:
        session_id = params.session_id
        if session_id not in self.sessions:
            raise RequestError.invalid_params("unknown session", "params.sessionId")
        self.prompts += 1
        cancel = self.cancels[session_id] = asyncio.Event()
        try:
            await self.turn(self, session_id, self.sessions[session_id], cancel)
        finally:
            del self.cancels[session_id]
        return typed(
            "session/prompt", {"stopReason": "cancelled" if cancel.is_set() else "end_turn"}
        )
