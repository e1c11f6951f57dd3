"""Stage 3 — render: the IR through Jinja templates, one template per output file.

Templates only print; the small filters here translate IR type expressions into the Python
spellings a template needs (a type hint, a decode expression, an encode expression).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jinja2

from .format import LINE_LENGTH
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
from .templates import CustomTemplates, blame, loader, render_error, runtime_source

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
    "process.py": "process.py",
    "testing.py": "testing.py",
    "conformance.py": "conformance.py",
}
ROLE_FILES = {"agent": "agent.py", "client": "client.py"}

_HINTS = {"str": "str", "int": "int", "float": "float", "bool": "bool", "json": "Any", "object": "JsonObject"}
_HINTS["null"] = "None"
_CHECKS = {"str": "str", "bool": "bool", "object": "dict"}
_NAMES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "object": "object", "null": "null"}


@dataclass(frozen=True)
class DecodePlan:
    """The decode of one field value `v`, as the decoder template lays it out.

    `cond` is an inline check (`value` when it holds, else a failure naming `expected`);
    `call` an expression that decodes `v` and may raise DecodeError; neither: `v` as is.
    """

    cond: str | None
    value: str
    expected: str
    call: str | None
    enum: str | None = None


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
    def dec(self, t: TypeExpr, v: str, p: str) -> str:
        """An expression decoding JSON value `v` at path `p` (raises DecodeError)."""
        plan = self._plan(t, v, p)
        if plan.cond is None:
            return plan.call or plan.value
        otherwise = plan.call or (
            f"_enum_fail({p}, {plan.enum!r}, {v})" if plan.enum else f"_fail({p}, {plan.expected!r}, {v})"
        )
        return f"{plan.value} if {plan.cond} else {otherwise}"

    def plan(self, f: Field) -> DecodePlan:
        """How the decoder checks a present, non-null field value `v` (see DecodePlan)."""
        return self._plan(f.type, "v", f"(path, {f.wire!r})")

    def _plan(self, t: TypeExpr, v: str, p: str) -> DecodePlan:
        """The one place that decides how a value of type `t` is checked and decoded."""
        t = self._alias_target(t)
        if isinstance(t, Scalar):
            if t.kind == "json":
                return DecodePlan(None, v, "", None)
            if t.kind == "null":
                return DecodePlan(f"{v} is None", v, "null", None)
            if t.kind in _CHECKS:
                return DecodePlan(f"{v}.__class__ is {_CHECKS[t.kind]}", v, _NAMES[t.kind], None)
            fn = "_int" if t.kind == "int" else "_num"
            return DecodePlan(f"{v}.__class__ is {t.kind}", v, _NAMES[t.kind], f"{fn}({v}, {p})")
        if isinstance(t, LiteralOf):
            return DecodePlan(f"{v}.__class__ is str and {v} in {t.values!r}", v, " | ".join(t.values), None)
        if isinstance(t, ListOf):
            # _skip_invalid drops invalid items and raises only for a non-list.
            helper = "_skip_invalid" if t.skip_invalid else "_list"
            return DecodePlan(None, v, "array", f"{helper}({v}, {p}, ctx, {self.fn(t.item)})")
        if isinstance(t, MapOf):
            return DecodePlan(None, v, "object", f"_map({v}, {p}, ctx, {self.fn(t.value)})")
        target = self.defs.get(t.name)
        if isinstance(target, EnumDef):
            cls = "str" if target.base == "str" else "int"
            if target.open:
                return DecodePlan(f"{v}.__class__ is {cls}", v, _NAMES[target.base], None)
            # cast: the membership test proves the Literal type, which mypy cannot see.
            cond = f"{v}.__class__ is {cls} and {v} in _{t.name}_VALUES"
            return DecodePlan(cond, f"cast({t.name!r}, {v})", f"a known {t.name}", None, enum=t.name)
        return DecodePlan(None, v, t.name, f"_d_{t.name}({v}, {p}, ctx)")

    def failure(self, f: Field) -> str:
        """The statement for a value that failed its inline check."""
        plan = self.plan(f)
        p = f"(path, {f.wire!r})"
        if f.lenient:
            return f"inst.{f.py} = _tolerate(ctx, {p}, {plan.expected!r}, v, {self.fallback(f)})"
        if plan.enum is not None:
            return f"_enum_fail({p}, {plan.enum!r}, v)"
        return f"_fail({p}, {plan.expected!r}, v)"

    def fallback(self, f: Field) -> str:
        """What a malformed lenient value becomes."""
        return self.default(f.on_error) if f.on_error is not None else "UNSET"

    def enum_dec(self, e: EnumDef) -> str:
        return self.dec(Named(e.name, "enum"), "obj", "None")

    def fn(self, t: TypeExpr) -> str:
        """A decoder function `(value, path, ctx)` for list items and union variants."""
        t = self._alias_target(t)
        if isinstance(t, Named) and not isinstance(self.defs.get(t.name), EnumDef):
            return f"_d_{t.name}"
        if isinstance(t, Scalar):
            return f"_d_{t.kind}"
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


@dataclass(frozen=True)
class KeywordParam:
    """One keyword argument of a proxy method's keyword form: a field of its params object."""

    name: str
    hint: str  # as spelled in a role module (`types.`-qualified)
    default: str | None  # None: required; `...` for a mutable default (the dataclass builds it)


def keyword_params(renderer: Renderer, params: str) -> list[KeywordParam] | None:
    """The keyword form of a proxy method taking `params`; None when params is not one object
    (a union: the caller passes one of its variant objects)."""
    d = renderer.defs.get(params)
    if not isinstance(d, ObjectDef):
        return None
    out: list[KeywordParam] = []
    for f in d.fields:
        hint = _qualified_hint(f.type) + (" | None" if f.nullable else "")
        default: str | None = None
        if f.default is not None:
            default = "..." if renderer.is_mutable_default(f.default) else renderer.default(f.default)
        elif not f.required:
            hint, default = hint + " | types.Unset", "types.UNSET"
        out.append(KeywordParam(f.py, hint, default))
    return out


def _qualified_hint(t: TypeExpr) -> str:
    """A type hint as a role module spells it: protocol names through `types.`."""
    if isinstance(t, Scalar):
        return "types.JsonObject" if t.kind == "object" else _HINTS[t.kind]
    if isinstance(t, Named):
        return f"types.{t.name}"
    if isinstance(t, ListOf):
        return f"list[{_qualified_hint(t.item)}]"
    if isinstance(t, MapOf):
        return f"dict[str, {_qualified_hint(t.value)}]"
    return "typing.Literal[" + ", ".join(repr(v) for v in t.values) + "]"


def environment(renderer: Renderer, custom: CustomTemplates | None = None) -> jinja2.Environment:
    """The Jinja environment: bundled templates, overridden by `custom` ones of the same name."""
    env = jinja2.Environment(
        loader=loader(custom),
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
    env.filters["keyword_params"] = functools.partial(keyword_params, renderer)
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


def template_context(package: Package, renderer: Renderer) -> dict[str, Any]:
    """What every template receives (documented in docs/templates.md)."""
    return {
        "pkg": package,
        "objects": [d for d in package.definitions if isinstance(d, ObjectDef)],
        "enums": [d for d in package.definitions if isinstance(d, EnumDef)],
        "unions": [d for d in package.definitions if isinstance(d, UnionDef)],
        "aliases": renderer.aliases_in_order(),
        "defs": renderer.defs,
        "handled": package.handled(),
        "called": package.called(),
    }


def sources(role: str) -> dict[str, str]:
    """Output file -> the template (`*.jinja`) or runtime source (`*.py`) it is made from."""
    files = dict(FILES)
    files[ROLE_FILES[role]] = f"{role}.py.jinja"
    files.update(RUNTIME_FILES)
    return files


@dataclass(frozen=True)
class Rendered:
    """The rendered files (relative path -> text) and, per file, the custom templates that shaped it."""

    files: dict[str, str]
    custom: dict[str, tuple[str, ...]]


def render_package(package: Package, custom: CustomTemplates | None = None) -> Rendered:
    """Render every output file of the package, with `custom` templates overriding bundled ones."""
    renderer = Renderer(package)
    env = environment(renderer, custom)
    ctx = template_context(package, renderer)
    out: dict[str, str] = {}
    header: str | None = None
    for path, source in sources(package.role).items():
        try:
            if source in RUNTIME_FILES.values():
                if header is None:
                    header = env.get_template("_runtime_header.jinja").render(ctx)
                out[path] = header + runtime_source(source, custom)
            else:
                out[path] = env.get_template(source).render(ctx)
        except Exception as exc:  # a bundled template failing is a bug; a custom one, bad input
            if custom is None:
                raise
            raise render_error(exc, custom, path) from None
    return Rendered(out, blame(env, custom, sources(package.role)))


def render(package: Package, custom: CustomTemplates | None = None) -> dict[str, str]:
    """Render every output file of the package: relative path -> source text."""
    return render_package(package, custom).files
