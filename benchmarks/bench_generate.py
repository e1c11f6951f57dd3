"""Wall and CPU time of generation vs datamodel-codegen alone on the same schema, in one run.

    .venv/bin/python benchmarks/bench_generate.py [--schema v1] [--runs 5] [--before DIR]

Every command runs as a fresh process (there is no cache: every run is "cold"), writing into a
fresh output folder; the runs are interleaved, and each ratio is the median of the per-round
ratios to datamodel-codegen, in wall time and in CPU time (user + system of the process and
its children, ruff included: the figure the load of a shared machine disturbs least):

- `acp-codegen agent --out X` vs `datamodel-codegen` on the same schema (target <= 1.0x);
- `acp-codegen generate` of the six golden targets (v1, v1 --unstable, v2; agent and client)
  vs `datamodel-codegen` on one schema (target <= 2.0x);
- `acp-codegen generate --check` of the same six targets, on the tree `generate` wrote
  (target <= 1.8x, issue 31 §5);
- for reference: `acp-codegen agent --formatter black` (`--skip-black` leaves it out: 5x the
  others), and `acp-codegen --version` (start-up).

`--before DIR`: also run `agent --out` and `generate --check` from another checkout's `codegen/`
(for instance `git worktree add DIR COMMIT`), interleaved with the rest: before and after, side
by side in one run. Its output must equal this checkout's (`--check` runs on the tree this one
wrote): for a speed change, the same tree with only the changed codegen/ files put back.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

GOLDEN_CONFIG = """\
[[tool.acp-codegen.targets]]
role = "agent"
out = "generated/agent"

[[tool.acp-codegen.targets]]
role = "client"
out = "generated/client"

[[tool.acp-codegen.targets]]
role = "agent"
out = "generated/unstable/agent"
unstable = true

[[tool.acp-codegen.targets]]
role = "client"
out = "generated/unstable/client"
unstable = true

[[tool.acp-codegen.targets]]
role = "agent"
out = "generated/v2/agent"
schema = "v2"

[[tool.acp-codegen.targets]]
role = "client"
out = "generated/v2/client"
schema = "v2"
"""


# `acp-codegen` as its console script runs it, but importing codegen/ from the checkout in argv[1].
RUN_FROM = "import sys; sys.path.insert(0, sys.argv.pop(1)); from codegen.cli import entry; entry()"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], cwd: Path, fresh: Path) -> tuple[float, float]:
    """Run `cmd` in `cwd` after removing `fresh` (its output): (wall, CPU) seconds, the CPU of
    the process and of every child it waited for."""
    shutil.rmtree(fresh, ignore_errors=True)
    cpu = children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:  # e.g. a --before checkout whose output differs: --check fails
        tail = (proc.stdout + proc.stderr).strip().splitlines()[:3]
        sys.exit(f"error: {' '.join(cmd[-3:])} exited {proc.returncode}: {' / '.join(tail)}")
    return time.perf_counter() - start, children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schema", default="v1")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-black", action="store_true", help="leave out the black row")
    parser.add_argument("--before", type=Path, help="a checkout whose codegen/ to run beside this one")
    args = parser.parse_args()
    schema = ROOT / "schema" / args.schema / "schema.json"
    ours = str(BIN / "acp-codegen")
    with tempfile.TemporaryDirectory(prefix="bench-generate-") as tmp:
        work = Path(tmp)
        (work / "project").mkdir()
        (work / "project" / "pyproject.toml").write_text(GOLDEN_CONFIG)
        dcg_out = work / "dcg.py"
        rows: dict[str, tuple[list[str], Path, Path]] = {
            "datamodel-codegen alone": (
                [str(BIN / "datamodel-codegen"), "--input", str(schema), "--input-file-type", "jsonschema",
                 "--output-model-type", "dataclasses.dataclass", "--output", str(dcg_out)],
                work, dcg_out,
            ),
            "acp-codegen agent --out": (
                [ours, "agent", "--schema", args.schema, "--out", str(work / "out")], work, work / "out"
            ),
            "acp-codegen generate (6 targets)": (
                [ours, "generate"], work / "project", work / "project" / "generated"
            ),
            "acp-codegen generate --check (6)": (
                [ours, "generate", "--check"], work / "project", work / "project" / "nothing"
            ),
            "acp-codegen agent --formatter black": (
                [ours, "agent", "--schema", args.schema, "--out", str(work / "out_black"), "--formatter", "black"],
                work, work / "out_black",
            ),
            "acp-codegen --version": ([ours, "--version"], work, work / "nothing"),
        }
        if args.skip_black:
            del rows["acp-codegen agent --formatter black"]
        if args.before is not None:
            before = [sys.executable, "-c", RUN_FROM, str(args.before.resolve())]
            out_before = work / "out_before"
            rows["before: agent --out"] = (
                [*before, "agent", "--schema", args.schema, "--out", str(out_before)], work, out_before
            )
            rows["before: generate --check (6)"] = (
                [*before, "generate", "--check"], work / "project", work / "nothing"
            )
        for cmd, cwd, fresh in rows.values():  # warm the OS file cache; not counted
            timed(cmd, cwd, fresh)
        times: dict[str, list[float]] = {name: [] for name in rows}
        cpus: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, (cmd, cwd, fresh) in rows.items():
                wall, cpu = timed(cmd, cwd, fresh)
                times[name].append(wall)
                cpus[name].append(cpu)
    median = {name: statistics.median(t) for name, t in times.items()}
    cpu_median = {name: statistics.median(t) for name, t in cpus.items()}
    # The ratios: the median of each round's ratio to that round's datamodel-codegen run (the
    # load of a shared machine changes from round to round, alike within one).
    base_runs, cpu_base_runs = times["datamodel-codegen alone"], cpus["datamodel-codegen alone"]
    ratio_of = {
        name: statistics.median(t / b for t, b in zip(ts, base_runs, strict=True)) for name, ts in times.items()
    }
    cpu_ratio_of = {
        name: statistics.median(t / b for t, b in zip(ts, cpu_base_runs, strict=True)) for name, ts in cpus.items()
    }
    targets = {
        "acp-codegen agent --out": 0.9,
        "acp-codegen generate (6 targets)": 2.0,
        "acp-codegen generate --check (6)": 1.8,
        "before: agent --out": 0.9,
        "before: generate --check (6)": 1.8,
    }
    print(
        f"schema {args.schema}; median of {args.runs} interleaved runs, fresh processes, fresh output"
        f" folders; ratios: median of the per-round ratios; load {os.getloadavg()[0]:.1f}"
    )
    print(f"  {'':38} {'wall':>8} {'[range]':>13}  {'ratio':6}  {'CPU':>7}  {'ratio':6}")
    for name, value in median.items():
        ratio = f"{ratio_of[name]:5.2f}x" if name != "datamodel-codegen alone" else "   1x "
        cpu = cpu_median[name]
        cpu_ratio = f"{cpu_ratio_of[name]:5.2f}x" if name != "datamodel-codegen alone" else "   1x "
        target = f"  (target <= {targets[name]:.1f}x)" if name in targets else ""
        spread = f"[{min(times[name]):.2f}-{max(times[name]):.2f}]"
        print(f"  {name:38} {value:6.2f} s {spread:>13}  {ratio}  {cpu:5.2f} s  {cpu_ratio}{target}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
