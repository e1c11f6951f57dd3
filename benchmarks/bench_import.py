"""Import cost of the generated packages next to the official SDK's `import acp`.

    .venv/bin/python benchmarks/bench_import.py [--runs N]

For `agent`, `client` (the v1 goldens in generated/) and `acp` (agent-client-protocol): the
median wall time of the import in a fresh interpreter (bytecode cached, as installed), and the
RSS it adds (VmRSS after the import minus before, from /proc/self/status; Linux). The runs of
the three interleave, so load on the machine falls on all of them alike. Also lists what the
client package imports of the remote transport (nothing, until `connect_remote`; issue 31 §4).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = ("agent", "client", "acp")
REMOTE_ONLY = ("http.cookiejar", "urllib.request", "websockets", "httpx", "h2")

PROBE = """
import sys, time
def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
before_modules = set(sys.modules)
r = rss_kib(); t = time.perf_counter()
import {module}
t = time.perf_counter() - t; r = rss_kib() - r
new = sorted(set(sys.modules) - before_modules)
import json; print(json.dumps({{"seconds": t, "rss_kib": r, "modules": new}}))
"""


def once(module: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        cwd=ROOT / "generated", env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    result: dict[str, object] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    for module in MODULES:
        once(module)  # writes the .pyc files, as an install or a first run would
    samples: dict[str, list[dict[str, object]]] = {m: [] for m in MODULES}
    for _ in range(runs):
        for module in MODULES:
            samples[module].append(once(module))
    ms = {m: statistics.median(float(str(s["seconds"])) for s in samples[m]) * 1e3 for m in MODULES}
    rss = {m: statistics.median(int(str(s["rss_kib"])) for s in samples[m]) / 1024 for m in MODULES}
    print(f"python {sys.version.split()[0]}, {runs} interleaved runs, medians")
    print(f"{'import':<10} {'time':>9} {'÷ acp':>7} {'RSS added':>10} {'÷ acp':>7}")
    for m in MODULES:
        print(f"{m:<10} {ms[m]:7.1f} ms {ms[m] / ms['acp']:6.2f}x {rss[m]:7.1f} MiB {rss[m] / rss['acp']:6.2f}x")
    modules = samples["client"][0]["modules"]
    assert isinstance(modules, list)
    remote = [m for m in modules if str(m).split(".")[0] in ("websockets", "httpx", "h2") or m in REMOTE_ONLY]
    print(f"remote-transport modules imported by `import client`: {remote or 'none'}")


if __name__ == "__main__":
    main()
