"""mypy --strict and ruff: clean on codegen/ and on the generated output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_mypy_strict_on_generator_and_generated_output() -> None:
    # Each generated package is checked on its own: both are top-level packages of the same shape.
    for target in (["codegen"], ["generated/agent"], ["generated/client"]):
        result = run("mypy", "--strict", "--no-incremental", "--python-version", "3.10", *target)
        assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_on_generator() -> None:
    result = run("ruff", "check", "codegen", "tests", "tools")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_on_generated_output() -> None:
    # Docstrings copied from the schema may run past the line length; black decides layout.
    result = run(
        "ruff",
        "check",
        "--isolated",
        "--select",
        "E,F,W,B,UP,I",
        "--ignore",
        "E501",
        "--line-length",
        "100",
        "--target-version",
        "py310",
        "generated",
    )
    assert result.returncode == 0, result.stdout + result.stderr
