"""Stage 2a (unions) — how a oneOf/anyOf becomes a routed union in the IR.

A union is routed by a tag property (`const` in each variant, with or without a
`discriminator` keyword), by JSON type, or — for untagged objects — by a required key no
sibling variant has; an untagged variant may be the fallback for a missing tag. Variants are
never tried in order. The type builder (build_types) supplies the variants' types through
`TypeSource`; this module never imports it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Protocol

from .errors import Problem
from .ir import (
    AliasDef,
    Definition,
    ListOf,
    Named,
    ObjectDef,
    ObjectDispatch,
    Scalar,
    Tag,
    TypeExpr,
    UnionDef,
    Variant,
)
from .load import LoadedSchema
from .naming import pascal
from .shapes import alternatives, collect_props, const_of, find_tag, json_type_of, unwrap_ref

_TAKES_UNKNOWN = re.compile(r"unknown\b[^.]*\bdeserializ", re.IGNORECASE | re.DOTALL)


class TypeSource(Protocol):
    """What the union builder needs from the type builder (build_types.TypeBuilder)."""

    s: LoadedSchema
    out: dict[str, Definition]
    py: dict[str, str]
    tags: dict[str, Tag]
    problems: list[Problem]

    def type_expr(self, node: Any, pointer: str, hint: str) -> tuple[TypeExpr, bool]: ...

    def object_def(
        self,
        py: str,
        node: dict[str, Any],
        pointer: str,
        doc: str,
        unstable: bool,
        def_name: str | None = None,
        tag: Tag | None = None,
        extra: list[tuple[str, Any, bool, str]] | None = None,
    ) -> ObjectDef: ...

    def named(self, def_name: str) -> Named: ...

    def fresh(self, base: str, pointer: str) -> str: ...

    def resolve(self, py: str) -> Definition | None: ...

    def problem(self, what: str, pointer: str, fix: str = "") -> None: ...


class UnionBuilder:
    """Builds `UnionDef`s; the types of the variants come from the type builder it serves."""

    def __init__(self, types: TypeSource) -> None:
        self.t = types

    # -- unions ------------------------------------------------------------------------
    def union_def(
        self,
        py: str,
        node: dict[str, Any],
        pointer: str,
        doc: str,
        unstable: bool,
    ) -> UnionDef:
        alts = alternatives(node)
        assert alts is not None
        key, items = alts
        tag = find_tag(items)
        common_props = collect_props(self.t.s, {k: v for k, v in node.items() if k != key}, pointer, self.t.problems)
        variants: list[Variant] = []
        unknown = False
        for i, alt in enumerate(items):
            aptr = f"{pointer}/{key}/{i}"
            if not isinstance(alt, dict):
                self.t.problem("union variant must be an object", aptr)
                continue
            value = const_of(alt, tag) if tag else None
            title = str(alt.get("title", ""))
            if tag and value is None and tag in alt.get("properties", {}):
                unknown = True  # catch-all: `{"tag": {"type": "string"}}`, unknown values kept raw
                continue
            ref = unwrap_ref(alt, allow_props=True)
            own = [p for p in alt.get("properties", {}) if p != tag]
            jtype = json_type_of(self.t.s, alt)
            vdoc = str(alt.get("description", ""))
            if value is not None:
                cls = self._variant_class(py, alt, aptr, tag, value, ref, own, common_props, unstable)
                variants.append(Variant(Named(cls, "object"), "object", tag_value=value, doc=vdoc))
            elif jtype == "object" and ref is not None and not own and not common_props:
                variants.append(Variant(self.t.named(ref), "object", doc=vdoc))
            elif jtype == "object":
                base = py + pascal(title or (own[0] if own else "Object"))
                cls = self.t.fresh(base, aptr)
                self.t.out[cls] = self.t.object_def(cls, alt, aptr, vdoc, unstable, extra=common_props)
                variants.append(Variant(Named(cls, "object"), "object", doc=vdoc))
            elif jtype is None:
                texpr, _ = self.t.type_expr(alt, aptr, py + pascal(title or "Value"))
                if self._is_any(texpr):
                    # A variant that admits any JSON value (e.g. ExtRequest) makes the union opaque.
                    return UnionDef(py, pointer, doc, tuple(variants), None, (), (), unstable)
                self.t.problem("cannot tell what JSON type this union variant has", aptr, "give it a type or $ref")
            else:
                texpr, _ = self.t.type_expr(alt, aptr, py + pascal(title or jtype))
                variants.append(Variant(texpr, jtype, doc=vdoc))
        return self._dispatch(py, pointer, doc, variants, tag, unknown, unstable)

    def _variant_class(
        self,
        union: str,
        alt: dict[str, Any],
        pointer: str,
        tag: str | None,
        value: str,
        ref: str | None,
        own: list[str],
        common: list[tuple[str, Any, bool, str]],
        unstable: bool,
    ) -> str:
        assert tag is not None
        if ref is not None and self.t.tags.get(ref) == Tag(tag, value) and not own and not common:
            return self.t.py[ref]
        cls = self.t.fresh(union + pascal(value), pointer)
        self.t.out[cls] = self.t.object_def(
            cls, alt, pointer, str(alt.get("description", "")), unstable, tag=Tag(tag, value), extra=common
        )
        return cls

    def _dispatch(
        self,
        py: str,
        pointer: str,
        doc: str,
        variants: list[Variant],
        tag: str | None,
        unknown: bool,
        unstable: bool,
    ) -> UnionDef:
        variants = _merge_same(variants)
        objects = [v for v in variants if v.json_type == "object"]
        arrays = [v for v in variants if v.json_type == "array"]
        scalars = [v for v in variants if v.json_type not in ("object", "array")]
        seen_types: set[str] = set()
        for v in scalars:
            if v.json_type in seen_types:
                self.t.problem(
                    f"two union variants of JSON type {v.json_type} with different types: nothing in the"
                    " schema (a tag, a const, a required property) tells them apart",
                    pointer,
                    "merge them, or give them distinct consts",
                )
            seen_types.add(v.json_type)
        dispatch: ObjectDispatch | None = None
        if objects or (tag and unknown):
            tagged = tuple(v for v in objects if v.tag_value is not None)
            untagged = [v for v in objects if v.tag_value is None]
            keyed, fallback = self._keyed(untagged, pointer)
            if keyed is None:
                # Shapes cannot be told apart (e.g. JSON-RPC results): keep the raw JSON.
                return UnionDef(py, pointer, doc, tuple(variants), None, (), (), unstable)
            unknown_class = self.t.fresh("Unknown" + py, pointer) if tag else None
            # An unknown tag is kept raw (forward compatibility) unless the schema says the
            # fallback variant takes it ("Unknown `type` values ... deserialize into this
            # variant", SetSessionConfigOptionRequest) and the fallback leaves the tag open.
            to_fallback = (
                bool(tag)
                and not unknown
                and fallback is not None
                and _TAKES_UNKNOWN.search(fallback.doc) is not None
                and not self._declares(fallback, tag)
            )
            closed = bool(tag) and not unknown and fallback is None and not keyed
            dispatch = ObjectDispatch(tag, tagged, tuple(keyed), fallback, unknown_class, to_fallback, closed)
        if len(arrays) > 1:
            keyed_items, _ = self._keyed([replace(v, type=_item(v.type)) for v in arrays], pointer)
            if keyed_items is None:
                self.t.problem("array variants cannot be told apart by their items", pointer)
                keyed_items = []
            item_keys = {k.type: k.key for k in keyed_items}
            arrays = [replace(a, key=item_keys.get(_item(a.type))) for a in arrays]
        return UnionDef(py, pointer, doc, tuple(variants), dispatch, tuple(arrays), tuple(scalars), unstable)

    def _keyed(self, untagged: list[Variant], pointer: str) -> tuple[list[Variant] | None, Variant | None]:
        """Give each untagged object variant a required key no sibling has; one may be the fallback."""
        if len(untagged) <= 1:
            return [], (untagged[0] if untagged else None)
        required = [self._required_keys(v.type) for v in untagged]
        keyed: list[Variant] = []
        fallback: list[Variant] = []
        for i, v in enumerate(untagged):
            others = set().union(*(r for j, r in enumerate(required) if j != i))
            unique = [k for k in required[i] if k not in others]
            if unique:
                keyed.append(replace(v, key=unique[0]))
            else:
                fallback.append(v)
        if len(fallback) > 1:
            return None, None
        return keyed, (fallback[0] if fallback else None)

    def _declares(self, variant: Variant, wire: str | None) -> bool:
        """Whether the variant's class has a property (or tag) named `wire`."""
        if isinstance(variant.type, Named):
            target = self.t.resolve(variant.type.name)
            if isinstance(target, ObjectDef):
                return any(f.wire == wire for f in target.fields) or (
                    target.tag is not None and target.tag.wire == wire
                )
        return False

    def _required_keys(self, texpr: TypeExpr) -> list[str]:
        if isinstance(texpr, Named):
            target = self.t.resolve(texpr.name)
            if isinstance(target, ObjectDef):
                return [f.wire for f in target.fields if f.required] + ([target.tag.wire] if target.tag else [])
        return []

    def _is_any(self, texpr: TypeExpr) -> bool:
        if isinstance(texpr, Named) and texpr.kind == "alias":
            target = self.t.resolve(texpr.name)
            return isinstance(target, AliasDef) and self._is_any(target.target)
        return texpr == Scalar("json")


def _merge_same(variants: list[Variant]) -> list[Variant]:
    """Variants that decode to the same value are one variant (e.g. several `null` results of a
    response union): the first stands for all; only an untagged, unkeyed variant merges."""
    out: list[Variant] = []
    for v in variants:
        if v.tag_value is None and any(
            o.tag_value is None and (o.type, o.json_type) == (v.type, v.json_type) for o in out
        ):
            continue
        out.append(v)
    return out


def _item(texpr: TypeExpr) -> TypeExpr:
    return texpr.item if isinstance(texpr, ListOf) else texpr
