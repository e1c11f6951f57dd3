"""Render helpers for decoding: how a value of each IR type is checked and decoded.

`DecodePlanner._plan` is the one place that decides it; field decoders (`plan`, `failure`),
decode expressions (`dec`) and item/variant decoders (`fn`) are all laid out from its plan.
Helpers that are the same for every schema live in runtime/serde.py; types.py imports each
one it uses directly, under its `serde_alias` (see `serde_names`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import (
    AliasDef,
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
from .naming import serde_alias
from .render_types import TypeView

_CHECKS = {"str": "str", "bool": "bool", "object": "dict"}
_NAMES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "object": "object", "null": "null"}


@dataclass(frozen=True)
class Dispatch:
    """A tagged union's variant decoder looked up inline, before `call` (one call less than
    through the union's decoder): `decoder` is bound to the variant's decoder when `value` is
    an object whose `tag` is a string the union `table` knows, else to `fallback` (the union's
    decoder, which decides: an unknown tag, no tag, not an object). Subscripts in a `try`, not
    `get()` calls: a third less on every tagged value."""

    value: str
    tag: str
    tag_local: str
    table: str
    decoder: str
    hint: str
    """The type `decoder` is declared with (its table's value type)."""
    fallback: str


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
    loop: ListLoop | None = None
    """An array field whose `cond` holds (a list) is decoded in place, item by item."""
    dispatch: Dispatch | None = None
    """For a tagged union (then `call` calls the decoder it binds)."""


@dataclass(frozen=True)
class ListLoop:
    """An array field `v` decoded in the decoder itself (no helper call per list, no decoder
    call per union item): each item `x` at path `(path, i)` is appended to `items`.

    `dispatch`, for items of a tagged union, looks the item's decoder up inline (and
    `dispatched` calls it); `item` decodes any item otherwise. `skip_invalid`: an item failing
    with DecodeError is dropped and reported (`ctx.tolerated`), as serde's `skip_invalid` does.
    """

    path: str
    items: str
    hint: str
    item: str
    dispatch: Dispatch | None
    dispatched: str | None
    skip_invalid: bool
    hold_gc: str | None = None
    """For items that build objects (GC-tracked survivors): the held-flag local; a long array
    (serde's `HOLD_FROM` items or more) is decoded with the cyclic collector held off."""


@dataclass(frozen=True)
class ObjectPlan:
    """How an object decoder tells its fields from unknown keys without a set operation.

    A local `n` counts the keys of `obj` besides the tag, plus one per absent optional field
    (the decoder adds it): it equals the number of fields exactly when no key is unknown,
    since field wire names and the tag are distinct.
    """

    quick: str
    """A check that `obj` holds only its required fields (and tag), setting `n`: the decoder
    then sets every optional field absent at once; "" where there is nothing to gain."""
    count: str | None
    """The statement setting `n` where no quick check does (None: none needed)."""
    tail: str | None
    """The wire name of the last optional field, where the decoder first checks `tail_check`:
    every other key of `obj` is a known field, so this one is absent and none is unknown (it is
    `_meta` mostly: last, and rarely sent); None where no such check is made."""
    tail_check: str
    no_unknown: str
    """The check that `obj` has no key besides its fields and tag."""


# What types.py always imports from serde: the public names it re-exports, and two it uses
# in every package (the absent-key sentinel, the constructor bypassing __init__).
_SERDE_ALWAYS = {
    **{n: n for n in ("UNSET", "DecodeContext", "DecodeError", "JsonObject", "LenientWarning", "PathT", "Unset")},
    **{n: n for n in ("Wire", "dumps", "format_path", "loads", "or_none")},
    "MISSING": serde_alias("MISSING"),
    "new": serde_alias("new"),
}


class DecodePlanner(TypeView):
    def __init__(self, package: Package) -> None:
        super().__init__(package)
        self.used: set[str] = set()
        """The serde helpers named through `serde` so far (collected by `serde_imports`)."""

    def serde(self, name: str) -> str:
        """How types.py names serde's helper `name` (imported directly: `serde_imports`)."""
        self.used.add(name)
        return serde_alias(name)

    def dec(self, t: TypeExpr, v: str, p: str) -> str:
        """An expression decoding JSON value `v` at path `p` (raises DecodeError)."""
        plan = self._plan(t, v, p)
        if plan.cond is None:
            return plan.call or plan.value
        otherwise = plan.call or (
            f"{self.serde('enum_fail')}({p}, {plan.enum!r}, {v})"
            if plan.enum
            else f"{self.serde('fail')}({p}, {plan.expected!r}, {v})"
        )
        return f"{plan.value} if {plan.cond} else {otherwise}"

    def plan(self, f: Field, index: int = 0) -> DecodePlan:
        """How the decoder checks a present, non-null field value `v` (see DecodePlan).

        A field holding a tagged union looks its variant decoder up inline (one call less on
        the hot path); anything unusual (no tag, an unknown one) goes through the union's
        decoder. `index` keeps the names this binds distinct per field (mypy fixes a local's
        type at its first assignment).
        """
        p = f"(path, {f.wire!r})"
        plan = self._plan(f.type, "v", p)
        t = self.alias_target(f.type)
        if isinstance(t, ListOf):
            return DecodePlan("v.__class__ is list", "v", plan.expected, plan.call, loop=self._loop(t, index))
        dispatch = None if f.lenient else self._dispatch(t, "v", index)
        if dispatch is None:
            return plan
        return DecodePlan(None, "v", plan.expected, f"{dispatch.decoder}(v, {p}, ctx)", dispatch=dispatch)

    def _dispatch(self, t: TypeExpr, v: str, index: int) -> Dispatch | None:
        """For a tagged union: how `v`'s variant decoder is looked up inline; else None."""
        target = self.defs.get(t.name) if isinstance(t, Named) else None
        if not isinstance(target, UnionDef) or target.objects is None or target.objects.tag is None:
            return None
        hint = f"{self.serde('Decodes')}[{target.name}]"
        return Dispatch(
            v, target.objects.tag, f"t{index}", f"_{target.name}_TAGS", f"d{index}", hint, f"_d_{target.name}"
        )

    def _loop(self, t: ListOf, index: int) -> ListLoop:
        """An array field decoded in place (see ListLoop); the path local is built once."""
        p = f"p{index}"
        item = self.alias_target(t.item)
        dispatch = self._dispatch(item, "x", index)
        target = self.defs.get(item.name) if isinstance(item, Named) else None
        builds = isinstance(item, (ListOf, MapOf)) or isinstance(target, (ObjectDef, UnionDef))
        if builds:
            self.used |= {"gc_hold", "gc_release", "HOLD_FROM"}
        return ListLoop(
            path=p,
            items=f"items{index}",
            hint=self.hint(t),
            item=self.dec(item, "x", f"({p}, i)"),
            dispatch=dispatch,
            dispatched=f"{dispatch.decoder}(x, ({p}, i), ctx)" if dispatch else None,
            skip_invalid=t.skip_invalid,
            hold_gc=f"held{index}" if builds else None,
        )

    def _plan(self, t: TypeExpr, v: str, p: str) -> DecodePlan:
        """The one place that decides how a value of type `t` is checked and decoded."""
        t = self.alias_target(t)
        if isinstance(t, Scalar):
            if t.kind == "json":
                return DecodePlan(None, v, "", None)
            if t.kind == "null":
                return DecodePlan(f"{v} is None", "None", "null", None)
            if t.kind in _CHECKS:
                return DecodePlan(f"{v}.__class__ is {_CHECKS[t.kind]}", v, _NAMES[t.kind], None)
            fn = self.serde("as_int" if t.kind == "int" else "as_float")
            return DecodePlan(f"{v}.__class__ is {t.kind}", v, _NAMES[t.kind], f"{fn}({v}, {p})")
        if isinstance(t, LiteralOf):
            expected = " | ".join(t.values)
            if len(t.values) == 1:
                # Only a string equals the one value; the literal itself is the decoded value,
                # so type checkers see `Literal[...]` without a cast.
                return DecodePlan(f"{v} == {t.values[0]!r}", repr(t.values[0]), expected, None)
            # Tuple membership compares with ==, so any JSON value may be tested; `v` stays
            # un-narrowed (Any) for mypy, pyright narrows it to the Literal: both accept it.
            return DecodePlan(f"{v} in {t.values!r}", v, expected, None)
        if isinstance(t, ListOf):
            # skip_invalid drops invalid items and raises only for a non-list.
            helper = self.serde("skip_invalid" if t.skip_invalid else "list_of")
            return DecodePlan(None, v, "array", f"{helper}({v}, {p}, ctx, {self.fn(t.item)})")
        if isinstance(t, MapOf):
            return DecodePlan(None, v, "object", f"{self.serde('map_of')}({v}, {p}, ctx, {self.fn(t.value)})")
        target = self.defs.get(t.name)
        if isinstance(target, EnumDef):
            cls = "str" if target.base == "str" else "int"
            if target.open:
                return DecodePlan(f"{v}.__class__ is {cls}", v, _NAMES[target.base], None)
            # _VALUES maps each value to itself, typed as the Literal (no cast call to pay).
            cond = f"{v}.__class__ is {cls} and {v} in _{t.name}_VALUES"
            return DecodePlan(cond, f"_{t.name}_VALUES[{v}]", f"a known {t.name}", None, enum=t.name)
        return DecodePlan(None, v, t.name, f"_d_{t.name}({v}, {p}, ctx)")

    def failure(self, f: Field) -> str:
        """The statement for a value that failed its inline check."""
        plan = self.plan(f)
        p = f"(path, {f.wire!r})"
        if f.lenient:
            return f"inst.{f.py} = {self.serde('tolerate')}(ctx, {p}, {plan.expected!r}, v, {self.fallback(f)})"
        if plan.enum is not None:
            return f"{self.serde('enum_fail')}({p}, {plan.enum!r}, v)"
        return f"{self.serde('fail')}({p}, {plan.expected!r}, v)"

    def object_plan(self, o: ObjectDef) -> ObjectPlan:
        """How `o`'s decoder finds out whether `obj` holds unknown fields (see ObjectPlan)."""
        wires = [f.wire for f in o.fields] + ([o.tag.wire] if o.tag else [])
        assert len(set(wires)) == len(wires), f"{o.name}: a wire name twice"  # counting needs distinct keys
        size = f"len(obj) - ({o.tag.wire!r} in obj)" if o.tag else "len(obj)"
        fields, required = len(o.fields), sum(f.required for f in o.fields)
        if fields == required:
            return ObjectPlan("", None, None, "", f"{size} == {fields}")
        quick = "" if o.one_of_keys else f"(n := {size}) == {required}"
        optional = [f for f in o.fields if not f.required]
        # With one optional field the quick check already made the tail check.
        tail = optional[-1].wire if len(optional) > 1 and not o.one_of_keys else None
        return ObjectPlan(quick, None if quick else f"n = {size}", tail, f"n == {fields - 1}", f"n == {fields}")

    def fallback(self, f: Field) -> str:
        """What a malformed lenient value becomes."""
        return self.default(f.on_error) if f.on_error is not None else "UNSET"

    def enum_dec(self, e: EnumDef) -> str:
        return self.dec(Named(e.name, "enum"), "obj", "None")

    def fn(self, t: TypeExpr) -> str:
        """A decoder function `(value, path, ctx)` for list items and union variants."""
        t = self.alias_target(t)
        if isinstance(t, Named) and not isinstance(self.defs.get(t.name), EnumDef):
            return f"_d_{t.name}"
        if isinstance(t, Scalar):
            return self.serde(f"d_{t.kind}")
        return f"lambda x, p, ctx: {self.dec(t, 'x', 'p')}"

    # -- imports -------------------------------------------------------------------
    def serde_imports(self) -> list[tuple[str, str]]:
        """`(name, alias)` for each `from .serde import name as alias` of types.py, in isort's
        order (constants, classes, functions): the names it re-exports, and each helper its
        code uses, found by planning what the template lays out (so none is unused).

        Direct imports, not `from . import serde`: that would make types.py import the package
        `__init__` and so share an import cycle with the role modules (mypy then checks the
        agent's and the client's identical types.py separately).
        """
        self.used = set()
        defs = self.pkg.definitions
        objects = [d for d in defs if isinstance(d, ObjectDef)]
        if objects:  # every object decoder and class (types.py.jinja)
            self.used |= {"plain_object", "fail", "extra_fields", "extra_field", "merge_extra", "NO_EXTRA"}
        for o in objects:
            for index, f in enumerate(o.fields, 1):
                plan = self.plan(f, index)
                if f.required:
                    self.used.add("missing")
                if plan.cond and not plan.call:
                    self.failure(f)
                if f.lenient and plan.call:
                    self.used.add("tolerated")
            if any(self.is_open(f.type) for f in o.fields):
                self.used.add("open_json")  # the encoder's check of an open field (Renderer.enc)
        for e in defs:
            if isinstance(e, EnumDef):
                self.enum_dec(e)
        for a in defs:
            if isinstance(a, AliasDef):
                self.dec(a.target, "obj", "path")
            elif isinstance(a, UnionDef):
                self._union_names(a)
            if isinstance(a, (AliasDef, UnionDef)):
                self.used.add("DEFAULT_CTX")
            if isinstance(a, AliasDef) and self.is_open(a.target):
                self.used.add("open_json")
        names = {**_SERDE_ALWAYS, **{n: serde_alias(n) for n in self.used}}
        return sorted(names.items(), key=lambda i: (not i[0].isupper(), i[0][0].islower(), i[0]))

    def is_open(self, t: TypeExpr) -> bool:
        """`t` holds an open JSON value somewhere (its encoder calls `open_json`)."""
        t = self.alias_target(t)
        if isinstance(t, Scalar):
            return t.kind in ("json", "object")
        if isinstance(t, ListOf):
            return self.is_open(t.item)
        return isinstance(t, MapOf) and self.is_open(t.value)

    def _union_names(self, a: UnionDef) -> None:
        """The helpers a union's decoder and encoder use (types.py.jinja)."""
        self.used.add("fail")
        o = a.objects
        if o:
            self.used.add("is_object")
            if o.tag:
                self.used.add("Decodes")
                for v in o.tagged:
                    self.fn(v.type)
            if o.unknown_to_fallback and o.fallback:
                self.dec(o.fallback.type, "obj", "path")
            for v in [*o.keyed, *([o.fallback] if o.fallback else [])]:
                self.dec(v.type, "obj", "path")
        for v in [*[v for v in a.arrays if v.key], *a.arrays[:1]]:
            self.dec(v.type, "obj", "path")
        for v in a.scalars:
            if v.json_type != "null":
                self.dec(v.type, "obj", "path")
        if a.scalars or a.arrays:
            self.used.add("encode_any")
