"""Formatting: ruff (default) and black give byte-identical output; broken output is an internal error;
the `formatter` setting; several targets share one schema load + IR build per (schema, unstable)."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from test_schema_shapes import IMAGE, META, TEXT, new_session, tag_variant, tagged

import codegen.format
import codegen.generate
from codegen import cli, diff_format
from codegen.config import load_targets
from codegen.errors import CodegenError
from codegen.format import GeneratedCodeError, format_files
from codegen.generate import ApiCache, Target, generate_files, render_files
from codegen.render import RUNTIME_FILES

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "schemas"


def assert_formatters_agree(rendered: dict[str, dict[str, str]]) -> None:
    """`rendered`: label -> files. Every distinct file text is formatted by both, and compared."""
    unique: dict[str, str] = {}  # text -> a name for it (agent and client share most files)
    for label, files in rendered.items():
        for rel, text in files.items():
            if rel.endswith(".py"):
                unique.setdefault(text, f"{label}/{rel}")
    named = {name: text for text, name in unique.items()}
    by_ruff = format_files(named, "ruff")
    by_black = format_files(named, "black")
    differing = sorted(name for name in named if by_ruff[name] != by_black[name])
    assert differing == [], f"ruff and black disagree on {differing}"
    # The formatters did work: at least one file changed (else the comparison proves nothing).
    assert any(by_ruff[name] != named[name] for name in named)


@pytest.mark.parametrize("unstable", [False, True], ids=["stable", "unstable"])
@pytest.mark.parametrize("schema", ["v1", "v2"])
def test_ruff_and_black_agree_on_every_bundled_schema(tmp_path: Path, schema: str, unstable: bool) -> None:
    apis = ApiCache()
    rendered = {
        # from_config: the same header command for both roles, so their common files are formatted once
        role: render_files(Target(role, tmp_path / role, schema, unstable, from_config=True), apis=apis).files  # type: ignore[arg-type]
        for role in ("agent", "client")
    }
    assert_formatters_agree(rendered)


def shape_schemas() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """The hand-made schemas of tests/test_schema_shapes.py: name -> ($defs, meta)."""
    shapes: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for keyword in ("oneOf", "anyOf"):
        for wrapped in (True, False):
            for discriminator in (True, False):
                union = tagged(
                    [tag_variant("text", "TextContent", wrapped), tag_variant("image", "ImageContent", wrapped)],
                    discriminator,
                    keyword,
                )
                name = f"tagged-{keyword}-{'wrapped' if wrapped else 'bare'}-{discriminator}"
                shapes[name] = (new_session(ContentBlock=union, TextContent=TEXT, ImageContent=IMAGE), META)
    refs = new_session(ContentBlock=TEXT, SessionId={"type": "string"})
    refs["NewSessionResponse"]["properties"] = {
        "wrapped": {"description": "x", "allOf": [{"$ref": "#/$defs/SessionId"}]},
        "bare": {"description": "y", "$ref": "#/$defs/SessionId", "default": "s"},
        "nullable": {"anyOf": [{"$ref": "#/$defs/SessionId"}, {"type": "null"}]},
        "typelist": {"type": ["string", "null"]},
    }
    shapes["ref-wrapping"] = (refs, META)
    inline = tagged(
        [
            {"type": "object", "properties": {"outcome": {"type": "string", "const": "cancelled"}}},
            {"type": "object", "properties": {"outcome": {"type": "string", "const": "selected"}}},
        ],
        discriminator=False,
    )
    shapes["inline-variants"] = (new_session(ContentBlock=TEXT, Outcome=inline), META)
    fallback = {"anyOf": [tag_variant("http", "Http"), {"title": "stdio", "allOf": [{"$ref": "#/$defs/Stdio"}]}]}
    http = {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
    stdio = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    shapes["untagged-fallback"] = (new_session(ContentBlock=TEXT, Server=fallback, Http=http, Stdio=stdio), META)
    enums = new_session(
        ContentBlock=TEXT,
        Closed={"oneOf": [{"type": "string", "const": "a"}, {"type": "string", "const": "b"}]},
        Open={"anyOf": [{"type": "string", "const": "a"}, {"title": "other", "type": "string"}]},
        Listed={"type": "string", "enum": ["x", "y"]},
    )
    enums["NewSessionResponse"]["properties"].update(
        closed={"$ref": "#/$defs/Closed"}, open={"$ref": "#/$defs/Open"}, listed={"$ref": "#/$defs/Listed"}
    )
    shapes["enums"] = (enums, META)
    bare = new_session(ContentBlock=TEXT)
    for node in bare.values():
        node.pop("x-side", None)
        node.pop("x-method", None)
    shapes["no-x-extensions"] = (bare, META)
    return shapes


def schema_dependent(files: dict[str, str]) -> dict[str, str]:
    """Leave out runtime/ files: the same source under a header for every schema (the bundled
    schemas' test covers them), so the shape schemas spend black's time on what they change."""
    return {rel: text for rel, text in files.items() if rel not in RUNTIME_FILES}


def test_ruff_and_black_agree_on_the_schema_shape_schemas(tmp_path: Path) -> None:
    rendered: dict[str, dict[str, str]] = {}
    apis = ApiCache()
    for name, (defs, meta) in shape_schemas().items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "schema.json").write_text(json.dumps({"$defs": defs}))
        (folder / "meta.json").write_text(json.dumps(meta))
        for role in ("agent", "client"):
            target = Target(role, tmp_path / "out", str(folder), from_config=True)  # type: ignore[arg-type]
            rendered[f"{name}/{role}"] = schema_dependent(render_files(target, apis=apis).files)
    fixture = FIXTURES / "v1.20.0"
    rendered["v1.20.0"] = schema_dependent(render_files(Target("agent", tmp_path / "out", str(fixture))).files)
    assert len(rendered) >= 2 * 13 + 1
    assert_formatters_agree(rendered)


# --- a generated file that is not Python ------------------------------------------------------
BROKEN = "\ndef broken(:\n    pass\n"


def test_invalid_python_is_an_internal_error_naming_the_file() -> None:
    files = {"__init__.py": "x = 1\n", "methods.py": "y = 2\n" + BROKEN, "py.typed": ""}
    for formatter in ("ruff", "black"):
        with pytest.raises(GeneratedCodeError) as info:
            format_files(files, formatter)  # type: ignore[arg-type]
        assert "generated methods.py is not valid Python" in str(info.value)
        assert "at line 3" in str(info.value) and "def broken(:" in str(info.value)


def test_invalid_python_via_the_cli_is_one_line_exit_3_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_render = codegen.generate.render_package

    def broken_render(*args: Any, **kwargs: Any) -> Any:
        rendered = real_render(*args, **kwargs)
        rendered.files["dispatch.py"] += BROKEN  # as if a bundled template had a bug
        return rendered

    monkeypatch.setattr(codegen.generate, "render_package", broken_render)
    monkeypatch.delenv("ACP_CODEGEN_DEBUG", raising=False)
    out = tmp_path / "pkg"
    monkeypatch.setattr(sys, "argv", ["acp-codegen", "agent", "--out", str(out)])
    with pytest.raises(SystemExit) as info:
        cli.entry()
    assert info.value.code == 3
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: internal error in acp-codegen ")
    assert "generated dispatch.py is not valid Python" in err and "Traceback" not in err
    assert not out.exists()


# --- the ruff binary ---------------------------------------------------------------------------
def test_missing_ruff_binary_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ruff.__main__", None)  # `from ruff.__main__ import ...` fails
    monkeypatch.setattr(codegen.format.sysconfig, "get_path", lambda name: str(tmp_path))
    monkeypatch.setattr(codegen.format.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(CodegenError) as info:
        format_files({"a.py": "x = 1\n"}, "ruff")
    assert "the ruff formatter is not installed" in str(info.value)
    assert "--formatter black" in str(info.value)
    # black does not need it
    assert format_files({"a.py": "x  =  1\n"}, "black") == {"a.py": "x = 1\n"}


def test_unrunnable_ruff_binary_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "ruff"
    fake.write_text("not a program")  # not executable
    monkeypatch.setattr(codegen.format, "find_ruff", lambda: str(fake))
    with pytest.raises(CodegenError) as info:
        format_files({"a.py": "x = 1\n"}, "ruff")
    assert "cannot run the ruff formatter" in str(info.value) and str(fake) in str(info.value)


def test_ruff_is_found_and_formats() -> None:
    assert Path(codegen.format.find_ruff()).is_file()
    files = {"a.py": "x  =  [1,2]\n", "b.txt": "x  =  1\n"}
    assert format_files(files) == {"a.py": "x = [1, 2]\n", "b.txt": "x  =  1\n"}


# --- the formatter setting ------------------------------------------------------------------
def write_config(tmp_path: Path, body: str) -> Path:
    config = tmp_path / "pyproject.toml"
    config.write_text(body)
    return config


TARGET = '[[tool.acp-codegen.targets]]\nrole = "agent"\nout = "a"\n'


@pytest.mark.parametrize(
    ("section", "per_target", "expected"),
    [
        ("", "", "ruff"),
        ('formatter = "black"\n', "", "black"),
        ('formatter = "ruff"\n', "", "ruff"),
        ("", 'formatter = "black"\n', "black"),
        ('formatter = "black"\n', 'formatter = "ruff"\n', "ruff"),
    ],
)
def test_config_formatter_key(tmp_path: Path, section: str, per_target: str, expected: str) -> None:
    config = write_config(tmp_path, "[tool.acp-codegen]\n" + section + "\n" + TARGET + per_target)
    assert [t.formatter for t in load_targets(config)] == [expected]


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ('[tool.acp-codegen]\nformatter = "yapf"\n\n' + TARGET, "#/tool/acp-codegen/formatter"),
        (TARGET + "formatter = 3\n", "#/tool/acp-codegen/targets/0/formatter"),
    ],
)
def test_bad_formatter_in_config_is_exit_2_with_a_pointer(
    tmp_path: Path, body: str, pointer: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, body)
    with pytest.raises(SystemExit) as info:
        cli.app(["generate", "--config", str(config)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"error: {config}{pointer}: unknown formatter {'yapf' if 'yapf' in body else 3!r} "
        "(fix: use one of ['ruff', 'black'])"
    ]
    assert not (tmp_path / "a").exists()


def test_formatter_flag_chooses_the_formatter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[str] = []
    for name in ("ruff", "black"):
        real = getattr(codegen.format, f"_{name}")

        def spy(files: dict[str, str], *args: Any, name: str = name, real: Any = real, **kwargs: Any) -> dict[str, str]:
            used.append(name)
            return real(files, *args, **kwargs)  # type: ignore[no-any-return]

        monkeypatch.setattr(codegen.format, f"_{name}", spy)
    schema = tiny_schema(tmp_path / "schema")
    for args, expected in [([], "ruff"), (["--formatter", "black"], "black"), (["--formatter", "ruff"], "ruff")]:
        with pytest.raises(SystemExit) as info:
            cli.app(["agent", "--schema", str(schema), "--out", str(tmp_path / "pkg"), *args])
        assert info.value.code == 0
        assert used.pop() == expected
    config = write_config(tmp_path, f'[tool.acp-codegen]\nformatter = "black"\n\n{TARGET}schema = "schema"\n')
    for args, expected in [([], "black"), (["--formatter", "ruff"], "ruff")]:
        with pytest.raises(SystemExit) as info:
            cli.app(["generate", "--config", str(config), *args])
        assert info.value.code == 0
        assert used.pop() == expected
    with pytest.raises(SystemExit) as info:
        cli.app(["agent", "--out", str(tmp_path / "pkg"), "--formatter", "yapf"])
    assert info.value.code == 2  # a usage error, before anything is generated
    assert used == []


def test_cli_diff_formats_are_the_diff_formats() -> None:
    """cli spells out the `--format` choices of `diff` so that start-up does not import the diff."""
    assert typing.get_args(cli.Format) == typing.get_args(diff_format.Format)


# --- shared work across targets ----------------------------------------------------------------
def tiny_schema(folder: Path) -> Path:
    """A small schema with an unstable variant (the same content)."""
    folder.mkdir(parents=True)
    for suffix in ("", ".unstable"):
        (folder / f"schema{suffix}.json").write_text(json.dumps({"$defs": new_session(ContentBlock=TEXT)}))
        (folder / f"meta{suffix}.json").write_text(json.dumps(META))
    return folder


def test_generate_builds_each_schema_once_for_all_its_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tiny_schema(tmp_path / "one")
    tiny_schema(tmp_path / "two")
    targets = [
        ("agent", "a1", "one", False),
        ("client", "c1", "one", False),
        ("agent", "a1u", "one", True),
        ("client", "c1u", "one", True),
        ("agent", "a2", "two", False),
        ("client", "c2", "two", False),
    ]
    config = write_config(
        tmp_path,
        "".join(
            f'[[tool.acp-codegen.targets]]\nrole = "{role}"\nout = "{out}"\nschema = "{schema}"\n'
            f"unstable = {str(unstable).lower()}\n\n"
            for role, out, schema, unstable in targets
        ),
    )
    calls: dict[str, list[Any]] = {"load": [], "build_api": []}
    real_load, real_build = codegen.generate.load, codegen.generate.build_api

    def counting_load(files: Any) -> Any:
        calls["load"].append(files.label)
        return real_load(files)

    def counting_build(schema: Any) -> Any:
        calls["build_api"].append(schema.unstable)
        return real_build(schema)

    ruff_runs: list[dict[str, str]] = []
    real_ruff = codegen.format._ruff

    def counting_ruff(files: dict[str, str], *args: Any, **kwargs: Any) -> dict[str, str]:
        ruff_runs.append(files)
        return real_ruff(files, *args, **kwargs)

    monkeypatch.setattr(codegen.generate, "load", counting_load)
    monkeypatch.setattr(codegen.generate, "build_api", counting_build)
    monkeypatch.setattr(codegen.format, "_ruff", counting_ruff)
    for mode in ([], ["--check"]):
        with pytest.raises(SystemExit) as info:
            cli.app(["generate", "--config", str(config), *mode])
        assert info.value.code == 0
        assert sorted(calls["load"]) == sorted(str(tmp_path / s) for s in ("one", "one", "two"))
        assert sorted(calls["build_api"]) == [False, False, True]
        # One ruff process for all six packages; a text common to several packages is sent once.
        assert len(ruff_runs) == 1
        sent = list(ruff_runs[0].values())
        assert len(sent) == len(set(sent)) and sum(t.startswith("# generated by acp-codegen") for t in sent) > 1
        # connection.py is the same for both roles of a (schema, unstable) pair: at most 3 of 6 are sent
        assert 1 <= len([name for name in ruff_runs[0] if name.endswith("/connection.py")]) <= 3
        calls["load"].clear()
        calls["build_api"].clear()
        ruff_runs.clear()
    for _, out, _, _ in targets:
        assert (tmp_path / out / "__init__.py").is_file()


def test_api_cache_is_per_schema_and_unstable_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    schema = str(tiny_schema(tmp_path / "s"))
    built: list[bool] = []
    real_build = codegen.generate.build_api
    monkeypatch.setattr(
        codegen.generate, "build_api", lambda loaded: built.append(loaded.unstable) or real_build(loaded)
    )
    apis = ApiCache()
    first = generate_files(Target("agent", tmp_path / "a", schema), apis=apis)
    generate_files(Target("client", tmp_path / "c", schema), apis=apis)
    assert built == [False]
    generate_files(Target("agent", tmp_path / "a", schema, unstable=True), apis=apis)
    assert built == [False, True]
    # A new cache builds again, with the same result.
    assert generate_files(Target("agent", tmp_path / "a", schema)) == first
    assert built == [False, True, False]


def test_class_model_is_computed_once_per_distinct_schema_document(monkeypatch: pytest.MonkeyPatch) -> None:
    from datamodel_code_generator.parser.jsonschema import JsonSchemaParser

    from codegen.classmodel import build_class_model

    parses: list[str] = []
    real_parse = JsonSchemaParser.parse_raw

    def counting_parse(self: JsonSchemaParser) -> None:
        parses.append("x")
        real_parse(self)

    monkeypatch.setattr(JsonSchemaParser, "parse_raw", counting_parse)
    # A document no other test builds (a distinct property name), so the first call must parse.
    doc = {"$defs": new_session(ContentBlock=TEXT, Unique={"type": "object", "properties": {"zQ9": {}}})}
    first = build_class_model(doc)
    assert parses == ["x"] and first.field_name("Unique", "zQ9") == "z_q9"
    assert build_class_model(json.loads(json.dumps(doc))) is first  # an equal document: not parsed again
    assert parses == ["x"]
    other = json.loads(json.dumps(doc))
    other["$defs"]["Unique"]["properties"]["yQ9"] = {}
    assert build_class_model(other).field_name("Unique", "yQ9") == "y_q9"
    assert parses == ["x", "x"]


# --- start-up --------------------------------------------------------------------------------
HEAVY = ("pydantic", "datamodel_code_generator", "jinja2", "black", "codegen.generate", "codegen.diff", "codegen.build")


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_do_not_import_the_pipeline(args: list[str]) -> None:
    code = (
        "import sys\n"
        "from codegen.cli import entry\n"
        f"sys.argv = ['acp-codegen', *{args!r}]\n"
        "try:\n"
        "    entry()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m in {HEAVY!r}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]"
