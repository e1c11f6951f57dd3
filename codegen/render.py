"""Stage 3 — render: the IR through Jinja templates, one template per output file.

Templates only print; the small filters here translate IR type expressions into the Python
spellings a template needs (a type hint, a decode expression, an encode expression).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from .format import LINE_LENGTH
from .ir import (
    DefaultScalar,
    EnumDef,
    Field,
    ListOf,
    LiteralOf,
    MapOf,
    ObjectDef,
    Package,
    Scalar,
    TypeExpr,
    UnionDef,
)
from .render_decode import DecodePlanner
from .resources import runtime_dir, templates_dir

# output file -> template
FILES = {
    "__init__.py": "__init__.py.jinja",
    "types.py": "types.py.jinja",
    "methods.py": "methods.py.jinja",
    "py.typed": "py.typed.jinja",
}
# output file -> plain Python source in runtime/: the same for every schema and role, so it is
# kept as real Python (linted and type-checked as such) and only gets the generated header.
RUNTIME_FILES = {
    "dispatch.py": "dispatch.py",
    "connection.py": "connection.py",
    "serde.py": "serde.py",
}
ROLE_FILES = {"agent": "agent.py", "client": "client.py"}

class Renderer(DecodePlanner):
    """Every filter the templates use: hints and defaults (TypeView), decoding
    (DecodePlanner), and encoding and codec references (here)."""

    # -- encoding ------------------------------------------------------------------
    def enc(self, t: TypeExpr, v: str) -> str:
        t = self.alias_target(t)
        if isinstance(t, (Scalar, LiteralOf)):
            return v
        if isinstance(t, ListOf):
            item = self.enc(t.item, "x")
            return v if item == "x" else f"[{item} for x in {v}]"
        if isinstance(t, MapOf):
            item = self.enc(t.value, "x")
            return v if item == "x" else f"{{k: {item} for k, x in {v}.items()}}"
        target = self.defs.get(t.name)
        if isinstance(target, EnumDef):
            return v
        if isinstance(target, UnionDef) and (target.scalars or target.arrays):
            return f"encode_{t.name}({v})"
        return f"{v}.to_dict()"

    def differs_from_default(self, f: Field, expr: str) -> str:
        assert f.default is not None
        if isinstance(f.default, DefaultScalar) and (f.default.value is None or isinstance(f.default.value, bool)):
            return f"{expr} is not {f.default.value!r}"
        return f"{expr} != {self.default(f.default)}"

    def decoder_ref(self, name: str) -> str:
        kind = self.defs[name].kind
        return f"types.{name}.from_dict" if kind == "object" else f"types.decode_{name}"

    def encoder_ref(self, name: str) -> str:
        kind = self.defs[name].kind
        return f"types.{name}.to_dict" if kind == "object" else f"types.encode_{name}"


def environment(renderer: Renderer, template_dir: Path | None = None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir or templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(
        hint=renderer.hint,
        field_hint=renderer.field_hint,
        plan=renderer.plan,
        failure=renderer.failure,
        fallback=renderer.fallback,
        enum_dec=renderer.enum_dec,
        only_required=renderer.only_required,
        dec=renderer.dec,
        enc=renderer.enc,
        fn=renderer.fn,
        default=renderer.default,
        pyrepr=repr,
        decoder_ref=renderer.decoder_ref,
        differs_from_default=renderer.differs_from_default,
        encoder_ref=renderer.encoder_ref,
        docstring=_docstring,
    )
    env.tests.update(mutable_default=renderer.is_mutable_default)
    return env


def _docstring(text: str, indent: int = 4, continued: bool = False) -> str:
    """A safe triple-quoted docstring body (schema prose may hold backslashes and quotes).

    `continued`: the template already wrote lines before this body. Where the closing quotes
    go is decided here, as black does it (on their own line when the last line of a multi-line
    docstring would run past the line length), so every formatter keeps the same layout.
    """
    body = text.strip().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body += " "
    pad = " " * indent
    lines = [(pad + line) if line.strip() else "" for line in body.splitlines()]
    out = "\n".join(lines).lstrip()
    if (continued or len(lines) > 1) and lines and len(lines[-1].rstrip()) + 3 > LINE_LENGTH:
        out += "\n" + pad
    return out


def render(package: Package, template_dir: Path | None = None) -> dict[str, str]:
    """Render every output file of the package: relative path -> source text."""
    renderer = Renderer(package)
    env = environment(renderer, template_dir)
    ctx: dict[str, Any] = {
        "pkg": package,
        "objects": [d for d in package.definitions if isinstance(d, ObjectDef)],
        "enums": [d for d in package.definitions if isinstance(d, EnumDef)],
        "unions": [d for d in package.definitions if isinstance(d, UnionDef)],
        "aliases": renderer.aliases_in_order(),
        "defs": renderer.defs,
        "typing_names": renderer.typing_names(),
        "handled": package.handled(),
        "called": package.called(),
    }
    files = dict(FILES)
    files[ROLE_FILES[package.role]] = f"{package.role}.py.jinja"
    out: dict[str, str] = {}
    for path, template in files.items():
        out[path] = env.get_template(template).render(ctx)
    header = env.get_template("_runtime_header.jinja").render(ctx)
    for path, source in RUNTIME_FILES.items():
        out[path] = header + (runtime_dir() / source).read_text(encoding="utf-8")
    return out
