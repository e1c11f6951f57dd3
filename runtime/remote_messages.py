"""What the remote transports read of the JSON-RPC messages they carry: an id as a table key,
the session a message is about, and one message as one line for the connection."""

from __future__ import annotations

import json
from typing import Any, cast


def id_key(value: Any) -> tuple[bool, Any]:
    """A JSON-RPC id as a table key (`1` and `"1"` are different ids)."""
    return (isinstance(value, str), value)


def session_in(value: Any) -> str | None:
    """`value["sessionId"]` when `value` is an object holding a string one."""
    if isinstance(value, dict):
        session = cast(dict[str, Any], value).get("sessionId")
        if isinstance(session, str):
            return session
    return None


def parse(data: bytes) -> dict[str, Any] | None:
    """The JSON object `data` holds; None if it holds something else, or no JSON."""
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return cast(dict[str, Any], message) if isinstance(message, dict) else None


def as_line(data: bytes) -> bytes:
    """One JSON text as one line: a newline inside one can only be whitespace, so as a space
    it keeps the one-message-per-line framing the connection reads."""
    return data.replace(b"\r", b" ").replace(b"\n", b" ") + b"\n"
