"""Bad inputs: each folder of tests/bad_inputs/ is one case with its exact expected stderr.

The CLI runs on a copy of the case through the console script's entry point (`codegen.cli:entry`,
what `acp-codegen` runs), in this process; tests/test_cli_edges.py and the tests at the end of this
file run it as a new process. Every case must
exit 2, print only `error: ...` lines (no traceback) matching `expected_stderr.txt`, print
nothing on stdout and leave the case folder (and --out) exactly as it was.
UPDATE_GOLDEN=1 rewrites the expected_stderr.txt files; see tests/bad_inputs/README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from budget import examples

from codegen.cli import entry
from codegen.errors import CodegenError
from codegen.generate import Target, generate_files
from codegen.validate import MAX_TYPES

CASES_DIR = Path(__file__).resolve().parent / "bad_inputs"
CASES = sorted(p.name for p in CASES_DIR.iterdir() if p.is_dir())
CONTROL = {"expected_stderr.txt", "args.txt", "setup.txt"}
PLACEHOLDER = "<CASE>"
DEFAULT_ARGS = ["agent", "--schema", PLACEHOLDER, "--out", f"{PLACEHOLDER}/out"]
UPDATE = bool(os.environ.get("UPDATE_GOLDEN"))
META = {"version": 1, "agentMethods": {}, "clientMethods": {}}
ENV = {**{k: v for k, v in os.environ.items() if k != "ACP_CODEGEN_DEBUG"}, "COLUMNS": "200"}


Command = Callable[[str], list[str]]  # the `cli_command` fixture (conftest.py)


def huge_schema(count: int) -> dict[str, Any]:
    """`count` object types, each referring to the next."""
    defs = {
        f"Type{i}": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "next": {"$ref": f"#/$defs/Type{(i + 1) % count}"}},
            "required": ["name"],
        }
        for i in range(count)
    }
    return {"$defs": defs}


def deep_schema(levels: int) -> dict[str, Any]:
    """An array of arrays of ... `levels` deep."""
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "array", "items": node}
    return {"$defs": {"Deep": {"type": "object", "properties": {"value": node}}}}


def apply_setup(case: Path, setup: str) -> None:
    """The steps of setup.txt: what a fixture folder in git cannot hold."""
    for line in setup.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        verb, name, *rest = line.split(maxsplit=2)
        if verb == "mkdir":
            (case / name).mkdir()
        elif verb == "symlink":
            (case / name).symlink_to(rest[0])
        elif verb == "write":
            (case / name).write_text(rest[0] if rest else "", encoding="utf-8")
        elif verb in ("huge-schema", "deep-schema"):
            doc = huge_schema(int(name)) if verb == "huge-schema" else deep_schema(int(name))
            (case / "schema.json").write_text(json.dumps(doc), encoding="utf-8")
            (case / "meta.json").write_text(json.dumps(META), encoding="utf-8")
        else:
            raise ValueError(f"unknown setup step {line!r}")


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under `root`: kind and content (links by their target, never followed)."""
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


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


def run_case(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[Run, Path]:
    """The case's command through the console script's entry point (`codegen.cli:entry`, what
    `acp-codegen` runs), in this process: its exit status and output as a user's shell sees them."""
    source = CASES_DIR / name
    case = tmp_path / "case"
    case.mkdir()
    for path in source.iterdir():
        if path.name not in CONTROL:
            shutil.copy2(path, case / path.name)
    setup = source / "setup.txt"
    if setup.exists():
        apply_setup(case, setup.read_text(encoding="utf-8"))
    args_file = source / "args.txt"
    args = args_file.read_text(encoding="utf-8").splitlines() if args_file.exists() else DEFAULT_ARGS
    args = [a.replace(PLACEHOLDER, str(case)) for a in args if a and not a.startswith("#")]
    before = snapshot(tmp_path)
    capsys.readouterr()
    with monkeypatch.context() as patch:
        patch.delenv("ACP_CODEGEN_DEBUG", raising=False)
        patch.setenv("COLUMNS", "200")
        patch.chdir(tmp_path)
        patch.setattr(sys, "argv", ["acp-codegen", *args])
        with pytest.raises(SystemExit) as exit_:
            entry()
    out = capsys.readouterr()
    assert isinstance(exit_.value.code, int), exit_.value.code
    assert snapshot(tmp_path) == before, "a failing run must write nothing"
    return Run(exit_.value.code, out.out, out.err), case


def normalise(stderr: str, case: Path) -> str:
    for spelling in {str(case.resolve()), str(case)}:
        stderr = stderr.replace(spelling, PLACEHOLDER)
    return stderr


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 20
    for name in CASES:
        assert (CASES_DIR / name / "expected_stderr.txt").exists() or UPDATE, f"{name}: no expected_stderr.txt"


@pytest.mark.parametrize("name", CASES)
def test_bad_input(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    proc, case = run_case(name, tmp_path, monkeypatch, capsys)
    stderr = normalise(proc.stderr, case)
    golden = CASES_DIR / name / "expected_stderr.txt"
    if UPDATE:
        golden.write_text(stderr, encoding="utf-8")
    assert "Traceback" not in stderr
    assert proc.returncode == 2, stderr
    assert proc.stdout == ""
    lines = stderr.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), stderr
    assert all("(fix: " in line for line in lines), "every problem says how to fix it"
    assert stderr == golden.read_text(encoding="utf-8")


def test_huge_schema_fails_fast(tmp_path: Path) -> None:
    """Past the limit the schema is refused before any expensive stage runs."""
    schema_dir = tmp_path / "schema"
    schema_dir.mkdir()
    (schema_dir / "schema.json").write_text(json.dumps(huge_schema(MAX_TYPES + 1)))
    (schema_dir / "meta.json").write_text(json.dumps(META))
    import time

    start = time.perf_counter()
    with pytest.raises(CodegenError) as info:
        generate_files(Target("agent", tmp_path / "out", str(schema_dir)))
    assert time.perf_counter() - start < 2.0
    assert f"at most {MAX_TYPES}" in str(info.value)


def test_unreadable_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """chmod 000 cannot be tested as root (root reads anything), so the read itself fails here."""
    schema_dir = tmp_path / "schema"
    schema_dir.mkdir()
    (schema_dir / "schema.json").write_text(json.dumps(huge_schema(2)))
    (schema_dir / "meta.json").write_text(json.dumps(META))

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(CodegenError) as info:
        generate_files(Target("agent", tmp_path / "out", str(schema_dir)))
    lines = [p.line() for p in info.value.problems]
    assert lines == [
        f"{schema_dir / 'schema.json'}: schema cannot be read: Permission denied "
        "(fix: check the file's permissions (it must be readable))",
        f"{schema_dir / 'meta.json'}: meta.json cannot be read: Permission denied "
        "(fix: check the file's permissions (it must be readable))",
    ]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can read a chmod 000 file")
def test_chmod_000_is_reported(tmp_path: Path) -> None:
    schema_dir = tmp_path / "schema"
    schema_dir.mkdir()
    (schema_dir / "schema.json").write_text(json.dumps(huge_schema(2)))
    (schema_dir / "meta.json").write_text(json.dumps(META))
    (schema_dir / "schema.json").chmod(0)
    try:
        with pytest.raises(CodegenError) as info:
            generate_files(Target("agent", tmp_path / "out", str(schema_dir)))
    finally:
        (schema_dir / "schema.json").chmod(0o644)
    assert "schema cannot be read: Permission denied" in str(info.value)


@pytest.mark.slow
def test_keyword_property_names_become_trailing_underscore(tmp_path: Path, cli_command: Command) -> None:
    """A property named like a Python keyword is not an error: `from` is the attribute `from_`."""
    schema_dir = tmp_path / "schema"
    schema_dir.mkdir()
    props = {"from": {"type": "string"}, "class": {"type": "integer"}, "import": {"type": "boolean"}}
    defs = {"Range": {"type": "object", "properties": props, "required": ["from", "class"]}}
    (schema_dir / "schema.json").write_text(json.dumps({"$defs": defs}))
    (schema_dir / "meta.json").write_text(json.dumps(META))
    out = tmp_path / "kwpkg"
    proc = subprocess.run(
        [*cli_command("acp_codegen.py"), "agent", "--schema", str(schema_dir), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    code = (
        "import dataclasses, kwpkg.types as t\n"
        "names = sorted(f.name for f in dataclasses.fields(t.Range))\n"
        "assert {'from_', 'class_', 'import_'} <= set(names), names\n"
        "r = t.Range.from_dict({'from': 'a', 'class': 1, 'import': True})\n"
        "assert (r.from_, r.class_, r.import_) == ('a', 1, True)\n"
        "assert r.to_dict() == {'from': 'a', 'class': 1, 'import': True}\n"
    )
    check = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# -- the pre-IR checks agree with the IR and keep it from crashing ---------------------------------
def test_validate_names_types_like_the_ir(tmp_path: Path) -> None:
    """validate.py restates the IR's type naming to check it early: the two must agree."""
    from codegen.build import build_package
    from codegen.load import load, locate
    from codegen.validate import ptr_escape, python_type_name

    tricky = ["Foo-Bar", "123abc", "class", "Unset", "Any", "_private", "Déjà", "a.b", "x/y"]
    defs = {name: {"type": "object", "properties": {"v": {"type": "string"}}} for name in tricky}
    (tmp_path / "schema.json").write_text(json.dumps({"$defs": defs}))
    (tmp_path / "meta.json").write_text(json.dumps(META))
    for where in ("v1", "v2", str(tmp_path)):
        schema = load(locate(where, where != str(tmp_path)))
        package = build_package(schema, "agent", "pkg", "cmd")
        by_pointer = {d.pointer: d.name for d in package.definitions}
        for name in schema.defs:
            assert by_pointer[f"/$defs/{ptr_escape(name)}"] == python_type_name(name), name


JUNK: list[Any] = [
    None,
    True,
    0,
    -1,
    2.5,
    "",
    "string",
    "#/$defs/Nope",
    [],
    ["string"],
    {},
    {"type": "strng"},
    {"$ref": "#/$defs/PromptRequest"},
    {"properties": []},
    {"oneOf": []},
    {"oneOf": [{"const": "a"}, {"const": 1}]},
    {"anyOf": [{"type": "null"}]},
    {"enum": [1, "a", None]},
    {"default": {"a": 1}},
    {"type": ["string", "integer"]},
    {"allOf": [{"$ref": "#/$defs/ContentBlock"}]},
]
KEYS = ["type", "$ref", "properties", "required", "oneOf", "anyOf", "allOf", "items", "enum", "const", "default"]


def _subschema(roots: list[str]) -> dict[str, Any]:
    """The bundled v1 types reachable from `roots`."""
    defs = json.loads((CASES_DIR.parent.parent / "schema" / "v1" / "schema.json").read_text())["$defs"]
    keep: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        text = json.dumps(defs[name])
        todo += [n for n in defs if f'"#/$defs/{n}"' in text]
    return {"$defs": {n: defs[n] for n in defs if n in keep}}


def _mutate(doc: dict[str, Any], rng: Any) -> None:
    """Replace, delete or add a keyword at 1-3 random places of `doc`."""
    for _ in range(rng.randint(1, 3)):
        paths: list[tuple[Any, Any]] = []
        stack: list[Any] = [doc["$defs"]]
        while stack:
            node = stack.pop()
            items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
            for key, value in items:
                paths.append((node, key))
                if isinstance(value, (dict, list)):
                    stack.append(value)
        parent, key = rng.choice(paths)
        roll = rng.random()
        if roll < 0.45:
            parent[key] = json.loads(json.dumps(rng.choice(JUNK)))
        elif roll < 0.65 and isinstance(parent, dict):
            del parent[key]
        elif isinstance(parent[key], dict):
            parent[key][rng.choice(KEYS)] = json.loads(json.dumps(rng.choice(JUNK)))


@pytest.mark.slow
def test_corrupted_schemas_fail_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random corruptions of a real schema: the pipeline up to render either works or raises CodegenError."""
    import random

    from codegen import classmodel
    from codegen.build import build_package

    # Each corrupted schema is built once: past the class-model cache, which would otherwise
    # hold these instead of the real schemas other tests in this process build again (~0.5 s each).
    monkeypatch.setattr(classmodel, "_class_model", classmodel._class_model.__wrapped__)
    from codegen.load import load, locate
    from codegen.render import render
    from codegen.validate import validate

    base = _subschema(["PromptRequest", "PromptResponse", "SessionNotification"])
    meta = {"version": 1, "agentMethods": {"session_prompt": "session/prompt"}, "clientMethods": {}}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    rng = random.Random(20240601)
    outcomes = {"ok": 0, "error": 0}
    runs = examples(80)  # 10 under the default hypothesis profile, 80 under `slow` (tests/budget.py)
    for _ in range(runs):
        doc = json.loads(json.dumps(base))
        _mutate(doc, rng)
        (tmp_path / "schema.json").write_text(json.dumps(doc))
        try:
            schema = load(locate(str(tmp_path), False))
            validate(schema)
            render(build_package(schema, "agent", "pkg", "cmd"))
            outcomes["ok"] += 1
        except CodegenError:
            outcomes["error"] += 1
        except Exception as exc:  # pragma: no cover - the failure report
            (tmp_path / "crash.json").write_text(json.dumps(doc))
            raise AssertionError(f"{type(exc).__name__}: {exc}; schema kept in {tmp_path / 'crash.json'}") from exc
    assert outcomes["ok"] > runs // 8 and outcomes["error"] > runs // 8, outcomes


@pytest.mark.slow
def test_an_internal_error_is_one_line_and_exit_3(tmp_path: Path, cli_command: Command) -> None:
    """A bug (not bad input) still prints no traceback, unless ACP_CODEGEN_DEBUG is set
    (tests/fixtures/cli/simulated_bug.py: the pipeline raises where it assembles the package).
    The schema is a small valid one: the stages before the bug run as for any schema, and
    cheaply (the bundled one costs ~2.5 s of CPU per run for nothing this test looks at)."""
    schema_dir = tmp_path / "schema"
    schema_dir.mkdir()
    (schema_dir / "schema.json").write_text(json.dumps(huge_schema(2)))
    (schema_dir / "meta.json").write_text(json.dumps(META))
    out = tmp_path / "pkg"
    command = [*cli_command("simulated_bug.py"), str(out), str(schema_dir)]
    env = {k: v for k, v in os.environ.items() if k != "ACP_CODEGEN_DEBUG"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    assert proc.returncode == 3
    assert (
        proc.stderr.startswith("error: internal error in acp-codegen ") and "RuntimeError: simulated bug" in proc.stderr
    )
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not out.exists()
    debug = subprocess.run(command, capture_output=True, text=True, env={**env, "ACP_CODEGEN_DEBUG": "1"})
    assert "Traceback" in debug.stderr and debug.returncode == 1
