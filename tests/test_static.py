"""mypy --strict, pyright strict and ruff: clean on codegen/ and on the generated output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typecheck import pyright_strict

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


GOLDEN = sorted(p.parent for p in (ROOT / "generated").rglob("__init__.py"))


def test_mypy_strict_on_generator(mypy_cache: Path) -> None:
    result = run("mypy", "--strict", "--python-version", "3.10", "--cache-dir", str(mypy_cache), "codegen")
    assert result.returncode == 0, result.stdout + result.stderr


# mypy --strict checks every golden package in the single run of tests/test_releases.py (each is
# the release case of its schema), basedpyright here.
def test_pyright_strict_on_every_generated_package(tmp_path: Path) -> None:
    assert len(GOLDEN) >= 6
    result = pyright_strict(GOLDEN, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 errors" in result.stdout


def test_ruff_on_generator() -> None:
    result = run("ruff", "check", "codegen", "runtime", "tests", "tools")
    assert result.returncode == 0, result.stdout + result.stderr


def test_runtime_sources_are_formatted_as_the_output() -> None:
    """runtime/*.py is copied verbatim under a header, so it must already be in output format."""
    result = run("ruff", "format", "--check", "runtime")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_on_generated_output() -> None:
    # Docstrings copied from the schema may run past the line length; the formatter decides layout.
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
