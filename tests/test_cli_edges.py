"""The CLI's edges a newcomer meets first (issue 22): where a diff goes, an --out folder of other
files, the target checked before the schema is read, pyproject errors that say what and how to
fix, a readable `diff --help`, one spelling of `error:`, and the echo client's error lines.

The CLI runs as a user runs it (the `cli_command` fixture: `python -m codegen`), on a tiny schema.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from codegen.config import load_targets
from codegen.errors import CodegenError

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {"$defs": {"Hello": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
META = {"version": 1, "agentMethods": {}, "clientMethods": {}}
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(cli_command: Callable[..., list[str]], tmp_path: Path) -> Run:
    """`cli(*args)`: `acp-codegen ARGS` as a new process, in `tmp_path`."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [*cli_command("acp_codegen.py"), *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120)

    return run


@pytest.fixture
def schema(tmp_path: Path) -> Path:
    folder = tmp_path / "schema"
    folder.mkdir()
    (folder / "schema.json").write_text(json.dumps(SCHEMA))
    (folder / "meta.json").write_text(json.dumps(META))
    return folder


def test_check_writes_its_diff_to_stdout(cli: Run, schema: Path, tmp_path: Path) -> None:
    """`acp-codegen agent --out X --check > stale.diff` keeps the report."""
    result = cli("agent", "--schema", str(schema), "--out", str(tmp_path / "pkg"), "--check")
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    assert "out of date; regenerate with: acp-codegen agent" in result.stdout
    assert f"missing: {(tmp_path / 'pkg' / 'types.py').as_posix()}" in result.stdout.splitlines()


def test_an_out_folder_of_other_files_is_refused_unless_forced(cli: Run, schema: Path, tmp_path: Path) -> None:
    out = tmp_path / "app"
    out.mkdir()
    (out / "app.py").write_text("print('mine')\n")
    (out / "notes.txt").write_text("mine too\n")
    refused = cli("agent", "--schema", str(schema), "--out", str(out), "--package", "app")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stdout == ""
    [line] = refused.stderr.splitlines()
    assert line.startswith(f"error: {out}: --out holds files acp-codegen did not generate (app.py, notes.txt)")
    assert "--force" in line
    assert sorted(p.name for p in out.iterdir()) == ["app.py", "notes.txt"]  # nothing written
    forced = cli("agent", "--schema", str(schema), "--out", str(out), "--package", "app", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (out / "types.py").is_file() and (out / "app.py").read_text() == "print('mine')\n"


@pytest.mark.parametrize(
    ("setup", "out", "message"),
    [
        (None, "my-agent", "the --out folder name 'my-agent' is not a valid Python package name"),
        ("file", "out", "--out exists and is not a directory"),
        ("symlink", "out", "--out is a symbolic link"),
    ],
    ids=["not-a-package-name", "a-file", "a-symlink"],
)
def test_the_target_is_refused_before_the_schema_is_read(
    cli: Run, tmp_path: Path, setup: str | None, out: str, message: str
) -> None:
    """The schema here is broken too: only the target's problem is reported, so the schema was
    never read (no second or more of generation before a bad --out is reported)."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "schema.json").write_text("{ not json")
    (broken / "meta.json").write_text(json.dumps(META))
    if setup == "file":
        (tmp_path / out).write_text("")
    elif setup == "symlink":
        (tmp_path / "real").mkdir()
        (tmp_path / out).symlink_to(tmp_path / "real")
    result = cli("agent", "--schema", str(broken), "--out", str(tmp_path / out))
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {tmp_path / out}: {message}"), line


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (
            'role = "agnet"\nout = "a"',
            'targets/0/role: role = "agnet" is neither "agent" nor "client" (fix: role = "agent"',
        ),
        ('role = "agent"', 'targets/0/out: out is missing (fix: out = "src/myagent/acp"'),
        ('role = "agent"\nout = "a"\nunstable = "yes"', 'targets/0/unstable: unstable = "yes" is not a boolean (fix:'),
        ('role = "agent"\nout = "a"\npackage = 3', "targets/0/package: package = 3 is not a string (fix:"),
        ('role = "agent"\nout = "my-agent"', "targets/0/out: out = \"my-agent\": its folder name 'my-agent' is not"),
    ],
    ids=["role", "missing-out", "unstable", "package-type", "out-folder-name"],
)
def test_pyproject_errors_name_the_key_the_value_and_a_fix(tmp_path: Path, target: str, expected: str) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text(f"[[tool.acp-codegen.targets]]\n{target}\n")
    with pytest.raises(CodegenError) as caught:
        load_targets(config)
    [problem] = caught.value.problems
    assert problem.line().startswith(f"{config}#/tool/acp-codegen/{expected}"), problem.line()


def test_a_usage_error_says_error_as_ours_do(cli: Run) -> None:
    result = cli("agent", "--bogus")
    assert result.returncode == 2
    assert "Error" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: No such option: --bogus"), result.stderr


def test_diff_help_names_its_arguments_plainly(cli: Run) -> None:
    result = cli("diff", "--help")
    assert result.returncode == 0
    assert "Usage: acp-codegen diff [OPTIONS] OLD NEW" in result.stdout, result.stdout
    arguments = result.stdout.split("Arguments:")[1].split("Options:")[0]
    assert "{" not in result.stdout and "default" not in arguments, arguments


def _echo_client() -> ModuleType:
    spec = importlib.util.spec_from_file_location("echo_client_example", ROOT / "examples" / "echo_client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_echo_client_prints_no_none_for_an_error_without_data(capsys: pytest.CaptureFixture[str]) -> None:
    echo_client = _echo_client()
    script = echo_client.Script(None, None, ROOT)

    async def fails(data: object) -> str:
        raise echo_client.RequestError(-32601, "Method not found", data)

    assert not asyncio.run(script.step("session/set_mode", lambda: fails(None)))
    assert not asyncio.run(script.step("session/load", lambda: fails({"method": "session/load"})))
    assert capsys.readouterr().out.splitlines() == [
        "FAIL session/set_mode: error -32601 Method not found",
        "FAIL session/load: error -32601 Method not found {'method': 'session/load'}",
    ]
