"""mypy --strict, pyright strict and ruff: clean on codegen/ and on the generated output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typecheck import PYRIGHTS, PyrightRun, distinct_sources

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


GOLDEN = sorted(p.parent for p in (ROOT / "generated").rglob("py.typed"))


@pytest.mark.slow
def test_mypy_strict_on_generator(mypy_cache: Path) -> None:
    result = run("mypy", "--strict", "--python-version", "3.10", "--cache-dir", str(mypy_cache), "codegen")
    assert result.returncode == 0, result.stdout + result.stderr


# mypy --strict checks every golden package in the single run of tests/test_releases.py (each is
# the release case of its schema), pyright here (tests/typecheck.py: PYRIGHTS).
@pytest.mark.slow
def test_pyright_strict_on_every_generated_package(golden_pyright: PyrightRun, pyright_left_out: list[Path]) -> None:
    assert len(GOLDEN) >= 6
    sources = [p.resolve() for package in GOLDEN for p in package.rglob("*.py") if "__pycache__" not in p.parts]
    sources = [p for p in sources if not any(p.is_relative_to(f) for f in pyright_left_out)]
    default_kits = [ROOT / "generated" / role / "testing" for role in ("agent", "client")]
    assert all(kit.is_dir() and kit not in pyright_left_out for kit in default_kits)  # always checked
    assert sorted(golden_pyright.stands_for) == sorted(sources)  # every file checked, or its twin
    assert all(summary["filesAnalyzed"] >= 6 for summary in golden_pyright.summary.values())
    assert sorted(golden_pyright.summary) == sorted(PYRIGHTS)
    assert not golden_pyright.all_problems(("error", "warning")), golden_pyright.output


def write_package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_distinct_sources_skips_only_files_whose_whole_import_closure_is_identical(tmp_path: Path) -> None:
    same = {
        "__init__.py": "import os\n",
        "leaf.py": "X = 1\n",
        "uses_leaf.py": "from .leaf import X\n",
        "uses_changed.py": "from .middle import Y\n",  # identical, but reaches a differing file
        "middle.py": "from . import changed\nY = changed.Z\n",
        "by_name.py": "from . import leaf\n",  # b's __init__ differs, but binds no `leaf`
        "binds.py": "from . import shadowed\n",  # __init__ of b binds `shadowed`: depends on it
        "shadowed.py": "V = 1\n",
        "up.py": "from .. import elsewhere\n",  # above the package: cannot tell
        "sibling.py": "import changed\n",  # an absolute import that may find a sibling
        "sub/__init__.py": "",
        "sub/deep.py": "from ..leaf import X\n",
    }
    a = write_package(tmp_path / "a", {**same, "changed.py": "Z = 1\n"})
    b = write_package(tmp_path / "b", {**same, "__init__.py": "shadowed = 2\n", "changed.py": "Z = 'one'\n"})
    c = write_package(tmp_path / "c", {**same, "changed.py": "Z = 1\n"})
    d = write_package(tmp_path / "d", {**same, "__init__.py": "from os import *\n", "changed.py": "Z = 1\n"})
    stands_for = distinct_sources([a, b, c, d])
    assert all(stands_for[a / rel] == a / rel for rel in same)
    shared = {rel for rel in same if stands_for[b / rel] == a / rel}
    assert shared == {"leaf.py", "uses_leaf.py", "by_name.py", "sub/__init__.py", "sub/deep.py", "shadowed.py"}
    # c equals a: every file stands for a's but the one whose imports cannot be told.
    assert {rel for rel in [*same, "changed.py"] if stands_for[c / rel] == c / rel} == {"up.py"}
    # A star import in __init__ may bind any name: `from . import x` then depends on it.
    kept = {rel for rel in [*same, "changed.py"] if stands_for[d / rel] == d / rel}
    assert kept == {"__init__.py", "by_name.py", "binds.py", "middle.py", "uses_changed.py", "up.py"}


def test_ruff_on_generator() -> None:
    result = run("ruff", "check", "benchmarks", "codegen", "runtime", "tests", "tools")
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
