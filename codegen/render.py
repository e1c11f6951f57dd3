"""Stage 3 — render: the IR through Jinja templates, one template per output file.

Templates only print; the small filters here translate IR type expressions into the Python
spellings a template needs (a type hint, a decode expression, an encode expression).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from .ir import (
    AliasDef,
    Default,
    DefaultList,
    DefaultMap,
    DefaultScalar,
    Definition,
    EnumDef,
    Field,
    ListOf,
    LiteralOf,
    MapOf,
    Named,
    ObjectDef,
    Package,
    Scalar,
    TypeExpr,
    UnionDef,
)
from .resources import templates_dir

# output file -> template
FILES = {
    "__init__.py": "__init__.py.jinja",
    "types.py": "types.py.jinja",
    "methods.py": "methods.py.jinja",
    "dispatch.py": "dispatch.py.jinja",
    "connection.py": "connection.py.jinja",
    "py.typed": "py.typed.jinja",
}
ROLE_FILES = {"agent": "agent.py", "client": "client.py"}

_HINTS = {"str": "str", "int": "int", "float": "float", "bool": "bool", "json": "Any", "object": "JsonObject"}
_HINTS["null"] = "None"
_CHECKS = {"str": "str", "bool": "bool", "object": "dict"}
_NAMES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "object": "object", "null": "null"}


class Renderer:
    """Holds the definitions by name so filters can see through aliases."""

    def __init__(self, package: Package) -> None:
        self.pkg = package
        self.defs: dict[str, Definition] = {d.name: d for d in package.definitions}

    def _alias_target(self, t: TypeExpr) -> TypeExpr:
        while isinstance(t, Named) and isinstance(self.defs.get(t.name), AliasDef):
            t = self.defs[t.name].target  # type: ignore[union-attr]
        return t

    # -- type hints ----------------------------------------------------------------
    def hint(self, t: TypeExpr) -> str:
        if isinstance(t, Scalar):
            return _HINTS[t.kind]
        if isinstance(t, Named):
            return t.name
        if isinstance(t, ListOf):
            return f"list[{self.hint(t.item)}]"
        if isinstance(t, MapOf):
            return f"dict[str, {self.hint(t.value)}]"
        return "Literal[" + ", ".join(repr(v) for v in t.values) + "]"

    def field_hint(self, f: Any) -> str:
        h = self.hint(f.type)
        if f.nullable:
            h += " | None"
        if not f.required and f.default is None:
            h += " | Unset"
        return h

    # -- decoding ------------------------------------------------------------------
    def dec(self, t: TypeExpr, v: str, p: str, fallback: str | None = None) -> str:
        """An expression decoding JSON value `v` at path `p`.

        It raises DecodeError, or with a `fallback` (a lenient field) reports and yields it.
        """
        t = self._alias_target(t)

        def check(cond: str, expected: str, value: str = v) -> str:
            """`value` when `cond` holds, else fail (or tolerate, for a lenient field)."""
            if fallback is None:
                return f"{value} if {cond} else _fail({p}, {expected!r}, {v})"
            return f"{value} if {cond} else _tolerate(ctx, {p}, {expected!r}, {v}, {fallback})"

        def call(expr: str) -> str:
            if fallback is None:
                return expr
            return f"{fallback} if (w := _lenient({self.fn(t)}, {v}, {p}, ctx)) is _MISSING else w"

        if isinstance(t, Scalar):
            if t.kind == "json":
                return v
            if t.kind == "null":
                return check(f"{v} is None", "null")
            if t.kind in _CHECKS:
                return check(f"{v}.__class__ is {_CHECKS[t.kind]}", _NAMES[t.kind])
            fn = "_int" if t.kind == "int" else "_num"
            return call(f"{v} if {v}.__class__ is {t.kind} else {fn}({v}, {p})")
        if isinstance(t, LiteralOf):
            return check(f"{v}.__class__ is str and {v} in {t.values!r}", " | ".join(t.values))
        if isinstance(t, ListOf):
            if t.skip_invalid:
                # Invalid items are dropped, never raised: only a non-list can fail here.
                return check(f"{v}.__class__ is list", "array", f"_skip_invalid({v}, {p}, ctx, {self.fn(t.item)})")
            item = self.dec(t.item, "x", f"({p}, i)")
            return call(f"[{item} for i, x in enumerate({v})] if {v}.__class__ is list else _fail({p}, 'array', {v})")
        if isinstance(t, MapOf):
            item = self.dec(t.value, "x", f"({p}, k)")
            return call(
                f"{{k: {item} for k, x in {v}.items()}} if {v}.__class__ is dict else _fail({p}, 'object', {v})"
            )
        target = self.defs.get(t.name)
        if isinstance(target, EnumDef):
            cls = "str" if target.base == "str" else "int"
            if target.open:
                return check(f"{v}.__class__ is {cls}", _NAMES[target.base])
            values = f"_{t.name}_VALUES"
            # cast: the membership test proves the Literal type, which mypy cannot see.
            ok = f"cast({t.name!r}, {v}) if {v}.__class__ is {cls} and {v} in {values}"
            if fallback is None:
                return f"{ok} else _enum_fail({p}, {t.name!r}, {v})"
            return f"{ok} else _tolerate(ctx, {p}, {'a known ' + t.name!r}, {v}, {fallback})"
        return call(f"_d_{t.name}({v}, {p}, ctx)")

    def field_decode(self, f: Field) -> str:
        """One expression for a field: absent / null / value, each as the schema says."""
        p = f"(path, {f.wire!r})"
        fallback = None
        if f.lenient:
            fallback = self.default(f.on_error) if f.on_error is not None else "UNSET"
        present = self.dec(f.type, "v", p, fallback)
        if f.nullable:
            present = f"None if v is None else {present}"
        if f.required:
            missing = f"_missing(path, {f.wire!r})"
        elif f.default is not None:
            missing = f"_absent_default(absent, {f.wire!r}, {self.default(f.default)})"
        else:
            missing = "UNSET"
        return f"{missing} if (v := obj.get({f.wire!r}, _MISSING)) is _MISSING else {present}"

    def fn(self, t: TypeExpr) -> str:
        """A decoder function `(value, path, ctx)` for list items and union variants."""
        t = self._alias_target(t)
        if isinstance(t, Named) and not isinstance(self.defs.get(t.name), EnumDef):
            return f"_d_{t.name}"
        return f"lambda x, p, ctx: {self.dec(t, 'x', 'p')}"

    # -- encoding ------------------------------------------------------------------
    def enc(self, t: TypeExpr, v: str) -> str:
        t = self._alias_target(t)
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

    # -- defaults ------------------------------------------------------------------
    def default(self, d: Default) -> str:
        if isinstance(d, DefaultScalar):
            return repr(d.value)
        if isinstance(d, DefaultList):
            return "[" + ", ".join(self.default(i) for i in d.items) + "]"
        if isinstance(d, DefaultMap):
            return "{" + ", ".join(f"{k!r}: {self.default(i)}" for k, i in d.items) + "}"
        return f"{d.cls}(" + ", ".join(f"{k}={self.default(i)}" for k, i in d.args) + ")"

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

    def is_mutable_default(self, d: Default) -> bool:
        return not isinstance(d, DefaultScalar)

    # -- ordering ------------------------------------------------------------------
    def aliases_in_order(self) -> list[Definition]:
        """Type aliases and unions after the classes, each after the aliases it names."""
        pending = [d for d in self.pkg.definitions if isinstance(d, (AliasDef, UnionDef))]
        names = {d.name for d in pending}
        done: set[str] = set()
        out: list[Definition] = []
        while pending:
            progressed = False
            for d in list(pending):
                deps = _named(d) & names
                if deps <= done:
                    out.append(d)
                    done.add(d.name)
                    pending.remove(d)
                    progressed = True
            if not progressed:  # a cycle through aliases; the IR rejects these earlier
                out.extend(pending)
                break
        return out


def _named(d: Definition) -> set[str]:
    found: set[str] = set()

    def walk(t: TypeExpr) -> None:
        if isinstance(t, Named):
            found.add(t.name)
        elif isinstance(t, ListOf):
            walk(t.item)
        elif isinstance(t, MapOf):
            walk(t.value)

    if isinstance(d, AliasDef):
        walk(d.target)
    elif isinstance(d, UnionDef):
        for v in d.variants:
            walk(v.type)
    return found


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
        field_decode=renderer.field_decode,
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


def _docstring(text: str, indent: int = 4) -> str:
    """A safe triple-quoted docstring body (schema prose may hold backslashes and quotes)."""
    body = text.strip().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body += " "
    pad = " " * indent
    return "\n".join((pad + line) if line.strip() else "" for line in body.splitlines()).lstrip()


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
        "handled": package.handled(),
        "called": package.called(),
    }
    files = dict(FILES)
    files[ROLE_FILES[package.role]] = f"{package.role}.py.jinja"
    out: dict[str, str] = {}
    for path, template in files.items():
        out[path] = env.get_template(template).render(ctx)
    return out
