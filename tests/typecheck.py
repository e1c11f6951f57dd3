"""The type checkers the suite runs over generated code: mypy --strict and basedpyright strict.

Both pinned in the test extra (basedpyright bundles its own Node); always Python 3.10, the
oldest version the generated packages support.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path


def packages(names: Iterable[str]) -> list[str]:
    """mypy arguments checking each named package (`-p NAME`)."""
    return [arg for name in names for arg in ("-p", name)]


def mypy_strict(cwd: Path, *args: str, cache: Path, mypypath: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`mypy --strict` over `args` (paths, `-p` packages, extra flags), run in `cwd`.

    `cache` may be shared by the runs of one process (the `mypy_cache` fixture): the standard
    library and any module already checked clean with the same source are then not analysed
    again. mypy keeps no cache entry for a module with errors, so those are always re-reported.
    """
    env = None if mypypath is None else {**os.environ, "MYPYPATH": str(mypypath)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.10", "--cache-dir", str(cache), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
    )


def pyright_strict(paths: Iterable[Path], work: Path) -> subprocess.CompletedProcess[str]:
    """basedpyright in pyright's standard strict mode over `paths`, in one run (config in `work`)."""
    config = work / "pyrightconfig.json"
    config.write_text(
        json.dumps({"typeCheckingMode": "strict", "pythonVersion": "3.10", "include": [str(p) for p in paths]})
    )
    binary = Path(sys.executable).parent / "basedpyright"
    return subprocess.run([str(binary), "-p", str(config)], cwd=work, capture_output=True, text=True)
