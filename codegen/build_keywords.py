"""Keyword forms for union params: where one field's value picks the variant (issue 29 §6).

`session/set_config_option` takes a union of two objects with the same fields, told apart by
`value` (a bool: the boolean variant; a string: the value-id variant). The proxy's keyword form
(`session_set_config_option(session_id=..., config_id=..., value=...)`) then builds the variant
the value's type picks, so the caller never names a variant class. Decided here, from the
schema's structure: every object variant has the same fields (name, required, nullable, default)
except one, whose type in each variant is a different JSON scalar.
"""

from __future__ import annotations

import dataclasses

from .ir import AliasDef, Definition, Field, KeywordUnion, Named, ObjectDef, PickedVariant, Scalar, TypeExpr, UnionDef

# Python classes a scalar's value is an instance of, in the order they must be tried (a bool is
# an int too, and an int is accepted where a number is).
_CHECKS = {"bool": ("bool",), "str": ("str",), "int": ("int",), "float": ("int", "float")}
_ORDER = ("bool", "str", "int", "float")


def with_keyword_unions(definitions: tuple[Definition, ...]) -> tuple[Definition, ...]:
    """`definitions`, each union whose variants one field tells apart carrying its KeywordUnion."""
    by_name = {d.name: d for d in definitions}
    out: list[Definition] = []
    for d in definitions:
        if isinstance(d, UnionDef):
            keywords = _keyword_union(d, by_name)
            if keywords is not None:
                d = dataclasses.replace(d, keywords=keywords)
        out.append(d)
    return tuple(out)


def _scalar(t: TypeExpr, by_name: dict[str, Definition]) -> str | None:
    while isinstance(t, Named):
        target = by_name.get(t.name)
        if not isinstance(target, AliasDef):
            return None
        t = target.target
    return t.kind if isinstance(t, Scalar) and t.kind in _CHECKS else None


def _shape(f: Field) -> tuple[object, ...]:
    return (f.py, f.wire, f.required, f.nullable, f.default)


def _keyword_union(u: UnionDef, by_name: dict[str, Definition]) -> KeywordUnion | None:
    o = u.objects
    if o is None or u.arrays or u.scalars:
        return None
    variants = [*o.tagged, *o.keyed, *([o.fallback] if o.fallback else [])]
    objects: list[ObjectDef] = []
    for v in variants:
        target = by_name.get(v.type.name) if isinstance(v.type, Named) else None
        if not isinstance(target, ObjectDef):
            return None
        objects.append(target)
    if len(objects) < 2:
        return None
    first = objects[0]
    if any([_shape(f) for f in x.fields] != [_shape(f) for f in first.fields] for x in objects):
        return None
    differing = [i for i, f in enumerate(first.fields) if any(x.fields[i].type != f.type for x in objects)]
    if len(differing) != 1:
        return None
    index = differing[0]
    kinds = [_scalar(x.fields[index].type, by_name) for x in objects]
    if None in kinds or len(set(kinds)) != len(kinds) or {"int", "float"} <= set(kinds):
        return None  # not told apart by the value's Python type alone
    picked = sorted(zip(kinds, objects, strict=True), key=lambda p: _ORDER.index(str(p[0])))
    return KeywordUnion(
        first.fields[index].py,
        tuple(PickedVariant(x.name, _CHECKS[str(kind)]) for kind, x in picked),
    )
