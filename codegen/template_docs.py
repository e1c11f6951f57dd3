"""Write docs/templates.md, the template context reference, from the IR and the templates themselves.

    python -m codegen.template_docs            # rewrite docs/templates.md (and codegen/template_code.json)
    python -m codegen.template_docs --check    # exit 1 if either is stale

Everything that can drift is read from the source: the IR types, their fields and their
meanings from `codegen/ir.py` (class docstrings; for a field, the docstring under it, else the
comment above it, else its trailing comment), the context variables, filters and tests from the
Jinja environment `render` builds, and what each template uses from parsing it. Only the prose
for the context variables and filters lives here, and `problems()` fails when that prose and
the code disagree (tests/test_templates.py runs it and compares the committed file).
"""

from __future__ import annotations

import ast
import inspect
import io
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import jinja2
import jinja2.meta
from jinja2.filters import FILTERS as JINJA_FILTERS
from jinja2.tests import TESTS as JINJA_TESTS

from . import exports, ir, ir_contrib, ir_sessions, template_code
from .render import ROLE_RUNTIME_FILES, RUNTIME_FILES, Renderer, environment, sources, template_context
from .template_vars import CONTEXT, FILTERS, TESTS
from .templates import bundled_runtime, bundled_templates

DOC = Path(__file__).resolve().parent.parent / "docs" / "templates.md"

# Modules beside ir.py whose dataclasses templates receive (documented after the IR's).
PLAN_MODULES = (ir_contrib, ir_sessions, exports)


def dummy_package() -> ir.Package:
    """An empty package: enough to build the environment and a context to inspect."""
    return ir.Package(
        role="agent",
        package="pkg",
        release="0",
        sha256="0",
        schema_label="",
        generator_version="0",
        command="",
        protocol_version=1,
        unstable=False,
        definitions=(),
        methods=(),
    )


def _env() -> jinja2.Environment:
    return environment(Renderer(dummy_package()))


def custom_filters(env: jinja2.Environment) -> dict[str, object]:
    """The filters render adds (or replaces) on top of Jinja's built-in ones."""
    return {name: fn for name, fn in env.filters.items() if JINJA_FILTERS.get(name) is not fn}


def custom_tests(env: jinja2.Environment) -> dict[str, object]:
    return {name: fn for name, fn in env.tests.items() if JINJA_TESTS.get(name) is not fn}


# -- the IR, read from ir.py ---------------------------------------------------------------------


@dataclass(frozen=True)
class FieldDoc:
    name: str
    annotation: str
    default: str | None
    meaning: str


@dataclass(frozen=True)
class MemberDoc:
    name: str
    signature: str
    doc: str


@dataclass(frozen=True)
class ClassDoc:
    name: str
    doc: str
    fields: tuple[FieldDoc, ...]
    members: tuple[MemberDoc, ...]


def _comments(source: str) -> dict[int, str]:
    """Line number -> the text of the comment on that line."""
    found: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = tok.string.lstrip("#").strip()
    return found


def _meaning(body: list[ast.stmt], i: int, lines: list[str], comments: dict[int, str]) -> str:
    node = body[i]
    after = body[i + 1] if i + 1 < len(body) else None
    if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
        return inspect.cleandoc(after.value.value)
    above: list[str] = []
    line = node.lineno - 1
    while line >= 1 and lines[line - 1].strip().startswith("#"):
        above.insert(0, comments[line])
        line -= 1
    if above:
        return " ".join(above)
    return comments.get(node.end_lineno or node.lineno, "")


def ir_source() -> str:
    return Path(ir.__file__).read_text(encoding="utf-8")


def ir_classes(source: str) -> list[ClassDoc]:
    """Every class in ir.py (`source`), in source order, with its fields and public members."""
    lines = source.splitlines()
    comments = _comments(source)
    out: list[ClassDoc] = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields: list[FieldDoc] = []
        members: list[MemberDoc] = []
        for i, stmt in enumerate(node.body):
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                default = ast.unparse(stmt.value) if stmt.value is not None else None
                meaning = _meaning(node.body, i, lines, comments)
                fields.append(FieldDoc(stmt.target.id, ast.unparse(stmt.annotation), default, meaning))
            elif isinstance(stmt, ast.FunctionDef) and not stmt.name.startswith("_"):
                is_property = any(isinstance(d, ast.Name) and d.id == "property" for d in stmt.decorator_list)
                returns = ast.unparse(stmt.returns) if stmt.returns else ""
                args = [a.arg for a in stmt.args.args[1:]]
                sig = f": {returns} (property)" if is_property else f"({', '.join(args)}) -> {returns}"
                members.append(MemberDoc(stmt.name, sig, ast.get_docstring(stmt) or ""))
        out.append(ClassDoc(node.name, ast.get_docstring(node) or "", tuple(fields), tuple(members)))
    return out


def ir_aliases(source: str) -> list[str]:
    """The module-level type aliases of ir.py (`TypeExpr = Scalar | Named | ...`), as written."""
    return [
        ast.unparse(node)
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    ]


# -- checks and the page -------------------------------------------------------------------------


def problems(source: str | None = None) -> list[str]:
    """Where the prose here and the code disagree, or an IR field has no documented meaning.

    `source`: the text of ir.py (default: the module's file).
    """
    env = _env()
    found: list[str] = []
    ctx = template_context(dummy_package(), Renderer(dummy_package()))
    if sorted(ctx) != sorted(CONTEXT):
        found.append(f"context variables {sorted(ctx)} != documented {sorted(CONTEXT)}")
    if sorted(custom_filters(env)) != sorted(FILTERS):
        found.append(f"filters {sorted(custom_filters(env))} != documented {sorted(FILTERS)}")
    if sorted(custom_tests(env)) != sorted(TESTS):
        found.append(f"tests {sorted(custom_tests(env))} != documented {sorted(TESTS)}")
    sections = [("ir.py", ir_classes(ir_source() if source is None else source))]
    sections += [(Path(module.__file__ or "").name, classes) for module, classes in plan_classes()]
    for name, classes in sections:
        for cls in classes:
            if not cls.doc:
                found.append(f"codegen/{name}: class {cls.name} has no docstring")
            for f in cls.fields:
                if not f.meaning:
                    what = f"{cls.name}.{f.name} has no docstring or comment saying what it means"
                    found.append(f"codegen/{name}: {what}")
            for m in cls.members:
                if not m.doc:
                    found.append(f"codegen/{name}: {cls.name}.{m.name} has no docstring")
    return found


def _usage(name: str, fn: object) -> str:
    """`t|hint` or `f|differs_from_default(expr)`: a filter as a template calls it."""
    try:
        params = list(inspect.signature(fn).parameters.values())  # type: ignore[arg-type]
    except (TypeError, ValueError):  # a builtin without a signature
        return f"value|{name}"
    rest = [p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}" for p in params[1:]]
    value = params[0].name if params else "value"
    return f"{value}|{name}" + (f"({', '.join(rest)})" if rest else "")


def _uses(env: jinja2.Environment, name: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """Context variables, filters, templates imported, and macros defined by template `name`."""
    assert env.loader is not None
    tree = env.parse(env.loader.get_source(env, name)[0])
    variables = sorted(jinja2.meta.find_undeclared_variables(tree) & set(CONTEXT))
    filters = sorted({f.name for f in tree.find_all(jinja2.nodes.Filter)} & set(FILTERS))
    imports = sorted({t for t in jinja2.meta.find_referenced_templates(tree) if t})
    macros = [f"{m.name}({', '.join(a.name for a in m.args)})" for m in tree.find_all(jinja2.nodes.Macro)]
    return variables, filters, imports, macros


def page() -> str:
    env = _env()
    out: list[str] = [
        "# Templates: overriding them, and what they receive",
        "",
        "<!-- generated by `python -m codegen.template_docs` from codegen/ir.py and templates/; do not edit -->",
        "",
        "Every generated file comes from one Jinja template in `templates/`, or from a runtime source in `runtime/` "
        "copied verbatim under a generated header. You can replace any of them:",
        "",
        "```",
        "acp-codegen templates --list                      # the names you can override",
        "acp-codegen templates --copy _role.jinja my-tpl/  # start from the bundled one",
        "acp-codegen agent --out myagent/acp --templates my-tpl/",
        "```",
        "",
        'or, for every target of `acp-codegen generate`, `templates = "my-tpl"` directly under '
        "`[tool.acp-codegen]` in pyproject.toml (relative to it; `--templates` on the command line overrides it).",
        "",
        "- A file in the directory replaces the bundled template or runtime source **of the same name**; "
        "everything else stays bundled (a Jinja `ChoiceLoader`). `_macros.jinja` and `_role.jinja` hold macros "
        "the others import, so overriding one changes every file that uses it.",
        "- A file whose name is not a bundled one is an error naming it (exit 2): a typo is never ignored. "
        "Hidden files (`.gitkeep`) are skipped.",
        "- The output goes through the same checks as the bundled one: compiled (invalid Python stops with exit 2, "
        "naming your template and the offending generated line), formatted (ruff or black), written atomically. "
        "A Jinja error in your template (syntax, an undefined attribute) names the template file and line.",
        "- Every file header records `# custom templates: DIR`, and the regenerate command in it includes "
        "`--templates DIR`; `--check` honours `--templates` like generation does.",
        "- Templates run with `StrictUndefined`, `trim_blocks` and `lstrip_blocks`; autoescaping is off.",
        "",
        "**Stability.** The context below (variables, the IR types and their fields, filters and tests) is a "
        "public API: within a major version of acp-codegen names are only added, never removed or changed in "
        "meaning. The bundled templates themselves are not: when you override one, compare it with "
        "`acp-codegen templates --copy` after upgrading.",
        "",
        "## Context",
        "",
        "Every template is rendered with the same variables:",
        "",
        "| variable | type | holds |",
        "| --- | --- | --- |",
    ]
    out += [f"| `{name}` | `{_cell(kind)}` | {_cell(text)} |" for name, (kind, text) in CONTEXT.items()]
    out += ["", "## Templates", ""]
    files = sources("agent")
    files.update(sources("client"))
    made_by = {source: path for path, source in files.items()}
    for name in bundled_templates():
        variables, filters, imports, macros = _uses(env, name)
        out.append(f"### `{name}`")
        out.append("")
        if name in made_by:
            role = {"agent.py.jinja": " (agent role)", "client.py.jinja": " (client role)"}.get(name, "")
            out.append(f"- renders: `{made_by[name]}`{role}")
        elif name == "_runtime_header.jinja":
            runtime = [*RUNTIME_FILES, *(f"{n} ({r} role)" for r, fs in ROLE_RUNTIME_FILES.items() for n in fs)]
            out.append(f"- renders: the header of {', '.join(f'`{n}`' for n in runtime)}")
        else:
            out.append("- renders: nothing by itself; holds macros imported by other templates")
        out.append(f"- uses variables: {', '.join(f'`{v}`' for v in variables) or 'none'}")
        if filters:
            out.append(f"- uses filters: {', '.join(f'`{f}`' for f in filters)}")
        if imports:
            out.append(f"- imports: {', '.join(f'`{i}`' for i in imports)}")
        if macros:
            out.append(f"- defines macros: {', '.join(f'`{m}`' for m in macros)}")
        out.append("")
    out += ["## Runtime sources", ""]
    out += [
        f"- `{name}` → `{path}`: plain Python, copied verbatim after the header"
        " `_runtime_header.jinja` renders"
        for path, name in RUNTIME_FILES.items()
        if name in bundled_runtime()
    ]
    out += [
        f"- `{name}` → `{path}` ({role} role only): plain Python, copied verbatim after the header"
        for role, files in ROLE_RUNTIME_FILES.items()
        for path, name in files.items()
    ]
    out += ["", "## Filters", "", "Used as `value|name(args)`; Jinja's built-in filters are available too.", ""]
    registered = custom_filters(env)
    for name in sorted(FILTERS):
        out.append(f"- `{_usage(name, registered[name])}`: {FILTERS[name]}")
    out += ["", "## Tests", ""]
    out += [f"- `{name}`: {text}" for name, text in TESTS.items()]
    out += ["", "## The IR", "", "From `codegen/ir.py`:", "", "```text", (ir.__doc__ or "").strip(), "```", ""]
    source = ir_source()
    out += ["Type aliases:", "", "```text", *ir_aliases(source), "```", ""]
    out += _class_docs(ir_classes(source))
    for module, classes in plan_classes():
        out += ["", f"### From `codegen/{Path(module.__file__ or '').name}`", "", (module.__doc__ or "").strip(), ""]
        out += _class_docs(classes)
    return "\n".join(out).rstrip("\n") + "\n"


def plan_classes() -> list[tuple[ModuleType, list[ClassDoc]]]:
    """The dataclasses of each of PLAN_MODULES."""
    return [(m, ir_classes(Path(m.__file__ or "").read_text(encoding="utf-8"))) for m in PLAN_MODULES]


def _class_docs(classes: list[ClassDoc]) -> list[str]:
    out: list[str] = []
    for cls in classes:
        out += [f"### `{cls.name}`", "", cls.doc, ""]
        if cls.fields:
            out += ["| field | type | default | meaning |", "| --- | --- | --- | --- |"]
            for f in cls.fields:
                default = f"`{f.default}`" if f.default is not None else ""
                out.append(f"| `{f.name}` | `{_cell(f.annotation)}` | {default} | {_cell(f.meaning)} |")
            out.append("")
        for m in cls.members:
            out += [f"- `{m.name}{m.signature}`: {m.doc}"]
        if cls.members:
            out.append("")
    return out


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, `|` escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def main(argv: list[str]) -> int:
    found = problems()
    for problem in found:
        print(f"error: {problem}", file=sys.stderr)
    if found:
        return 2
    text = page()
    # The templates' stored Jinja output is refreshed (or checked) with their documentation: one
    # command after a template change.
    code_status = template_code.refresh(_env(), check="--check" in argv)
    if "--check" in argv:
        current = DOC.read_text(encoding="utf-8") if DOC.is_file() else ""
        if current != text:
            print(f"{DOC} is stale: run python -m codegen.template_docs", file=sys.stderr)
            return 1
        return code_status
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return code_status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
