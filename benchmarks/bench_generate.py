"""Wall time of `acp-codegen agent --out` vs datamodel-codegen alone on the same schema.

    .venv/bin/python benchmarks/bench_generate.py [--schema v1] [--runs 5]

Both run as fresh processes, side by side in one run; the median of the runs is compared.
"cold" bypasses acp-codegen's formatter cache (ACP_CODEGEN_NO_CACHE=1), as on a first run
or after a schema change; "warm" is a re-run with nothing changed (the --check / pre-commit
case). Target (issue 2): cold <= 2.0x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schema", default="v1")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    schema = ROOT / "schema" / args.schema / "schema.json"
    base = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        cache = str(Path(tmp) / "cache")
        dcg = [str(BIN / "datamodel-codegen"), "--input", str(schema), "--input-file-type", "jsonschema",
               "--output-model-type", "dataclasses.dataclass", "--output", str(Path(tmp) / "dcg.py")]
        ours = [str(BIN / "acp-codegen"), "agent", "--schema", args.schema, "--out", str(Path(tmp) / "out")]
        cold_env = {**base, "ACP_CODEGEN_NO_CACHE": "1"}
        warm_env = {**base, "ACP_CODEGEN_CACHE_DIR": cache}
        wall(ours, warm_env)  # fills the warm cache
        t_dcg, t_cold, t_warm = [], [], []
        for _ in range(args.runs):
            t_dcg.append(wall(dcg, base))
            t_cold.append(wall(ours, cold_env))
            t_warm.append(wall(ours, warm_env))
    d, c, w = (statistics.median(x) for x in (t_dcg, t_cold, t_warm))
    print(f"schema {args.schema}, median of {args.runs} runs")
    print(f"  datamodel-codegen alone      {d:6.2f} s")
    print(f"  acp-codegen agent (cold)     {c:6.2f} s   {c / d:5.2f}x")
    print(f"  acp-codegen agent (warm)     {w:6.2f} s   {w / d:5.2f}x")


if __name__ == "__main__":
    main()
