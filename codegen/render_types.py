"""Render helpers shared by every template: type hints, typed defaults, the order aliases are
written in, and which `typing` names `types.py` needs (so no import is ever unused)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .ir import (
    AliasDef,
    Default,
    DefaultList,
    DefaultMap,
    DefaultScalar,
    Definition,
    EnumDef,
    KeywordUnion,
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

_HINTS = {"str": "str", "int": "int", "float": "float", "bool": "bool", "json": "Any", "object": "JsonObject"}
_HINTS["null"] = "None"


class TypeView:
    """The package's definitions by name, so filters can see through aliases."""

    def __init__(self, package: Package) -> None:
        self.pkg = package
        self.defs: dict[str, Definition] = {d.name: d for d in package.definitions}

    def alias_target(self, t: TypeExpr) -> TypeExpr:
        while isinstance(t, Named):
            target = self.defs.get(t.name)
            if not isinstance(target, AliasDef):
                break
            t = target.target
        return t

    # -- type hints ----------------------------------------------------------------
    def hint(self, t: TypeExpr, qualified: bool = False) -> str:
        """The type hint of `t` as types.py spells it; `qualified`: as a role module spells it
        (protocol names through `types.`, `typing.Literal`)."""
        if isinstance(t, Scalar):
            return "types.JsonObject" if qualified and t.kind == "object" else _HINTS[t.kind]
        if isinstance(t, Named):
            return f"types.{t.name}" if qualified else t.name
        if isinstance(t, ListOf):
            return f"list[{self.hint(t.item, qualified)}]"
        if isinstance(t, MapOf):
            return f"dict[str, {self.hint(t.value, qualified)}]"
        literal = "typing.Literal" if qualified else "Literal"
        return f"{literal}[" + ", ".join(repr(v) for v in t.values) + "]"

    def field_hint(self, f: Any) -> str:
        h = self.hint(f.type)
        if f.nullable:
            h += " | None"
        if not f.required and f.default is None:
            h += " | Unset"
        return h

    # -- defaults ------------------------------------------------------------------
    def default(self, d: Default) -> str:
        if isinstance(d, DefaultScalar):
            return repr(d.value)
        if isinstance(d, DefaultList):
            return "[" + ", ".join(self.default(i) for i in d.items) + "]"
        if isinstance(d, DefaultMap):
            return "{" + ", ".join(f"{k!r}: {self.default(i)}" for k, i in d.items) + "}"
        return f"{d.cls}(" + ", ".join(f"{k}={self.default(i)}" for k, i in d.args) + ")"

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
                deps = {t.name for t in _types_of(d) if isinstance(t, Named)} & names
                if deps <= done:
                    out.append(d)
                    done.add(d.name)
                    pending.remove(d)
                    progressed = True
            if not progressed:  # a cycle through aliases; the IR rejects these earlier
                out.extend(pending)
                break
        return out

    # -- imports -------------------------------------------------------------------
    def typing_names(self) -> list[str]:
        """The `typing` names types.py uses, decided from the IR (the template only prints)."""
        defs = self.pkg.definitions
        literals = [t for d in defs for t in _types_of(d) if isinstance(t, LiteralOf)]
        needs = {
            "Any": True,
            "Final": True,
            "ClassVar": any(isinstance(d, ObjectDef) and d.tag for d in defs),
            "Literal": bool(literals) or any(isinstance(d, (EnumDef, ObjectDef)) and _literal(d) for d in defs),
            "TypeAlias": any(isinstance(d, (EnumDef, AliasDef, UnionDef)) for d in defs),
        }
        return sorted((name for name, needed in needs.items() if needed), key=lambda n: (n[0].islower(), n))

    def dataclasses_names(self) -> list[str]:
        """The `dataclasses` names types.py uses: `field` only in a class with schema defaults
        (`__acp_absent__`, a mutable default); `extra` is serde's `extra_field()`."""
        defaults = any(isinstance(d, ObjectDef) and d.has_defaults for d in self.pkg.definitions)
        return ["dataclass", "field"] if defaults else ["dataclass"]


def _literal(d: EnumDef | ObjectDef) -> bool:
    return isinstance(d, EnumDef) or d.tag is not None


def _walk(t: TypeExpr) -> Iterator[TypeExpr]:
    yield t
    if isinstance(t, ListOf):
        yield from _walk(t.item)
    elif isinstance(t, MapOf):
        yield from _walk(t.value)


def _types_of(d: Definition) -> Iterator[TypeExpr]:
    """Every type expression a definition holds, nested ones included."""
    if isinstance(d, AliasDef):
        yield from _walk(d.target)
    elif isinstance(d, UnionDef):
        for v in d.variants:
            yield from _walk(v.type)
    elif isinstance(d, ObjectDef):
        for f in d.fields:
            yield from _walk(f.type)


@dataclass(frozen=True)
class KeywordParam:
    """One keyword argument of a proxy method's keyword form: a field of its params object."""

    name: str
    hint: str  # as spelled in a role module (`types.`-qualified)
    default: str | None  # None: required; `...` for a mutable default (the dataclass builds it)


def keyword_params(view: TypeView, params: str) -> list[KeywordParam] | None:
    """The keyword form of a proxy method taking `params`; None when params is a union no field
    picks the variant of (the caller passes one of its variant objects). For a union with
    `keywords`, the fields of its variants, the picking one typed as any of theirs."""
    d = view.defs.get(params)
    picker: str | None = None
    hints: dict[str, str] = {}  # the picking field: each variant's hint, joined
    if isinstance(d, UnionDef) and d.keywords is not None:
        picker = d.keywords.field
        variants = [view.defs[v.cls] for v in d.keywords.variants]
        for v in variants:
            assert isinstance(v, ObjectDef)
            f = next(f for f in v.fields if f.py == picker)
            hints[view.hint(f.type, qualified=True)] = ""
        d = variants[0]
    if not isinstance(d, ObjectDef):
        return None
    out: list[KeywordParam] = []
    for f in d.fields:
        hint = view.hint(f.type, qualified=True) if f.py != picker else " | ".join(hints)
        hint += " | None" if f.nullable else ""
        default: str | None = None
        if f.default is not None:
            default = "..." if view.is_mutable_default(f.default) else view.default(f.default)
        elif not f.required:
            hint, default = hint + " | types.Unset", "types.UNSET"
        out.append(KeywordParam(f.py, hint, default))
    return out


def keyword_union(view: TypeView, params: str) -> KeywordUnion | None:
    """How the keyword form of a proxy method taking union `params` picks the variant."""
    d = view.defs.get(params)
    return d.keywords if isinstance(d, UnionDef) else None
