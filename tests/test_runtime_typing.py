"""The runtime modules copied into every package are clean under basedpyright strict (mypy
--strict covers them with the whole package in tests/test_static.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ["connection.py", "process.py"]


def test_basedpyright_strict_on_the_runtime(tmp_path: Path) -> None:
    basedpyright = shutil.which("basedpyright", path=str(Path(sys.executable).parent))
    assert basedpyright is not None, "basedpyright is in the test extra"
    shutil.copytree(ROOT / "generated" / "client", tmp_path / "client", ignore=shutil.ignore_patterns("__pycache__"))
    config = {
        "typeCheckingMode": "strict",
        "pythonVersion": "3.10",
        "include": [f"client/{name}" for name in RUNTIME],
    }
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    result = subprocess.run([basedpyright], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 errors, 0 warnings" in result.stdout, result.stdout
