"""Custom templates: `--templates DIR` / `templates = "DIR"` override bundled templates and runtime sources by name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codegen import template_docs
from codegen.cli import app
from codegen.errors import CodegenError
from codegen.generate import ApiCache, Target, generate_files, render_files
from codegen.render import runtime_sources
from codegen.resources import runtime_dir, templates_dir
from codegen.templates import CustomTemplates, bundled_names, bundled_runtime

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "generated" / "agent"
APIS = ApiCache()  # one schema load + IR build for every in-process generation here

REPR = """    def __repr__(self) -> str:
        return f"<{{ pkg.role }} {type(self).__name__}>"

"""
ANCHOR = "    def on_connect(self, peer: {{ peer_proxy }}) -> None:\n"


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def custom_dir(tmp_path: Path) -> Path:
    root = tmp_path / "tpl"
    root.mkdir()
    return root


def role_with_repr() -> str:
    text = (templates_dir() / "_role.jinja").read_text(encoding="utf-8")
    assert text.count(ANCHOR) == 1
    return text.replace(ANCHOR, REPR + ANCHOR)


def body(text: str) -> list[str]:
    """A generated file without its header comment lines."""
    lines = text.splitlines()
    while lines and lines[0].startswith("# "):
        lines.pop(0)
    return lines


def write_tree(root: Path, files: dict[str, str]) -> None:
    root.mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_overriding_one_template_changes_only_its_output(tmp_path: Path) -> None:
    tpl = custom_dir(tmp_path)
    (tpl / "_role.jinja").write_text(role_with_repr(), encoding="utf-8")
    target = Target("agent", tmp_path / "agent", templates=CustomTemplates(tpl, "my-templates"))
    files = generate_files(target, apis=APIS)

    golden = {
        p.relative_to(GOLDEN).as_posix(): p.read_text(encoding="utf-8")
        for p in GOLDEN.rglob("*")
        if p.is_file() and p.name[0] != "." and "__pycache__" not in p.parts
    }
    assert sorted(files) == sorted(golden)
    changed = {rel for rel in files if body(files[rel]) != body(golden[rel])}
    assert changed == {"agent.py"}
    new, old = body(files["agent.py"]), body(golden["agent.py"])
    added = [line for line in new if line not in old]
    assert added == ["    def __repr__(self) -> str:", '        return f"<agent {type(self).__name__}>"']
    # Every file with a header says custom templates were used, and how to regenerate.
    for rel, text in files.items():
        if rel != "py.typed":
            assert "# custom templates: my-templates\n" in text, rel
            assert "--templates my-templates\n" in text, rel

    # The output is real: import it and use the new method.
    write_tree(tmp_path / "agent", files)
    spec = importlib.util.spec_from_file_location(
        "custom_tpl_agent", tmp_path / "agent" / "__init__.py", submodule_search_locations=[str(tmp_path / "agent")]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)

        class Mine:  # the base class is abstract: call its new method on a stand-in
            pass

        assert module.Agent.__repr__(Mine()) == "<agent Mine>"
        assert "__repr__" in vars(module.Agent)
    finally:
        for name in [n for n in sys.modules if n == spec.name or n.startswith(spec.name + ".")]:
            del sys.modules[name]


def test_a_runtime_source_and_init_are_overridable_by_name(tmp_path: Path) -> None:
    dispatch = (runtime_dir() / "dispatch.py").read_text(encoding="utf-8") + "\nCUSTOMISED = True\n"
    init = (templates_dir() / "__init__.py.jinja").read_text(encoding="utf-8") + "\nVENDORED_BY = 'me'\n"
    tpl = custom_dir(tmp_path)
    (tpl / "dispatch.py").write_text(dispatch, encoding="utf-8")
    (tpl / "__init__.py.jinja").write_text(init, encoding="utf-8")
    files = generate_files(Target("agent", tmp_path / "agent", templates=CustomTemplates(tpl, "tpl")), apis=APIS)
    golden = {rel: (GOLDEN / rel).read_text(encoding="utf-8") for rel in files}
    changed = {rel for rel in files if body(files[rel]) != body(golden[rel])}
    assert changed == {"dispatch.py", "__init__.py"}
    assert body(files["dispatch.py"])[-1] == "CUSTOMISED = True"
    assert body(files["__init__.py"])[-1] == 'VENDORED_BY = "me"'  # custom output is formatted too


def test_an_unknown_name_is_an_error_naming_it(tmp_path: Path) -> None:
    tpl = custom_dir(tmp_path)
    (tpl / "_role.jinja").write_text(role_with_repr(), encoding="utf-8")
    (tpl / "agnet.py.jinja").write_text("typo", encoding="utf-8")
    (tpl / "connection.pyi").write_text("typo", encoding="utf-8")
    (tpl / ".gitkeep").write_text("", encoding="utf-8")  # hidden files are not templates
    out = tmp_path / "out"
    code, _, err = cli("agent", "--out", str(out), "--templates", str(tpl))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert "'agnet.py.jinja' matches no bundled template" in lines[0]
    assert "'connection.pyi' matches no bundled template" in lines[1]
    assert "templates --list" in err and "Traceback" not in err
    assert not out.exists()


def test_a_missing_templates_directory_is_an_error(tmp_path: Path) -> None:
    code, _, err = cli("agent", "--out", str(tmp_path / "out"), "--templates", str(tmp_path / "nope"))
    assert code == 2 and "custom templates directory does not exist" in err


def test_invalid_python_from_a_custom_template_names_it_and_the_line(tmp_path: Path) -> None:
    broken = role_with_repr().replace("    def __repr__(self) -> str:", "    def __repr__(self) -> str")
    tpl = custom_dir(tmp_path)
    (tpl / "_role.jinja").write_text(broken, encoding="utf-8")
    out = tmp_path / "out"
    code, _, err = cli("agent", "--out", str(out), "--templates", str(tpl))
    assert code == 2, err
    assert err.startswith(f"error: {tpl}/_role.jinja: made agent.py with invalid Python: expected ':' at line ")
    assert "'def __repr__(self) -> str'" in err
    assert not out.exists()  # nothing written


def test_invalid_python_in_a_custom_runtime_source_or_header_names_it(tmp_path: Path) -> None:
    """Only a bundled runtime source behind a comment-only header skips the compile check
    (codegen.format._compile): a custom source, or a header that is code, is compiled whole."""
    dispatch = (runtime_dir() / "dispatch.py").read_text(encoding="utf-8")
    header = (templates_dir() / "_runtime_header.jinja").read_text(encoding="utf-8")
    for name, text, output, line in (
        ("dispatch.py", dispatch + "\ndef broken(:\n    pass\n", "dispatch.py", "'def broken(:'"),
        ("_runtime_header.jinja", header + "x = (\n", "connection.py", "at line 5: 'x = ('"),  # the first runtime file
    ):
        tpl = tmp_path / name.replace(".", "_")
        tpl.mkdir()
        (tpl / name).write_text(text, encoding="utf-8")
        target = Target("agent", tmp_path / "out", templates=CustomTemplates(tpl, "t"))
        rendered = render_files(target, apis=APIS)
        assert ("dispatch.py" in rendered.runtime) == (name != "dispatch.py")
        with pytest.raises(CodegenError) as info:
            generate_files(target, apis=APIS)
        (problem,) = info.value.problems
        assert problem.file == f"t/{name}" and f"made {output} with invalid Python" in problem.what, problem
        assert line in problem.what


def test_a_template_error_names_the_template_line(tmp_path: Path) -> None:
    init = (templates_dir() / "__init__.py.jinja").read_text(encoding="utf-8")
    tpl = custom_dir(tmp_path)
    (tpl / "__init__.py.jinja").write_text(init + "{{ pkg.no_such_field }}\n", encoding="utf-8")
    line = init.count("\n") + 1
    with pytest.raises(CodegenError) as info:
        generate_files(Target("client", tmp_path / "out", templates=CustomTemplates(tpl, "t")), apis=APIS)
    (problem,) = info.value.problems
    assert problem.file == f"t/__init__.py.jinja:{line}"
    assert "UndefinedError" in problem.what and "no_such_field" in problem.what


def test_check_honours_templates(tmp_path: Path) -> None:
    tpl = custom_dir(tmp_path)
    (tpl / "_role.jinja").write_text(role_with_repr(), encoding="utf-8")
    out = tmp_path / "acp"
    assert cli("agent", "--out", str(out), "--templates", str(tpl))[0] == 0
    assert "def __repr__(self) -> str:" in (out / "agent.py").read_text()
    assert cli("agent", "--out", str(out), "--templates", str(tpl), "--check")[0] == 0
    code, diff, _ = cli("agent", "--out", str(out), "--check")  # without them, the output is stale
    assert code == 1 and "__repr__" in diff and "custom templates" in diff


def test_config_templates_key_is_relative_to_pyproject(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    tpl = custom_dir(project)
    (tpl / "__init__.py.jinja").write_text(
        (templates_dir() / "__init__.py.jinja").read_text(encoding="utf-8") + "\nFROM_CONFIG = 1\n", encoding="utf-8"
    )
    config = project / "pyproject.toml"
    config.write_text(
        '[tool.acp-codegen]\ntemplates = "tpl"\n\n[[tool.acp-codegen.targets]]\nrole = "client"\nout = "acp"\n'
    )
    code, _, err = cli("generate", "--config", str(config))
    assert code == 0, err
    init = (project / "acp" / "__init__.py").read_text()
    assert "# custom templates: tpl\n" in init and init.endswith("FROM_CONFIG = 1\n")
    assert cli("generate", "--config", str(config), "--check")[0] == 0
    # --templates on the command line overrides the config (here: an empty directory = bundled templates).
    (tmp_path / "empty").mkdir()
    assert cli("generate", "--config", str(config), "--check", "--templates", str(tmp_path / "empty"))[0] == 1

    config.write_text(config.read_text().replace('templates = "tpl"', "templates = 3"))
    code, _, err = cli("generate", "--config", str(config))
    assert code == 2 and "#/tool/acp-codegen/templates: templates = 3 is not a directory path" in err


def test_a_bad_templates_directory_is_reported_once_for_all_targets(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text(
        '[tool.acp-codegen]\ntemplates = "missing"\n\n'
        '[[tool.acp-codegen.targets]]\nrole = "client"\nout = "a"\n\n'
        '[[tool.acp-codegen.targets]]\nrole = "agent"\nout = "b"\n'
    )
    code, _, err = cli("generate", "--config", str(config))
    assert code == 2 and err.count("custom templates directory does not exist") == 1, err


def test_templates_list_prints_every_overridable_name() -> None:
    code, out, _ = cli("templates", "--list")
    assert code == 0
    names = out.split()
    assert names == bundled_names()
    on_disk = {p.name for p in templates_dir().glob("*.jinja")} | {
        p.relative_to(runtime_dir()).as_posix() for p in runtime_dir().rglob("*.py") if "__pycache__" not in p.parts
    }
    assert set(names) == on_disk
    assert {"agent.py.jinja", "_role.jinja", "connection.py"} <= set(names)


def test_every_runtime_source_is_copied_into_packages() -> None:
    """The overridable runtime names (runtime/*.py) are exactly the ones render copies."""
    assert sorted(runtime_sources()) == bundled_runtime()


def test_templates_copy(tmp_path: Path) -> None:
    dest = tmp_path / "mine"
    code, out, _ = cli("templates", "--copy", "_role.jinja", str(dest))
    assert code == 0 and "_role.jinja" in out
    assert (dest / "_role.jinja").read_text() == (templates_dir() / "_role.jinja").read_text()
    code, _, err = cli("templates", "--copy", "connection.py", str(dest))
    assert code == 0 and (dest / "connection.py").read_bytes() == (runtime_dir() / "connection.py").read_bytes()

    (dest / "_role.jinja").write_text("edited")
    code, _, err = cli("templates", "--copy", "_role.jinja", str(dest))
    assert code == 2 and "file exists" in err and "--force" in err
    assert (dest / "_role.jinja").read_text() == "edited"
    assert cli("templates", "--copy", "_role.jinja", str(dest), "--force")[0] == 0
    assert (dest / "_role.jinja").read_text() != "edited"

    code, _, err = cli("templates", "--copy", "role.jinja", str(dest))
    assert code == 2 and "unknown template 'role.jinja'" in err and "_role.jinja" in err
    assert not (dest / "role.jinja").exists()
    code, _, err = cli("templates", "--copy", "_role.jinja")
    assert code == 2 and "--copy NAME DIR" in err


def test_template_docs_are_current() -> None:
    """docs/templates.md equals a fresh `python -m codegen.template_docs`, and nothing in it is undocumented."""
    assert template_docs.problems() == []
    assert template_docs.DOC.read_text(encoding="utf-8") == template_docs.page(), (
        "docs/templates.md is stale: run `python -m codegen.template_docs`"
    )


def test_template_docs_require_a_meaning_for_every_ir_field() -> None:
    source = template_docs.ir_source()
    meaning = '    """The property name on the wire (`sessionId`, `_meta`)."""\n'
    assert meaning in source
    found = template_docs.problems(source.replace(meaning, ""))
    assert found == ["codegen/ir.py: Field.wire has no docstring or comment saying what it means"]
    # A comment above the field counts as its meaning too.
    assert (
        template_docs.problems(
            source.replace(meaning, "").replace("    wire: str\n    py:", "    # wire\n    wire: str\n    py:")
        )
        == []
    )
