"""Formatting: ruff (default) and black give byte-identical output; broken output is an internal error;
the `formatter` setting; several targets share one schema load + IR build per (schema, unstable)."""

from __future__ import annotations

import ast
import copy
import importlib.metadata
import itertools
import json
import subprocess
import sys
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from budget import FULL
from test_schema_shapes import IMAGE, META, SHAPES, TEXT, new_session, tag_variant, tagged

import codegen.format
import codegen.generate
from codegen import cli, diff_format
from codegen.config import load_targets
from codegen.errors import CodegenError
from codegen.format import GeneratedCodeError, format_files
from codegen.generate import ApiCache, Target, generate_files, render_files
from codegen.render import ROLE_RUNTIME_FILES, RUNTIME_FILES

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "schemas"


# --- ruff and black agree: black one top-level statement at a time -------------------------------
BLACK_READ = "26.10.1"  # the black whose source the argument of ByStatement was read from
FILLER = '"""A statement that is neither first nor last."""\n'  # (allowed before `from __future__`)
Key = tuple[str | None, bool, str, bool]  # a piece in its context: see ByStatement


def split(text: str) -> tuple[list[tuple[int, int]], list[str]]:
    """The top-level statements of `text`, as (first, last) indices into its `ast` body (several
    only when they share a line: `a = 1; b = 2`), and the text cut into one piece for each (see
    `cut`). A text with a `# fmt:` directive is one piece."""
    body = ast.parse(text).body
    groups: list[tuple[int, int]] = []
    for index, node in enumerate(body):
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if groups and first <= (body[groups[-1][1]].end_lineno or 0):
            groups[-1] = (groups[-1][0], index)
        else:
            groups.append((index, index))
    if any(directive in text for directive in ("fmt:", "yapf:")) or not body:
        groups = [(0, len(body) - 1)]
    return groups, cut(text, groups, body)


def cut(text: str, groups: Sequence[tuple[int, int]], body: list[ast.stmt] | None = None) -> list[str]:
    """`text` in pieces, one per group of statements: each ends with the group's last statement,
    the first starts at the top of the file, and the last runs to its end."""
    lines = text.splitlines(keepends=True)
    body = ast.parse(text).body if body is None else body
    assert len(body) == groups[-1][1] + 1, "a formatter changed the number of top-level statements"
    ends = [body[last].end_lineno or 0 for _, last in groups[:-1]] + [len(lines)]
    return ["".join(lines[start:end]) for start, end in zip([0, *ends[:-1]], ends, strict=True)]


class ByStatement:
    """black's output for many files, from black run once per top-level statement and context.

    Why: the formatters must agree on every file we generate (issue 10), black takes ~0.5 ms a
    line, and the files repeat themselves: a runtime file is the same for every schema but for
    its header; the types.py of one schema shares most of its top-level statements with the
    others'. The bundled packages hold 88k distinct lines; the chunks below, 61k.

    Why the result is black's output for each whole file (black 26.10.1 read, in the mode we use:
    not .pyi, no preview, one target version hence one grammar):
    - black parses the file, makes logical lines statement by statement (`LineGenerator`, whose
      only state is the line being built) and splits each line on its own (`transform_line`). A
      top-level statement's parse, lines and splits depend on its own text, and on its place
      only in that the first statement of a file may be the module docstring.
    - The blank lines before a line (`EmptyLineTracker`) depend on it, on the blank lines the
      source had before it, on the previous line, the stack of enclosing defs and the previous
      block's trailing blank lines. At a top-level statement all of that was set by the statement
      before it (a depth-0 line empties the def stack; the "semantic leading comment" is reset by
      that statement's last code line), and by whether that one is the first of the file (the
      module docstring). The tracker's look-ahead (`_def_is_followed_by...`) is for .pyi only.
    - Nothing else crosses statements but `# fmt: off/skip` regions (a text with a directive
      is one piece) and the ends of the file (lstrip; the last block, and what follows it).

    So a piece (a top-level statement with the blank lines and comments before it) is keyed by
    (the piece before it, or none; whether that one is the first; the piece; whether it is the
    last), and black formats it once, in a chunk where the same piece stands before it (after
    FILLER, so that piece is not the first, unless it is) and FILLER after it (unless it is the
    last). Outputs are cut after the same top-level statements, by index. Comments that black
    keeps in a class body after its last statement fall in the next piece, which always has that
    class before it. `formatted_both_ways` checks the cutting and pasting on ruff's output (the
    pieces of the chunks must give ruff's output for the whole files), and
    `test_black_by_statement_is_black_on_the_whole_file` on black's, for tricky neighbours.
    """

    def __init__(self, texts: Sequence[str]) -> None:
        self.chunks: dict[str, str] = {}  # chunk name -> text
        self.groups: dict[str, list[tuple[int, int]]] = {}  # chunk name -> its statements
        self.where: dict[Key, tuple[str, int]] = {}  # piece key -> (chunk, index)
        self.keys: dict[str, list[Key]] = {}  # text -> the keys of its pieces
        self.cuts: dict[tuple[str, str], list[str]] = {}  # (chunk, its output) -> the output's pieces
        for text in texts:
            text_groups, pieces = split(text)
            sizes = [1 + last - first for first, last in text_groups]  # statements per piece
            last = len(pieces) - 1
            keys = [(pieces[i - 1] if i else None, i == 1, piece, i == last) for i, piece in enumerate(pieces)]
            self.keys[text] = keys
            start = 0
            while start <= last:  # each run of pieces not seen yet becomes one chunk
                if keys[start] in self.where:
                    start += 1
                    continue
                end = start
                while end < last and keys[end + 1] not in self.where:
                    end += 1
                before = [] if start == 0 else [0] if start == 1 else [-1, start - 1]  # -1: FILLER
                after = [] if end == last else [-1]
                parts = before + list(range(start, end + 1)) + after
                name = f"chunk{len(self.chunks)}.py"
                self.chunks[name] = "".join(FILLER if i < 0 else pieces[i] for i in parts)
                # The chunk's statements are its parts' (cut() checks their number in each output).
                counts = [1 if i < 0 else sizes[i] for i in parts]
                stops = itertools.accumulate(counts)
                self.groups[name] = [(stop - n, stop - 1) for n, stop in zip(counts, stops, strict=True)]
                for i in range(start, end + 1):
                    self.where[keys[i]] = (name, len(before) + i - start)
                start = end + 1

    def reassemble(self, formatted: dict[str, str]) -> dict[str, str]:
        """Each text's output, from the chunks' `formatted` output."""
        for name in self.chunks:  # an output seen before (the other formatter's) is not parsed again
            if (name, formatted[name]) not in self.cuts:
                self.cuts[name, formatted[name]] = cut(formatted[name], self.groups[name])
        pieces = {name: self.cuts[name, formatted[name]] for name in self.chunks}
        return {
            text: "".join(pieces[name][index] for name, index in (self.where[key] for key in keys))
            for text, keys in self.keys.items()
        }


def formatted_both_ways(rendered: dict[str, dict[str, str]]) -> dict[str, tuple[str, str]]:
    """`rendered`: label -> files. Every distinct Python text -> (its ruff output, its black output),
    black's put together one top-level statement at a time (see ByStatement). The formatters run
    as `format_files` runs them, less its syntax check (the tests below cover that)."""
    texts = sorted(
        {text for files in rendered.values() for rel, text in files.items() if rel.endswith(".py")},
        key=lambda text: (-len(text), text),  # the longest first: its chunk holds most pieces whole
    )
    names = {text: f"f{i}.py" for i, text in enumerate(texts)}
    by_ruff = codegen.format._ruff({name: text for text, name in names.items()})
    plan = ByStatement(texts)  # (which parses every text and chunk)
    # The cutting and pasting, checked on ruff: the pieces formatted in their chunks give the whole files.
    pasted = plan.reassemble(codegen.format._ruff(plan.chunks))
    assert [names[text] for text in texts if pasted[text] != by_ruff[names[text]]] == []
    by_black = plan.reassemble(codegen.format._black(plan.chunks))
    return {text: (by_ruff[names[text]], by_black[text]) for text in texts}


# The bundled schemas compared: under the ci profile the default target's (v1 stable, what the
# golden generated/agent and generated/client are made from); under the slow profile every
# bundled schema x unstable (three times black's work: about 30 CPU-seconds more). The shape
# schemas, which hold each construct the generator emits, are compared under both.
BUNDLED = [(schema, unstable) for schema in ("v1", "v2") for unstable in (False, True)] if FULL else [("v1", False)]


@pytest.mark.slow
def test_ruff_and_black_agree_on_the_bundled_schemas_and_the_schema_shapes(tmp_path: Path) -> None:
    """The BUNDLED schemas x role, and every schema-shape schema x role: each distinct Python
    file the same under ruff and black. One test, so that black formats the pieces all of
    them share once."""
    assert importlib.metadata.version("black") == BLACK_READ, "re-read black for the argument of ByStatement"
    apis = ApiCache()
    rendered: dict[str, dict[str, str]] = {}
    for schema, unstable in BUNDLED:
        for role in ("agent", "client"):
            # from_config: the same header command for both roles, so their common files are formatted once
            target = Target(role, tmp_path / role, schema, unstable, from_config=True)
            rendered[f"{schema}-{'unstable' if unstable else 'stable'}/{role}"] = render_files(target, apis=apis).files
    shapes = shape_schemas()
    for name, (defs, meta) in shapes.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "schema.json").write_text(json.dumps({"$defs": defs}))
        (folder / "meta.json").write_text(json.dumps(meta))
        for role in ("agent", "client"):
            target = Target(role, tmp_path / "out", str(folder), from_config=True)  # type: ignore[arg-type]
            rendered[f"shape-{name}/{role}"] = schema_dependent(render_files(target, apis=apis).files)
    fixture = FIXTURES / "v1.20.0"
    rendered["shape-v1.20.0/agent"] = schema_dependent(
        render_files(Target("agent", tmp_path / "out", str(fixture))).files
    )
    assert len(rendered) == 2 * len(BUNDLED) + 2 * len(shapes) + 1 and len(shapes) >= 13 + len(SHAPES) >= 30
    outputs = formatted_both_ways(rendered)
    files = {
        f"{label}/{rel}": text for label, got in rendered.items() for rel, text in got.items() if rel.endswith(".py")
    }
    assert all(sum(name.startswith(f"{label}/") for name in files) >= 4 for label in rendered)
    differing = sorted(name for name, text in files.items() if outputs[text][0] != outputs[text][1])
    assert differing == [], f"ruff and black disagree on {differing}"
    # The formatters did work: files changed (else the comparison proves nothing).
    assert all(any(outputs[text][0] != text for text in got.values() if text in outputs) for got in rendered.values())


def schema_dependent(files: dict[str, str]) -> dict[str, str]:
    """Leave out runtime/ files: the same source under a header for every schema (the bundled
    schemas' test covers them), so the shape schemas spend black's time on what they change."""
    runtime = set(RUNTIME_FILES).union(*ROLE_RUNTIME_FILES.values())
    return {rel: text for rel, text in files.items() if rel not in runtime}


def shape_schemas() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """The hand-made schemas of tests/test_schema_shapes.py (its SHAPES, and variants of some of
    them made here): name -> ($defs, meta)."""
    shapes: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        f"shapes-{name}": copy.deepcopy(shape) for name, shape in SHAPES.items()
    }
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


# Statements a generated file may hold, with the blank lines and comments before them.
TRICKY = [
    '# a header\n"""The module docstring."""\n',
    "\nfrom __future__ import annotations\n",
    "import os\n",
    "x = 1; y = [\n    1,2]\n",
    '"""an attribute docstring"""\n',
    "@decorator\ndef f(a, b):  # trailing\n    return a\n",
    'class C:\n    """Doc."""\n    z: int = 0\n',
    "        # an indented comment after the body\n# a comment at column 0\ndef g(): ...\n",
    "def g2(): ...\n",
    'class D:\n    """Only a docstring."""\n',
    "D2 = D\n",
    "if os.name:\n    def h(): pass\nelse:\n    pass\n",
    "call = function_name(argument_number_one, argument_number_two, argument_number_three, argument_4)\n",
]


def test_black_by_statement_is_black_on_the_whole_file() -> None:
    """The cutting and pasting of `ByStatement`, with black: files that share statements in other
    places and neighbours give the same output as black on each whole file. Keying a piece without
    the piece before it, or without whether that one is the first, or a chunk without the FILLER
    before that piece, each fails here."""
    texts = [
        "".join(TRICKY[:5] + TRICKY[6:]),  # then the next one's decorated def after a string: a new pair
        "".join(TRICKY),
        "".join(TRICKY[2:]),
        "".join(TRICKY[:2] + TRICKY[7:] + TRICKY[2:7]),
        "".join(TRICKY[1:]),
        "".join(TRICKY[4:]),  # the attribute docstring first: the module docstring, one blank line after it
    ]
    plan = ByStatement(texts)
    assert sum(text.count("\n") for text in plan.chunks.values()) < sum(text.count("\n") for text in texts)
    by_statement = plan.reassemble(format_files(plan.chunks, "black"))
    whole = format_files({f"t{i}.py": text for i, text in enumerate(texts)}, "black")
    assert [by_statement[text] for text in texts] == [whole[f"t{i}.py"] for i in range(len(texts))]


# --- a generated file that is not Python ------------------------------------------------------
BROKEN = "\ndef broken(:\n    pass\n"


def test_invalid_python_is_an_internal_error_naming_the_file() -> None:
    files = {"__init__.py": "x = 1\n", "methods.py": "y = 2\n" + BROKEN, "py.typed": ""}
    for formatter in ("ruff", "black"):
        with pytest.raises(GeneratedCodeError) as info:
            format_files(files, formatter)  # type: ignore[arg-type]
        assert "generated methods.py is not valid Python" in str(info.value)
        assert "at line 3" in str(info.value) and "def broken(:" in str(info.value)


def test_a_bundled_runtime_source_is_compiled_only_through_its_header() -> None:
    """`runtime` (Rendered.runtime) names files that are a header + a bundled runtime source:
    only a header of comment lines is compiled then; anything else is compiled whole."""
    header = "# generated\n# do not edit\n"
    body = "def broken(:\n"  # stands in for a source the check would not compile again
    runtime = {"a.py": (header, body)}
    codegen.format.check_syntax({"a.py": header + body}, runtime=runtime)
    for text, pair in (
        (header + body + "x = 1\n", (header, body)),  # changed after rendering: not the pair
        ("x = (\n" + body, ("x = (\n", body)),  # a header that is code
        ("#\rx = (\n" + body, ("#\rx = (\n", body)),  # \r ends a comment line
        ("# a\n" + body, ("# a", "\n" + body)),  # a header that does not end its line
    ):
        with pytest.raises(GeneratedCodeError) as info:
            codegen.format.check_syntax({"a.py": text}, runtime={"a.py": pair})
        assert "generated a.py is not valid Python" in str(info.value)
    with pytest.raises(GeneratedCodeError) as info:
        codegen.format.check_syntax({"a.py": header + body})  # no `runtime`: compiled whole
    assert "at line 3" in str(info.value)


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
    value = '"yapf"' if "yapf" in body else "3"  # as TOML writes it
    assert err.splitlines() == [
        f"error: {config}{pointer}: unknown formatter {value} (fix: use one of ['ruff', 'black'])"
    ]
    assert not (tmp_path / "a").exists()


@pytest.mark.slow
def test_formatter_flag_chooses_the_formatter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[str] = []
    for name in ("ruff", "black"):

        def spy(files: dict[str, str], *args: Any, name: str = name, **kwargs: Any) -> dict[str, str]:
            used.append(name)  # which formatter ran is the point here; what each makes is tested above
            return dict(files)

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
