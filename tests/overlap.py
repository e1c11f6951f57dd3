"""Runs that mostly wait (agents starting, settle windows, processes talking over pipes), started
together in threads so that their waits overlap, each awaited by the test that owns it.

Used by tests/test_conformance.py and tests/test_interop.py: one after another, their runs left a
core idle for seconds; started together, each test still asserts on exactly its own run's result.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

import pytest

T = TypeVar("T")


class Background(Generic[T]):
    """`start(key, run)` runs `run()` in a thread of its own; `result(key)` waits for it and
    returns its result, or raises its error there, in the test that owns it."""

    def __init__(self, name: str, workers: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self.futures: dict[str, Future[T]] = {}

    def start(self, key: str, run: Callable[[], T]) -> None:
        self.futures[key] = self.pool.submit(run)

    def result(self, key: str) -> T:
        return self.futures[key].result()

    def finish(self) -> None:
        """Wait until every run has ended."""
        wait(self.futures.values())

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def selected(request: pytest.FixtureRequest) -> list[pytest.Function]:
    """The tests of the requesting fixture's module that this session runs (`-k` may pick a few)."""
    return [
        item for item in request.session.items if isinstance(item, pytest.Function) and item.module is request.module
    ]
