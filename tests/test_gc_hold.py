"""The cyclic GC is held off while a long array is decoded (runtime/gchold.py), and restored
exactly as it was afterwards: on success, on a DecodeError, when the program had disabled it
itself, and with holds taken from several threads."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from agent import gchold
from agent import types as T

GOOD = {"type": "content", "content": {"type": "text", "text": "a"}}
BAD = {"type": "content", "content": 5}  # an invalid item: dropped (lenient) or an error (strict)


def update(items: list[Any]) -> dict[str, Any]:
    return {"sessionId": "s", "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": items}}


@pytest.fixture(autouse=True)
def gc_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    assert gchold.gc_holds() == 0
    if not was:  # pragma: no cover - the suite runs with the collector on
        gc.disable()


def seen_while_decoding(items: list[Any], strict: bool = False) -> list[tuple[bool, int]]:
    """(gc enabled?, holds) as seen when the invalid item is reported, mid-array."""
    seen: list[tuple[bool, int]] = []
    ctx = T.DecodeContext(strict=strict, on_warning=lambda w: seen.append((gc.isenabled(), gchold.gc_holds())))
    T.SessionNotification.from_dict(update(items), ctx)
    return seen


def test_a_long_array_is_decoded_with_the_collector_held_then_restored() -> None:
    half = gchold.HOLD_FROM // 2
    seen = seen_while_decoding([GOOD] * half + [BAD] + [GOOD] * half)
    assert seen == [(False, 1)]
    assert gc.isenabled()


def test_a_short_array_leaves_the_collector_alone() -> None:
    assert seen_while_decoding([GOOD, BAD, GOOD]) == [(True, 0)]


def test_the_hold_ends_when_decoding_fails() -> None:
    with pytest.raises(T.DecodeError, match="content"):
        T.SessionNotification.from_dict(update([GOOD] * gchold.HOLD_FROM + [BAD]), T.DecodeContext(strict=True))
    assert gc.isenabled()


def test_a_collector_the_program_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        decoded = T.SessionNotification.from_dict(update([GOOD] * gchold.HOLD_FROM))
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert isinstance(decoded.update, T.SessionUpdateToolCallUpdate)
    assert decoded.update.content is not T.UNSET and len(decoded.update.content) == gchold.HOLD_FROM


def test_holds_from_two_threads_release_the_collector_only_at_the_last() -> None:
    taken, release = threading.Event(), threading.Event()

    def other() -> None:
        gchold.gc_hold()
        taken.set()
        release.wait(10)
        gchold.gc_release()

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert taken.wait(10)
        gchold.gc_hold()
        assert not gc.isenabled()
        gchold.gc_release()
        assert not gc.isenabled() and gchold.gc_holds() == 1  # the other thread's hold remains
    finally:
        release.set()
        thread.join(10)
    assert gc.isenabled() and gchold.gc_holds() == 0


def test_a_long_line_is_parsed_under_a_hold_that_ends_with_it() -> None:
    from agent import jsonline

    line = json.dumps(update([GOOD] * (jsonline.HELD_FROM // 40))).encode()
    assert len(line) >= jsonline.HELD_FROM
    assert jsonline.loads_held(line) == jsonline.loads(line)
    with pytest.raises(ValueError):
        jsonline.loads_held(line[:-1])
    assert gc.isenabled()
