"""`acp-codegen diff OLD NEW`: what changed in the API between two schema versions, and whom it breaks.

Both schemas go through the normal pipeline up to the IR (`load` -> `build_package`) and are compared
there, where names and shapes are already decided: methods by wire name, types by Python name, fields
by wire name, enum values by value, union variants by tag value (untagged variants by their type).

Who sends and who receives each type
------------------------------------
From each schema's method table: a method's params (also those of its notification form, if any) are
encoded by the side that calls it and decoded by the side that handles it (`handled_by`; `both`: both
sides); its result goes the other way. Types reachable from those (through fields, items, variants,
alias targets) inherit the directions, collected over all methods; a type no method reaches (JSON-RPC
envelopes, `Error`, base types that variants inline) counts as sent and received by both sides. Old and
new schema combine. *Senders* encode a type, *receivers* decode it, *users* are both.

What "breaking for X" means
---------------------------
A change is breaking for side X (agent or client) when an X built on the OLD schema has work to do
once its peer moves to NEW: it may fail against that peer on the wire (sends what the peer rejects,
or cannot decode what the peer may now send), or its code stops type-checking when it regenerates
(something it uses is gone or must now be supplied). Judged against acp-codegen bindings, which keep
unknown fields, unknown tags of tagged unions (as `Unknown*` values) and unknown open-enum values.

Rules:

- method added: nobody (callers check capabilities; old handlers answer -32601), unless it is a
  baseline method every implementation must handle: then its handler.
- method removed; request <-> notification; params, result or notification-form params type changed:
  caller and handler.
- handling side changed: each side that loses a role (calling or handling) or must now handle a
  baseline method.
- stability changed (unstable <-> stable); type added; optional field added: nobody.
- type removed or its kind changed (object/union/enum/alias); field removed or its Python attribute
  renamed; enum value removed; union variant removed or its type or tag changed; union tag changed: users.
- required field added; optional -> required; nullable -> not nullable; type narrowed: senders.
- required -> optional; not nullable -> nullable; type widened (int -> float, more Literal values,
  -> str or any): receivers. Any other type change: users.
- enum value added: receivers if the enum was closed. Enum open -> closed: senders; closed -> open:
  receivers.
- union variant added: receivers, unless the variant is tagged and the old union kept unknown tags.

Not reported: docs, defaults, leniency (`x-deserialize-*`), JSON-RPC envelope params (any JSON in the
IR). A rename shows as a removal plus an addition. Capability gating (peers MUST NOT use a feature the
other side did not opt into) is invisible in the schema: the structural risk is reported, with a reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from . import ir
from .build import build_package
from .load import load, locate
from .validate import validate

SIDES = ("agent", "client")
BOTH = frozenset(SIDES)
NOBODY: frozenset[str] = frozenset()

# The documented `kind` vocabulary, in the order the changes of one target are listed in.
KINDS = (
    *("method-added", "method-removed", "method-kind-changed", "method-params-changed", "method-result-changed"),
    *("method-notification-changed", "method-side-changed", "method-stability-changed"),
    *("type-added", "type-removed", "type-kind-changed", "type-stability-changed", "alias-type-changed"),
    *("field-added", "field-removed", "field-renamed", "field-required-changed", "field-nullable-changed"),
    *("field-type-changed", "enum-value-added", "enum-value-removed", "enum-open-changed", "union-tag-changed"),
    *("variant-added", "variant-removed", "variant-tag-changed", "variant-type-changed"),
)
_RANK = {kind: i for i, kind in enumerate(KINDS)}


@dataclass(frozen=True)
class Change:
    """One API change. `target` is a type name or a method's wire name; `member` a field's wire name,
    an enum value or a union variant (`tag=value`, or the variant's type when untagged)."""

    kind: str
    target: str
    member: str | None = None
    old: str | None = None
    new: str | None = None
    breaking: frozenset[str] = NOBODY  # the sides ("agent", "client") it breaks
    reason: str = ""  # why it breaks them; empty when it breaks nobody

    @property
    def section(self) -> str:
        return "methods" if self.kind.startswith("method-") else "types"


@dataclass(frozen=True)
class SchemaInfo:
    label: str  # as given on the command line
    release: str
    unstable: bool


@dataclass(frozen=True)
class DiffReport:
    old: SchemaInfo
    new: SchemaInfo
    changes: tuple[Change, ...]

    def breaking(self, side: str | None = None) -> tuple[Change, ...]:
        """The breaking changes, for either side or only for `side`."""
        return tuple(c for c in self.changes if (side in c.breaking if side else c.breaking))


def diff_schemas(old: str, new: str, unstable: bool = False) -> DiffReport:
    """Compare two schemas given like --schema (bundled name, directory or schema.json path)."""
    a, b = (_package(arg, unstable) for arg in (old, new))
    return DiffReport(SchemaInfo(old, a.release, unstable), SchemaInfo(new, b.release, unstable), diff_packages(a, b))


def diff_packages(old: ir.Package, new: ir.Package) -> tuple[Change, ...]:
    changes = [*_methods(old, new), *_types(old, new)]
    changes.sort(key=lambda c: (c.section != "methods", c.target, _RANK[c.kind], c.member or ""))
    return tuple(changes)


def handlers(m: ir.Method) -> frozenset[str]:
    return BOTH if m.handled_by == "both" else frozenset({m.handled_by})


def callers(m: ir.Method) -> frozenset[str]:
    return BOTH if m.handled_by == "both" else BOTH - {m.handled_by}


def _shape(m: ir.Method) -> str:
    side = "both sides" if m.handled_by == "both" else m.handled_by
    types = f"{m.params} -> {m.result}" if m.result else str(m.params)
    also = f"; also as a notification ({m.notification_params})" if m.notification_params else ""
    return f"{m.kind} handled by {side} ({types}{also})"


def _methods(old: ir.Package, new: ir.Package) -> Iterator[Change]:
    before = {m.wire: m for m in old.methods}
    after = {m.wire: m for m in new.methods}
    for wire in sorted(before.keys() | after.keys()):
        a, b = before.get(wire), after.get(wire)
        if b is not None and a is None:
            must = NOBODY if b.optional else handlers(b)
            yield Change("method-added", wire, None, None, _shape(b), must, _BASELINE if must else "")
        elif a is not None and b is None:
            why = "callers get -32601; handler stubs and caller proxies disappear"
            yield Change("method-removed", wire, old=_shape(a), breaking=BOTH, reason=why)
        elif a is not None and b is not None:
            yield from _method_changes(wire, a, b)


def _method_changes(wire: str, a: ir.Method, b: ir.Method) -> Iterator[Change]:
    why = "caller and handler no longer match"
    if a.kind != b.kind:
        yield Change("method-kind-changed", wire, None, a.kind, b.kind, BOTH, why)
    if a.params != b.params:
        yield Change("method-params-changed", wire, None, a.params, b.params, BOTH, why)
    if a.result != b.result and a.kind == b.kind:
        yield Change("method-result-changed", wire, None, a.result, b.result, BOTH, why)
    if a.notification_params != b.notification_params:
        old, new = a.notification_params or "(none)", b.notification_params or "(none)"
        yield Change("method-notification-changed", wire, None, old, new, BOTH, why)
    if a.handled_by != b.handled_by:
        gained = NOBODY if b.optional else handlers(b) - handlers(a)
        hit = (handlers(a) - handlers(b)) | (callers(a) - callers(b)) | gained
        why = "a side loses its role or must now handle a baseline method" if hit else ""
        yield Change("method-side-changed", wire, None, a.handled_by, b.handled_by, hit, why)
    if a.unstable != b.unstable:
        yield Change("method-stability-changed", wire, None, _STABILITY[a.unstable], _STABILITY[b.unstable])


_STABILITY = {True: "unstable", False: "stable"}
_REQUIRED = {True: "required", False: "optional"}
_NULLABLE = {True: "nullable", False: "not nullable"}
_OPEN = {True: "open", False: "closed"}
_BASELINE = "a baseline method: every implementation must handle it"


def _refs(t: ir.TypeExpr) -> Iterator[str]:
    while isinstance(t, (ir.ListOf, ir.MapOf)):
        t = t.item if isinstance(t, ir.ListOf) else t.value
    yield from [t.name] if isinstance(t, ir.Named) else []


def _children(d: ir.Definition) -> Iterator[str]:
    if isinstance(d, ir.ObjectDef):
        for f in d.fields:
            yield from _refs(f.type)
    elif isinstance(d, ir.UnionDef):
        for v in d.variants:
            yield from _refs(v.type)
    elif isinstance(d, ir.AliasDef):
        yield from _refs(d.target)


def usage(pkg: ir.Package) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Type name -> (sides that encode it, sides that decode it); unreachable types: both, both."""
    defs = {d.name: d for d in pkg.definitions}
    send: dict[str, set[str]] = {}
    recv: dict[str, set[str]] = {}
    for m in pkg.methods:
        sent = ((m.params, callers(m), handlers(m)), (m.notification_params, callers(m), handlers(m)))
        for root, s, r in (*sent, (m.result, handlers(m), callers(m))):
            stack = [root] if root else []
            while stack:
                name = stack.pop()
                if name not in defs or (s <= send.get(name, set()) and r <= recv.get(name, set())):
                    continue
                send.setdefault(name, set()).update(s)
                recv.setdefault(name, set()).update(r)
                stack.extend(_children(defs[name]))
    return {n: (frozenset(send.get(n, BOTH)), frozenset(recv.get(n, BOTH))) for n in defs}


def show(t: ir.TypeExpr) -> str:
    """A type as Python spells it in the generated bindings."""
    if isinstance(t, ir.Scalar):
        return {"json": "Any", "object": "dict[str, Any]", "null": "None"}.get(t.kind, t.kind)
    if isinstance(t, ir.Named):
        return t.name
    if isinstance(t, ir.ListOf):
        return f"list[{show(t.item)}]"
    if isinstance(t, ir.MapOf):
        return f"dict[str, {show(t.value)}]"
    return "Literal[" + ", ".join(f'"{v}"' for v in t.values) + "]"


def _kind(d: ir.Definition) -> str:
    return f"enum of {d.base}" if isinstance(d, ir.EnumDef) else d.kind


def _field(f: ir.Field) -> str:
    return f"{show(f.type)}{' | None' if f.nullable else ''}, {_REQUIRED[f.required]}"


def _types(old: ir.Package, new: ir.Package) -> Iterator[Change]:
    before = {d.name: d for d in old.definitions}
    after = {d.name: d for d in new.definitions}
    use_old, use_new = usage(old), usage(new)
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if b is not None and a is None:
            yield Change("type-added", name, new=_kind(b))
        elif a is not None and b is None:
            send, recv = use_old[name]
            yield Change("type-removed", name, old=_kind(a), breaking=send | recv, reason="code using it breaks")
        elif a is not None and b is not None:
            send = use_old[name][0] | use_new[name][0]
            recv = use_old[name][1] | use_new[name][1]
            yield from _TypeDiff(name, send, recv, before, after).run(a, b)


# (kind, the new value of the flag) -> (who it breaks, why)
_FLAG_RULES = {
    ("field-required-changed", True): ("send", "old senders may omit it; new receivers reject that"),
    ("field-required-changed", False): ("recv", "new senders may omit it; old receivers require it"),
    ("field-nullable-changed", True): ("recv", "new senders may send null; old receivers reject it"),
    ("field-nullable-changed", False): ("send", "old senders may send null; new receivers reject it"),
    ("enum-open-changed", True): ("recv", "new senders may send any value; old receivers reject unknown ones"),
    ("enum-open-changed", False): ("send", "old senders may send unknown values; new receivers reject them"),
}
_GONE = "code using it breaks"


@dataclass(frozen=True)
class _TypeDiff:
    """Compares the two versions of one type, knowing who sends and who receives it."""

    name: str
    send: frozenset[str]
    recv: frozenset[str]
    before: dict[str, ir.Definition]
    after: dict[str, ir.Definition]

    def change(self, kind: str, member: str | None, old: str | None, new: str | None, hit: str, why: str) -> Change:
        """A change that breaks `hit` ("send", "recv", "users" or "" for nobody), because `why`."""
        sides = {"send": self.send, "recv": self.recv, "users": self.send | self.recv}.get(hit, NOBODY)
        return Change(kind, self.name, member, old, new, sides, why if sides else "")

    def flag(self, kind: str, member: str | None, labels: dict[bool, str], old: bool, new: bool) -> Iterator[Change]:
        if old != new:
            yield self.change(kind, member, labels[old], labels[new], *_FLAG_RULES[kind, new])

    def run(self, a: ir.Definition, b: ir.Definition) -> Iterator[Change]:
        if a.unstable != b.unstable:
            yield self.change("type-stability-changed", None, _STABILITY[a.unstable], _STABILITY[b.unstable], "", "")
        if _kind(a) != _kind(b):
            yield self.change("type-kind-changed", None, _kind(a), _kind(b), "users", _GONE)
        elif isinstance(a, ir.ObjectDef) and isinstance(b, ir.ObjectDef):
            yield from self.fields(a, b)
        elif isinstance(a, ir.EnumDef) and isinstance(b, ir.EnumDef):
            yield from self.enum(a, b)
        elif isinstance(a, ir.UnionDef) and isinstance(b, ir.UnionDef):
            yield from self.union(a, b)
        elif isinstance(a, ir.AliasDef) and isinstance(b, ir.AliasDef):
            yield from self.retyped("alias-type-changed", None, a.target, b.target)

    def fields(self, a: ir.ObjectDef, b: ir.ObjectDef) -> Iterator[Change]:
        before = {f.wire: f for f in a.fields}
        after = {f.wire: f for f in b.fields}
        for wire in sorted(before.keys() | after.keys()):
            x, y = before.get(wire), after.get(wire)
            if y is not None and x is None:
                why = "senders must supply it; new receivers reject messages without it"
                yield self.change("field-added", wire, None, _field(y), "send" if y.required else "", why)
            elif x is not None and y is None:
                why = _GONE + ("; old receivers require it" if x.required else "")
                yield self.change("field-removed", wire, _field(x), None, "users", why)
            elif x is not None and y is not None:
                if x.py != y.py:
                    yield self.change("field-renamed", wire, x.py, y.py, "users", _GONE)
                yield from self.flag("field-required-changed", wire, _REQUIRED, x.required, y.required)
                yield from self.flag("field-nullable-changed", wire, _NULLABLE, x.nullable, y.nullable)
                yield from self.retyped("field-type-changed", wire, x.type, y.type)

    def enum(self, a: ir.EnumDef, b: ir.EnumDef) -> Iterator[Change]:
        before = {str(v.value) for v in a.values}
        after = {str(v.value) for v in b.values}
        for value in sorted(before - after):
            yield self.change("enum-value-removed", value, None, None, "users", _GONE)
        for value in sorted(after - before):
            why = "closed enum: old receivers reject the new value"
            yield self.change("enum-value-added", value, None, None, "" if a.open else "recv", why)
        yield from self.flag("enum-open-changed", None, _OPEN, a.open, b.open)

    def union(self, a: ir.UnionDef, b: ir.UnionDef) -> Iterator[Change]:
        tag_a = a.objects.tag if a.objects else None
        tag_b = b.objects.tag if b.objects else None
        if tag_a and tag_b and tag_a != tag_b:
            yield self.change("union-tag-changed", None, tag_a, tag_b, "users", "variants are routed by it")
        before, after = _variants(a), _variants(b)
        keeps_unknown = a.objects is not None and a.objects.unknown_class is not None
        # The same variant type under another tag (or newly tagged) is one change, not a removal + addition.
        gone, new = before.keys() - after.keys(), after.keys() - before.keys()
        moved = {k: j for k in gone for j in new if _norm(before[k].type) == _norm(after[j].type)}
        for k, j in sorted(moved.items()):
            tags = (
                k if tag_a and before[k].tag_value else "untagged",
                j if tag_b and after[j].tag_value else "untagged",
            )
            yield self.change("variant-tag-changed", show(before[k].type), *tags, "users", "variants are routed by it")
        for key in sorted((before.keys() | after.keys()) - moved.keys() - set(moved.values())):
            x, y = before.get(key), after.get(key)
            if y is not None and x is None:
                fallback = a.objects.fallback if a.objects else None
                why = f"old receivers read it as {show(fallback.type)}" if fallback else "old receivers reject it"
                hit = "" if tag_b and y.tag_value is not None and keeps_unknown else "recv"
                yield self.change("variant-added", key, None, show(y.type), hit, why)
            elif x is not None and y is None:
                yield self.change("variant-removed", key, show(x.type), None, "users", _GONE)
            elif x is not None and y is not None:
                yield from self.retyped("variant-type-changed", key, x.type, y.type)

    def retyped(self, kind: str, member: str | None, x: ir.TypeExpr, y: ir.TypeExpr) -> Iterator[Change]:
        if _norm(x) == _norm(y):  # the same name: changes inside it are reported on its own definition
            return
        rx, ry = _norm(x, self.before), _norm(y, self.after)
        if rx == ry:  # `str` <-> an alias of `str`
            return
        if _widens(rx, ry):
            hit, why = "recv", "widened: new senders may send values old receivers reject"
        elif _widens(ry, rx):
            hit, why = "send", "narrowed: old senders may send values new receivers reject"
        else:
            hit, why = "users", "incompatible type"
        yield self.change(kind, member, show(x), show(y), hit, why)


def _variants(u: ir.UnionDef) -> dict[str, ir.Variant]:
    """Variants by identity: `tag=value` when tagged, else the variant's type."""
    tag = u.objects.tag if u.objects else None
    return {(f"{tag}={v.tag_value}" if tag and v.tag_value is not None else show(v.type)): v for v in u.variants}


def _norm(t: ir.TypeExpr, aliases: dict[str, ir.Definition] | None = None, depth: int = 0) -> ir.TypeExpr:
    """Comparable form: Named by name only, list leniency and Literal order ignored; with `aliases`,
    aliases are replaced by what they alias (`SessionId` -> `str`)."""
    if isinstance(t, ir.Named):
        d = aliases.get(t.name) if aliases is not None else None
        if isinstance(d, ir.AliasDef) and depth < 20:
            return _norm(d.target, aliases, depth + 1)
        return ir.Named(t.name, "object")
    if isinstance(t, ir.ListOf):
        return ir.ListOf(_norm(t.item, aliases, depth))
    if isinstance(t, ir.MapOf):
        return ir.MapOf(_norm(t.value, aliases, depth))
    return ir.LiteralOf(tuple(sorted(t.values))) if isinstance(t, ir.LiteralOf) else t


def _widens(x: ir.TypeExpr, y: ir.TypeExpr) -> bool:
    """Every value of `x` is a value of `y` (and they differ)."""
    if y == ir.Scalar("json"):
        return True
    if isinstance(x, ir.Scalar) and isinstance(y, ir.Scalar):
        return (x.kind, y.kind) == ("int", "float")
    if isinstance(x, ir.LiteralOf):
        return set(x.values) <= set(y.values) if isinstance(y, ir.LiteralOf) else y == ir.Scalar("str")
    if isinstance(x, ir.MapOf):
        return y == ir.Scalar("object") or (isinstance(y, ir.MapOf) and _widens(x.value, y.value))
    return isinstance(x, ir.ListOf) and isinstance(y, ir.ListOf) and _widens(x.item, y.item)


def _package(schema_arg: str, unstable: bool) -> ir.Package:
    schema = load(locate(schema_arg, unstable))
    validate(schema)  # bad input is reported as problems, as for generation
    return build_package(schema, "agent", "acp", "acp-codegen diff")
