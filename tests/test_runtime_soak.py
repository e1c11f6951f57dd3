"""benchmarks/bench_soak.py at small scale: after a load with cancellations and timeouts mixed
in, no entry is left in any table of either connection (the benchmark measures memory)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_soak.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_soak", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_soak"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_plan_mixes_cancellations_and_timeouts(bench: ModuleType) -> None:
    work = bench.plan(1000, 200, 0.1, 0.05)
    kinds = [kind for _, kind in work]
    assert (kinds.count("cancel"), kinds.count("timeout"), kinds.count("normal")) == (20, 10, 170)
    assert sum(int(text) for text, kind in work if kind == "normal") == 1000
    assert kinds[:10].count("normal") < 10 and kinds[-50:].count("normal") < 50  # spread out


@pytest.mark.parametrize("concurrency", [1, 16])
def test_tables_are_empty_after_a_mixed_load(bench: ModuleType, concurrency: int) -> None:
    report = asyncio.run(
        asyncio.wait_for(bench.soak(3000, 300, cancel_share=0.1, timeout_share=0.1, concurrency=concurrency), 120)
    )
    # soak() asserts the tables are empty and every update arrived; check it really looked.
    assert set(report.client_stats) >= {"pending", "inflight", "background", "waiters", "queued_notifications"}
    assert not any(report.client_stats.values()) and not any(report.agent_stats.values())
    assert (report.answered, report.cancelled, report.timed_out) == (240, 30, 30)
