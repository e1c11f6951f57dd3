"""Byte-identical output for the same input, whatever the hash seed.

Two fresh processes with different PYTHONHASHSEED values (so set and dict-of-set orders,
str hashes, ... differ) generate the same targets; the trees must be equal byte for byte.
The two runs go in parallel: with ruff formatting, each takes a few seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SEEDS = ("0", "4242")
CONFIG = """\
[[tool.acp-codegen.targets]]
role = "agent"
out = "agent_v1_unstable"
schema = "v1"
unstable = true

[[tool.acp-codegen.targets]]
role = "client"
out = "client_v2"
schema = "v2"
"""


def read_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def generate(work: Path, seed: str) -> subprocess.Popen[str]:
    work.mkdir()
    (work / "pyproject.toml").write_text(CONFIG)
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "codegen.cli", "generate"]
    return subprocess.Popen(command, cwd=work, env=env, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_output_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    runs = [(tmp_path / f"seed{seed}", generate(tmp_path / f"seed{seed}", seed)) for seed in SEEDS]
    trees: list[dict[str, bytes]] = []
    for work, proc in runs:
        _, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr
        (work / "pyproject.toml").unlink(missing_ok=True)
        trees.append(read_tree(work))
    assert len(trees[0]) >= 14
    for seed, other in zip(SEEDS[1:], trees[1:], strict=True):
        differing = sorted(k for k in trees[0].keys() | other.keys() if trees[0].get(k) != other.get(k))
        assert differing == [], f"PYTHONHASHSEED={seed} changed {differing}"
