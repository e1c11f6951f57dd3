"""The runtime modules copied into every package are clean under pyright strict, Microsoft's and basedpyright (mypy
--strict covers them with the whole package in tests/test_releases.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typecheck import PyrightRun

from codegen.render import runtime_files

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_pyright_strict_on_the_runtime(golden_pyright: PyrightRun, pyright_left_out: list[Path]) -> None:
    """The suite's pyright runs over generated/ cover the runtime copy of every package (but
    for the kits `pyright_left_out` names): no error and no warning in any."""
    packages = sorted(p.parent for p in (ROOT / "generated").rglob("py.typed"))
    copies = [
        package / name
        for package in packages
        for name in runtime_files("agent" if (package / "agent.py").is_file() else "client")
    ]
    assert len(packages) >= 6 and all(path.is_file() for path in copies)
    copies = [path for path in copies if not any(path.is_relative_to(f) for f in pyright_left_out)]
    problems = [line for path in copies for line in golden_pyright.problems(path, ("error", "warning"))]
    assert not problems, "\n".join(problems)
