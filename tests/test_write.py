"""The output directory: atomic, owns only its own files, never writes outside --out."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codegen import write as write_mod
from codegen.errors import CodegenError
from codegen.write import HEADER, MANIFEST, read_manifest, write_tree

H = HEADER + " 0.0 from ACP schema test\n"
OLD = {"__init__.py": H + "A = 1\n", "types.py": H + "T = 1\n", "extra.py": H + "E = 1\n", "py.typed": ""}
NEW = {"__init__.py": H + "A = 2\n", "types.py": H + "T = 1\n", "sub/deep.py": H + "D = 1\n", "py.typed": ""}
SCHEMA = {
    "$defs": {
        "Hello": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }
}
META = {"version": 1, "agentMethods": {}, "clientMethods": {}}


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under `root` (links recorded by target, never followed)."""
    found: dict[str, tuple[str, bytes | str]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            found[rel] = ("dir", b"")
        else:
            found[rel] = ("file", path.read_bytes())
    return found


def tree(out: Path) -> dict[str, str]:
    return {k: v[1].decode() for k, v in snapshot(out).items() if v[0] == "file" and isinstance(v[1], bytes)}


def failing_after(n: int, real: Callable[..., Any]) -> tuple[Callable[..., Any], list[int]]:
    """A stand-in for `real` whose n-th call (1-based) raises OSError; later calls work."""
    calls = [0]

    def fake(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == n:
            raise OSError(28, "No space left on device", str(args[0]))
        return real(*args, **kwargs)

    return fake, calls


def schema_dir(tmp_path: Path, schema: dict[str, Any] = SCHEMA) -> Path:
    d = tmp_path / "schema"
    d.mkdir(exist_ok=True)
    (d / "schema.json").write_text(json.dumps(schema))
    (d / "meta.json").write_text(json.dumps(META))
    return d


Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(cli_command: Callable[[str], list[str]]) -> Cli:
    """`cli(*args, cwd=None)`: `acp-codegen ARGS` as a new process (the `cli_command` fixture of conftest.py)."""

    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli_command("acp_codegen.py"), *args], capture_output=True, text=True, cwd=cwd)

    return run


# -- basics --------------------------------------------------------------------------------
def test_fresh_write_then_rewrite(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "pkg"
    result = write_tree(out, OLD)
    assert sorted(result.written) == sorted(OLD)
    assert {k: v for k, v in tree(out).items() if k != MANIFEST} == OLD
    assert sorted(read_manifest(out)) == sorted(OLD)
    again = write_tree(out, OLD)
    assert (again.written, again.removed, sorted(again.unchanged)) == ([], [], sorted(OLD))


def test_own_stale_files_are_removed_others_kept(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    write_tree(out, OLD)
    (out / "notes.txt").write_text("mine")
    result = write_tree(out, NEW)
    assert result.removed == ["extra.py"]
    assert not (out / "extra.py").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "sub" / "deep.py").read_text() == NEW["sub/deep.py"]
    assert sorted(read_manifest(out)) == sorted(NEW)


def test_stale_file_edited_by_the_user_is_kept_unless_force(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    write_tree(out, OLD)
    (out / "extra.py").write_text("# my own code now\n")
    result = write_tree(out, NEW)
    assert result.kept == ["extra.py"] and result.removed == []
    assert (out / "extra.py").read_text() == "# my own code now\n"
    # Left behind, it is the user's now: no longer in the manifest, so never overwritten either.
    assert "extra.py" not in read_manifest(out)
    with pytest.raises(CodegenError):
        write_tree(out, OLD)
    other = tmp_path / "other"
    write_tree(other, OLD)
    (other / "extra.py").write_text("# my own code now\n")
    assert write_tree(other, NEW, force=True).removed == ["extra.py"]


def test_header_owns_a_file_without_a_manifest(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    out.mkdir()
    (out / "types.py").write_text(H + "OLD = 1\n")
    write_tree(out, OLD)
    assert (out / "types.py").read_text() == OLD["types.py"]


# -- foreign files -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["types.py", "py.typed", MANIFEST])
def test_refuses_to_overwrite_a_file_it_did_not_generate(tmp_path: Path, name: str) -> None:
    out = tmp_path / "pkg"
    out.mkdir()
    (out / name).write_text("user content\n")
    before = snapshot(tmp_path)
    with pytest.raises(CodegenError) as info:
        write_tree(out, OLD)
    assert snapshot(tmp_path) == before, "refusing one file writes none"
    (problem,) = info.value.problems
    assert problem.file == str(out / name)
    assert "not generated by acp-codegen" in problem.what and "--force" in problem.fix
    write_tree(out, OLD, force=True)
    assert (out / name).read_text() != "user content\n"


def test_identical_foreign_file_is_not_a_conflict(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    out.mkdir()
    (out / "py.typed").write_text("")
    assert "py.typed" in write_tree(out, OLD).unchanged


def test_every_conflict_is_reported_at_once(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    out.mkdir()
    for name in ("types.py", "__init__.py"):
        (out / name).write_text("mine\n")
    with pytest.raises(CodegenError) as info:
        write_tree(out, OLD)
    assert sorted(p.file for p in info.value.problems) == [str(out / "__init__.py"), str(out / "types.py")]


def test_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    out.write_text("x")
    with pytest.raises(CodegenError) as info:
        write_tree(out, OLD)
    assert "not a directory" in str(info.value)
    assert out.read_text() == "x"


def test_out_inside_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CodegenError):
        write_tree(tmp_path / "file" / "pkg", OLD)


# -- never outside --out -------------------------------------------------------------------
def test_symlinked_file_inside_out_is_not_written_through(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    write_tree(out, OLD)
    victim = tmp_path / "victim.py"
    victim.write_text(H + "VICTIM = 1\n")
    (out / "types.py").unlink()
    (out / "types.py").symlink_to(victim)
    before = snapshot(tmp_path)
    for force in (False, True):
        with pytest.raises(CodegenError) as info:
            write_tree(out, NEW, force=force)
        assert "symbolic link" in str(info.value)
        assert snapshot(tmp_path) == before


def test_symlinked_directory_inside_out_is_not_written_through(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "sub").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(CodegenError):
        write_tree(out, NEW, force=True)
    assert list(elsewhere.iterdir()) == []


def test_out_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "pkg").symlink_to(real, target_is_directory=True)
    with pytest.raises(CodegenError):
        write_tree(tmp_path / "pkg", OLD)
    assert list(real.iterdir()) == []


@pytest.mark.parametrize("rel", ["../escape.py", "/tmp/abs.py", "a/../../escape.py", "a//b.py", "./x.py"])
def test_generated_paths_must_stay_inside_out(tmp_path: Path, rel: str) -> None:
    out = tmp_path / "pkg"
    with pytest.raises(CodegenError):
        write_tree(out, {"ok.py": H, rel: H})
    assert not out.exists() and not (tmp_path / "escape.py").exists()


def test_manifest_entries_outside_out_are_never_removed(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    write_tree(out, OLD)
    victim = tmp_path / "victim.py"
    victim.write_text(H + "VICTIM = 1\n")
    outside = tmp_path / "outside.py"
    outside.write_text(H + "OUTSIDE = 1\n")
    (out / "link.py").symlink_to(outside)
    hostile = [*OLD, "../victim.py", str(victim), "sub/../../victim.py", "link.py"]
    (out / MANIFEST).write_text(json.dumps({"generator": "acp-codegen", "files": hostile}))
    write_tree(out, NEW)
    assert victim.read_text() == H + "VICTIM = 1\n"
    assert outside.read_text() == H + "OUTSIDE = 1\n"
    assert (out / "link.py").is_symlink(), "a link is not ours: left alone"


# -- atomicity -----------------------------------------------------------------------------
def test_failure_at_any_rename_leaves_the_previous_output_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.replace fails at the 1st, 2nd, ... call of the commit: every time, all is rolled back."""
    out = tmp_path / "pkg"
    write_tree(out, OLD)
    (out / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    real_replace = os.replace
    counter, calls = failing_after(0, real_replace)
    monkeypatch.setattr(write_mod.os, "replace", counter)
    write_tree(out, NEW)  # a dry run, to count the renames of a successful commit
    renames = calls[0]
    assert renames >= 4
    monkeypatch.setattr(write_mod.os, "replace", real_replace)
    write_tree(out, OLD)
    (out / "sub").rmdir()  # NEW created it; the previous tree did not have it
    assert snapshot(tmp_path) == before
    for n in range(1, renames + 1):
        fake, _ = failing_after(n, real_replace)
        monkeypatch.setattr(write_mod.os, "replace", fake)
        with pytest.raises(CodegenError) as info:
            write_tree(out, NEW)
        assert "No space left on device" in str(info.value) and "previous output was restored" in str(info.value)
        monkeypatch.setattr(write_mod.os, "replace", real_replace)
        assert snapshot(tmp_path) == before, f"rename #{n} failed and the tree changed"


def test_failure_while_staging_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "pkg"
    write_tree(out, OLD)
    before = snapshot(tmp_path)
    fake, _ = failing_after(2, Path.write_bytes)
    monkeypatch.setattr(Path, "write_bytes", fake)
    with pytest.raises(CodegenError) as info:
        write_tree(out, NEW)
    assert "nothing was changed" in str(info.value)
    assert snapshot(tmp_path) == before


def test_failure_on_a_fresh_out_leaves_no_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake, _ = failing_after(3, os.replace)
    monkeypatch.setattr(write_mod.os, "replace", fake)
    with pytest.raises(CodegenError):
        write_tree(tmp_path / "new" / "pkg", NEW)
    assert list(tmp_path.iterdir()) == []


# -- end to end (the CLI) --------------------------------------------------------------------
def test_bad_schema_leaves_previous_output_intact(tmp_path: Path, cli: Cli) -> None:
    schema = schema_dir(tmp_path)
    out = tmp_path / "pkg"
    assert cli("agent", "--schema", str(schema), "--out", str(out)).returncode == 0
    (schema / "schema.json").write_text('{"$defs": {"Hello": {"$ref": "#/$defs/Nope"}}}')
    before = snapshot(tmp_path)
    proc = cli("agent", "--schema", str(schema), "--out", str(out))
    assert proc.returncode == 2 and "dangling $ref" in proc.stderr
    assert snapshot(tmp_path) == before


def test_check_writes_nothing(tmp_path: Path, cli: Cli) -> None:
    schema = schema_dir(tmp_path)
    out = tmp_path / "pkg"
    args = ("agent", "--schema", str(schema), "--out", str(out))
    missing = cli(*args, "--check")
    assert missing.returncode == 1 and "missing" in missing.stdout
    assert not out.exists()
    assert cli(*args).returncode == 0
    assert cli(*args, "--check").returncode == 0
    (out / "types.py").write_text((out / "types.py").read_text() + "# edited\n")
    (out / "mine.txt").write_text("mine")
    before = snapshot(tmp_path)
    stale = cli(*args, "--check")
    assert stale.returncode == 1 and "types.py" in stale.stdout
    assert snapshot(tmp_path) == before


def test_generate_command_writes_no_target_if_one_is_bad(tmp_path: Path, cli: Cli) -> None:
    good = schema_dir(tmp_path)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "schema.json").write_text("{")
    (bad / "meta.json").write_text(json.dumps(META))
    (tmp_path / "pyproject.toml").write_text(
        "[[tool.acp-codegen.targets]]\n"
        f'role = "agent"\nout = "first"\nschema = "{good.name}"\n'
        "[[tool.acp-codegen.targets]]\n"
        f'role = "client"\nout = "second"\nschema = "{bad.name}"\n'
    )
    before = snapshot(tmp_path)
    proc = cli("generate", cwd=tmp_path)
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(tmp_path) == before
