"""The spec-update workflow: --check, project config, the pre-commit hook definition."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from codegen.cli import entry

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Run:
    returncode: int
    stderr: str
    stdout: str = ""


Cli = Callable[..., Run]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """`acp-codegen ARGS` in `cwd` (default: the repository), run in this process through the console
    script's entry point, as a user's shell would run it but without a new interpreter each time."""
    monkeypatch.delenv("ACP_CODEGEN_DEBUG", raising=False)

    def run(*args: str, cwd: Path = ROOT) -> Run:
        capsys.readouterr()
        with monkeypatch.context() as patch:
            patch.chdir(cwd)
            patch.setattr(sys, "argv", ["acp-codegen", *args])
            with pytest.raises(SystemExit) as info:
                entry()
        assert isinstance(info.value.code, int | None), info.value.code
        captured = capsys.readouterr()
        return Run(info.value.code or 0, captured.err, captured.out)

    return run


def test_check_is_clean_right_after_generating_and_fails_after_an_edit(tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "acp"
    assert cli("agent", "--out", str(out)).returncode == 0
    first = cli("agent", "--out", str(out), "--check")
    assert first.returncode == 0, first.stderr
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    methods = out / "methods.py"
    methods.write_text(methods.read_text() + "\n# a local edit\n")
    stale = cli("agent", "--out", str(out), "--check")
    assert stale.returncode == 1
    assert "methods.py" in stale.stdout and "a local edit" in stale.stdout  # the diff: stdout
    assert methods.read_text().endswith("# a local edit\n")  # --check writes nothing
    assert {p for p in out.rglob("*") if p.is_file()} == set(before)


def test_check_reports_a_missing_file(tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "acp"
    assert cli("client", "--out", str(out)).returncode == 0
    (out / "dispatch.py").unlink()
    result = cli("client", "--out", str(out), "--check")
    assert result.returncode == 1 and "missing" in result.stdout


def test_project_config_targets_generate_and_check(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n'
        '[[tool.acp-codegen.targets]]\nrole = "agent"\nout = "src/pkg/acp"\npackage = "pkg.acp"\n\n'
        '[[tool.acp-codegen.targets]]\nrole = "client"\nout = "editor_acp"\nunstable = true\n'
    )
    assert cli("generate", cwd=tmp_path).returncode == 0
    assert (tmp_path / "src/pkg/acp/agent.py").is_file()
    # --package / `package` names the import path the package documents for itself.
    assert "from pkg.acp import Agent, run_agent, types" in (tmp_path / "src/pkg/acp/__init__.py").read_text()
    client_methods = (tmp_path / "editor_acp/methods.py").read_text()
    assert "unstable=True" in client_methods
    assert "regenerate with: acp-codegen generate" in client_methods
    assert cli("generate", "--check", cwd=tmp_path).returncode == 0
    # CLI flags override the config: --stable regenerates the client without unstable methods.
    assert cli("generate", "--check", "--stable", cwd=tmp_path).returncode == 1


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("[project]\nname = 'x'\n", "no [tool.acp-codegen] section"),
        ("[[tool.acp-codegen.targets]]\nrole = 'editor'\nout = 'x'\n", 'role = "editor" is neither "agent" nor'),
        ("[[tool.acp-codegen.targets]]\nrole = 'agent'\n", "targets/0/out: out is missing (fix: out = "),
        ("[tool.acp-codegen\n", "invalid TOML"),
    ],
)
def test_bad_project_config_is_one_clear_line(tmp_path: Path, config: str, message: str, cli: Cli) -> None:
    (tmp_path / "pyproject.toml").write_text(config)
    result = cli("generate", cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_pre_commit_hook_runs_the_check_mode() -> None:
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "id: acp-codegen-check" in text
    assert "entry: acp-codegen generate --check" in text
