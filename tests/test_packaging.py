"""Installed from a wheel (not an editable checkout), the CLI still finds templates and schemas."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def build_command(dist: Path) -> list[str]:
    """The wheel of this checkout, built by the backend its pyproject.toml names (hatchling, in an
    isolated build environment): by uv when the venv has it, as .ci/run installs it (~0.5 s of
    CPU), else by pip (~2 s: pip starts twice, once more to install the build environment)."""
    uv = Path(sys.executable).parent / "uv"
    if uv.is_file():
        return [str(uv), "build", "-q", "--wheel", "--python", sys.executable, "--out-dir", str(dist), str(ROOT)]
    return [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(dist)]


@pytest.mark.slow
def test_wheel_ships_templates_and_schemas_and_generates(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build = subprocess.run(build_command(dist), capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    wheel = next(dist.glob("acp_codegen-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "codegen/templates/types.py.jinja",
        "codegen/schema/v1/schema.json",
        "codegen/schema/v2/meta.json",
        "codegen/schema/LICENSE",
        "codegen/schema/v1/VERSION",
    ):
        assert required in names
    # A venv that sees the already-installed dependencies, plus the wheel itself: no network.
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    site = next((env_dir / "lib").glob("python*/site-packages"))
    deps = Path(__import__("jinja2").__file__).resolve().parent.parent
    (site / "deps.pth").write_text(str(deps) + "\n")
    zipfile.ZipFile(wheel).extractall(site)
    python = env_dir / "bin" / "python"
    out = tmp_path / "work" / "editor_acp"
    run = subprocess.run(
        [str(python), "-c", "from codegen.cli import entry; entry()", "client", "--out", str(out), "--schema", "v2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    check = subprocess.run(
        [str(python), "-c", "import editor_acp, sys; sys.stdout.write(editor_acp.SCHEMA_RELEASE)"],
        cwd=out.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.stdout == "2.0.0-alpha.3", check.stderr
    # The wheel's copy of codegen is the one that ran (not the checkout).
    where = subprocess.run(
        [str(python), "-c", "import codegen; print(codegen.__file__)"], cwd=tmp_path, capture_output=True, text=True
    )
    assert str(site) in where.stdout
