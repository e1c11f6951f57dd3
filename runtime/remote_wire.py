"""The remote transport's small pieces (part of `remote`): the ASGI callables' types, the
limits, framing a received message as a line, JSON-RPC error answers, a body read's deadline,
and reading headers and messages without trusting them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from .dispatch import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, RequestError
from .jsonline import Skim, dumps
from .remote_auth import Refusal
from .remote_limits import Budget, limit_error
from .remote_limits import Limits as Caps
from .types import DecodeContext

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Scope = Mapping[str, Any]
# What the app's `__call__` accepts: every ASGI server types its scope, events and callables in
# its own way (hypercorn and uvicorn as unions of TypedDicts, which no dict type accepts), so the
# public signature takes any of them and the app reads the messages as plain dicts.
AnyReceive = Callable[[], Awaitable[Any]]
AnySend = Callable[[Any], Awaitable[None]]

JSON_CONTENT: Final = (b"content-type", b"application/json")
CLOSE: Final = ((b"connection", b"close"),)


@dataclass(frozen=True)
class Limits:
    """What `asgi_app` was given (its docstring says what each means)."""

    max_message_size: int
    max_connections: int | None
    idle_timeout: float | None
    send_buffer: int
    shutdown_grace: float
    keepalive: float
    ctx: DecodeContext | None
    caps: Caps


def client_address(scope: Scope) -> str:
    """The client's address as the ASGI server saw it ("" when it gives none)."""
    client: Any = scope.get("client")
    if not isinstance(client, (list, tuple)):
        return ""
    peer = cast("tuple[Any, ...]", client)
    return str(peer[0]) if peer else ""


async def send_error(
    send: Send,
    status: int,
    msg_id: Any,
    code: int,
    detail: str,
    *,
    headers: tuple[tuple[bytes, bytes], ...] = (),
    websocket: bool = False,
) -> None:
    """An HTTP error answer with a JSON-RPC error body (`websocket`: as the refusal of an
    upgrade, through the ASGI `websocket.http.response` extension)."""
    message = {PARSE_ERROR: "Parse error", INTERNAL_ERROR: "Internal error"}.get(
        code, "Invalid request"
    )
    body = dumps(error_body(msg_id, code, message, detail))
    await _send_body(send, status, body, headers, websocket)


async def send_refusal(
    send: Send, refusal: Refusal, msg_id: Any = None, *, websocket: bool = False
) -> None:
    """A refusal as an HTTP answer: a limit's own JSON-RPC error (`remote_limits.limit_error`)
    under `msg_id`, else -32603 for a server failure and -32600 for the rest."""
    status, error = refusal.status, refusal.error
    if error is None:
        code = INTERNAL_ERROR if status >= 500 and status != 503 else INVALID_REQUEST
        await send_error(
            send, status, msg_id, code, refusal.detail, headers=refusal.headers, websocket=websocket
        )
        return
    body = dumps(error_answer(msg_id, error))
    await _send_body(send, status, body, refusal.headers, websocket)


async def _send_body(
    send: Send,
    status: int,
    body: bytes,
    headers: tuple[tuple[bytes, bytes], ...],
    websocket: bool,
) -> None:
    prefix = "websocket.http.response" if websocket else "http.response"
    await send({"type": f"{prefix}.start", "status": status, "headers": [JSON_CONTENT, *headers]})
    await send({"type": f"{prefix}.body", "body": body})


def request_headers(scope: Scope) -> dict[bytes, bytes]:
    """Request headers by lower-case name; repeated ones joined with commas."""
    out: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        key = bytes(name).lower()
        out[key] = out[key] + b"," + bytes(value) if key in out else bytes(value)
    return out


def media_types(value: bytes) -> list[bytes]:
    """The media types a Content-Type or Accept value names, parameters dropped."""
    return [part.split(b";", 1)[0].strip().lower() for part in value.split(b",")]


def named_session(message: dict[str, Any]) -> str | None:
    """The `sessionId` a request's or notification's params name, if any."""
    params: Any = message.get("params")
    if params.__class__ is dict:
        session: Any = cast("dict[str, Any]", params).get("sessionId")
        if isinstance(session, str):
            return session
    return None


def id_key(value: Any) -> tuple[bool, Any] | None:
    """A JSON-RPC id as a table key (1 and "1" differ), or None if it is not a valid id."""
    if (
        value is None
        or isinstance(value, str)
        or (isinstance(value, int) and not isinstance(value, bool))
    ):
        return (isinstance(value, str), value)
    return None


def frame(data: bytes) -> bytes:
    """A received message as one line: a raw newline in JSON text can only be whitespace
    (inside strings it must be escaped), so replacing it keeps the message intact."""
    if b"\n" in data:
        data = data.replace(b"\n", b" ")
    return data + b"\n"


def error_body(msg_id: Any, code: int, message: str, detail: str) -> dict[str, Any]:
    """A JSON-RPC error response for a transport-level refusal."""
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "error": {"code": code, "message": message, "data": {"details": detail}},
    }


def error_answer(msg_id: Any, error: RequestError) -> dict[str, Any]:
    """The JSON-RPC error response carrying `error` (a limit's refusal, say)."""
    return {"jsonrpc": "2.0", "id": msg_id, "error": error.to_dict()}


class Deadline:
    """Cancels the running task `seconds` from now unless cancelled first (None: never). The
    task must only wait inside the guarded code: then the cancel lands there, and `expired`
    tells it from any other. One timer, no task per await: the body read stays as cheap."""

    __slots__ = ("_task", "_timer", "_expired")

    def __init__(self, seconds: float | None) -> None:
        self._expired = False
        self._task = asyncio.current_task()
        self._timer = (
            None
            if seconds is None or self._task is None
            else asyncio.get_running_loop().call_later(seconds, self._expire)
        )

    def _expire(self) -> None:
        self._expired = True
        if self._task is not None:
            self._task.cancel()

    def expired(self) -> bool:
        """Whether the deadline cancelled the task (then the cancel is consumed)."""
        if self._expired and self._task is not None:
            uncancel = getattr(self._task, "uncancel", None)  # Python >= 3.11
            if uncancel is not None:
                uncancel()
        return self._expired

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


BUDGET_RETRY: Final = 1.0  # seconds: messages in flight are read by their agents that soon


def over_budget(budget: Budget) -> RequestError:
    """The refusal of a message the app's byte budget cannot take, on both profiles."""
    limit = budget.limit
    details = (
        f"the server has its {limit} bytes of messages in flight (max_inflight_bytes): try again"
    )
    return limit_error("max_inflight_bytes", details, BUDGET_RETRY)


def over_budget_line(data: bytes, budget: Budget) -> bytes | None:
    """The -32000 answer to a message the app's budget cannot take (None for a notification,
    which has nothing to answer)."""
    skim = Skim()
    skim.feed(data, 0, len(data))
    head = skim.head()
    if head is not None and "id" not in head:
        return None
    msg_id = head.get("id") if head is not None and id_key(head.get("id")) is not None else None
    return dumps(error_answer(msg_id, over_budget(budget))) + b"\n"
