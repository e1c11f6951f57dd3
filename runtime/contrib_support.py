"""What `contrib` does the same for every schema: its errors, the subscriber list, grouping
message chunks into messages, and the "absent or null keeps the old value" merge rule.

`contrib` re-exports the errors; the rest is its machinery.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Generic, TypeVar

from .serde import UNSET, Unset

_T = TypeVar("_T")
_S = TypeVar("_S")
_N = TypeVar("_N")
_C = TypeVar("_C")


class SessionNotificationMismatchError(ValueError):
    """A `SessionAccumulator(auto_reset_on_session_change=False)` got another session's update."""

    def __init__(self, expected: str, actual: str) -> None:
        super().__init__(
            f"SessionAccumulator received notification for {actual}, expected {expected}"
        )
        self.expected = expected
        self.actual = actual


class SessionSnapshotUnavailableError(RuntimeError):
    """`SessionAccumulator.snapshot()` before any notification (there is no session yet)."""

    def __init__(self) -> None:
        super().__init__("SessionAccumulator has not processed any notifications yet")


class UnknownToolCallError(KeyError):
    """A `ToolCallTracker` call named an external id it does not track (or no longer)."""

    def __init__(self, external_id: str) -> None:
        super().__init__(external_id)
        self.external_id = external_id

    def __str__(self) -> str:
        return f"Unknown tool call id: {self.external_id}"


class PermissionBrokerError(ValueError):
    """A `PermissionBroker` request that cannot be built."""


class MissingToolCallError(PermissionBrokerError):
    """`request_for` without `tool_call=` on a broker that has no tracker."""

    def __init__(self) -> None:
        super().__init__("tool_call must be provided when no ToolCallTracker is configured")


class MissingPermissionOptionsError(PermissionBrokerError):
    """A permission request with no option at all."""

    def __init__(self) -> None:
        super().__init__("PermissionBroker requires at least one permission option")


def new_tool_call_id() -> str:
    """The tracker's default id factory: a random UUID in hex (as the SDK's)."""
    return uuid.uuid4().hex


class Subscribers(Generic[_S, _N]):
    """Callbacks `(snapshot, notification)`, called in the order they subscribed."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[_S, _N], None]] = []

    def add(self, callback: Callable[[_S, _N], None]) -> Callable[[], None]:
        """Subscribe `callback`; returns the function that unsubscribes it (idempotent)."""
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            with suppress(ValueError):
                self._callbacks.remove(callback)

        return unsubscribe

    def notify(self, snapshot: _S, notification: _N) -> None:
        # A copy: a callback may unsubscribe itself (or others) while being called.
        for callback in list(self._callbacks):
            callback(snapshot, notification)


def keep(old: _T | None, new: _T | None | Unset) -> _T | None:
    """A tool-call update's field: absent, or null (as the SDK and the Rust schema read it), keeps
    the old value."""
    return old if new is UNSET or new is None else new


def keep_items(
    old: tuple[_T, ...] | None, new: Sequence[_T] | None | Unset
) -> tuple[_T, ...] | None:
    """`keep` for a list field, held as a tuple; an empty list reads as None (as in the SDK)."""
    if new is UNSET or new is None:
        return old
    return tuple(new) or None


def present(value: _T | None | Unset) -> _T | None:
    """A field value with absent read as None."""
    return None if value is UNSET else value


def items(value: Sequence[_T] | None | Unset) -> tuple[_T, ...] | None:
    """A list field as a view's tuple: absent, null and empty are None."""
    return tuple(value) or None if value is not UNSET and value is not None else None


def wire(value: _T | None) -> _T | Unset:
    """A tracked value for an outgoing update: None is left out (the SDK sends without nulls)."""
    return UNSET if value is None else value


def wire_items(value: list[_T] | None) -> list[_T] | Unset:
    """A tracked list for an outgoing update, copied (so later changes to the call do not show)."""
    return UNSET if value is None else list(value)


class MessageLog(Generic[_C]):
    """Chunks grouped into messages, in order of each message's first chunk.

    A chunk with a `messageId` joins the message of that role and id (wherever it is); one
    without joins the last message if that has the same role and no id, else starts one.
    Kept as logs that only grow (`clear` starts new ones), so `groups(n)` can rebuild the
    messages as the first `n` chunks left them: a snapshot pins `len(log)` in O(1).
    """

    def __init__(self) -> None:
        self._heads: list[tuple[str, str | None]] = []  # (role, message id) per message
        self._chunks: list[tuple[int, _C]] = []  # (message index, chunk), in arrival order
        self._by_id: dict[tuple[str, str], int] = {}

    def __len__(self) -> int:
        return len(self._chunks)

    def add(self, role: str, message_id: str | None, chunk: _C) -> None:
        heads = self._heads
        if message_id is not None:
            at = self._by_id.get((role, message_id))
            if at is None:
                at = self._by_id[(role, message_id)] = len(heads)
                heads.append((role, message_id))
        elif heads and heads[-1] == (role, None):
            at = len(heads) - 1
        else:
            at = len(heads)
            heads.append((role, None))
        self._chunks.append((at, chunk))

    def groups(self, n: int | None = None) -> list[tuple[str, str | None, tuple[_C, ...]]]:
        """(role, message id, chunks) per message, as the first `n` chunks (default: all) left
        them."""
        heads = self._heads
        grouped: list[list[_C]] = []
        for at, chunk in self._chunks[:n]:
            if at == len(grouped):  # a message starts with its first chunk, in order
                grouped.append([])
            grouped[at].append(chunk)
        return [(*heads[i], tuple(chunks)) for i, chunks in enumerate(grouped)]

    def clear(self) -> None:
        # New lists, not cleared ones: a pinned snapshot still reads the old ones.
        self._heads = []
        self._chunks = []
        self._by_id = {}


class ToolCallLog(Generic[_T]):
    """Tool call views by id, plus every view in arrival order: `at(n)` rebuilds the dict as the
    first `n` views left it (a snapshot pins `len(log)` in O(1) instead of copying the dict)."""

    def __init__(self) -> None:
        self.current: dict[str, _T] = {}
        self._history: list[tuple[str, _T]] = []

    def __len__(self) -> int:
        return len(self._history)

    def set(self, key: str, view: _T) -> None:
        self.current[key] = view
        self._history.append((key, view))

    def at(self, n: int) -> dict[str, _T]:
        """A new dict, in first-seen order, of the views after the first `n`."""
        if n == len(self._history):
            return dict(self.current)
        # Replaying keeps each id at the place it was first seen (dict insertion order).
        return dict(self._history[:n])
