"""Reading JSON-schema shapes the way ACP releases have written them.

References come wrapped (`allOf: [{$ref}]`) or bare (`$ref` with sibling keywords); unions
as `oneOf` or `anyOf`; enums as const alternatives or an `enum` list. These helpers hide the
difference so the IR builder sees one shape per idea.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .errors import Problem
from .ir import (
    JsonType,
)
from .load import LoadedSchema

Prop = tuple[str, Any, bool, str]  # wire name, schema node, required, JSON pointer


def ptr_escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def alternatives(node: dict[str, Any]) -> tuple[str, list[Any]] | None:
    for key in ("oneOf", "anyOf"):
        value = node.get(key)
        if isinstance(value, list) and value:
            return key, value
    return None


def unwrap_ref(node: dict[str, Any], allow_props: bool = False) -> str | None:
    """`{$ref}` or `{allOf: [{$ref}]}` (with only annotations beside it) -> the $defs name."""
    ref = node.get("$ref")
    if ref is None:
        all_of = node.get("allOf")
        if not (isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict)):
            return None
        if ("properties" in node and not allow_props) or alternatives(node) is not None:
            return None
        ref = all_of[0].get("$ref")
    if not isinstance(ref, str):
        return None
    prefix = "#/$defs/"
    name = ref[len(prefix) :] if ref.startswith(prefix) else ref
    return name.replace("~1", "/").replace("~0", "~")


def find_tag(alts: list[Any]) -> str | None:
    """The one property that holds a string `const` in the alternatives (a union's tag), if any."""
    found: list[str] = []
    for alt in alts:
        if not isinstance(alt, dict):
            continue
        for prop, pnode in alt.get("properties", {}).items():
            if isinstance(pnode, dict) and isinstance(pnode.get("const"), str) and prop not in found:
                found.append(prop)
    return found[0] if len(found) == 1 else None


def const_of(alt: Any, tag: str | None) -> str | None:
    """The value an alternative gives its tag (`{"properties": {"type": {"const": "text"}}}`)."""
    if not tag or not isinstance(alt, dict):
        return None
    pnode = alt.get("properties", {}).get(tag)
    value = pnode.get("const") if isinstance(pnode, dict) else None
    return value if isinstance(value, str) else None


def enum_alternatives(alts: list[Any]) -> tuple[list[tuple[str | int, str]], bool, str] | None:
    """Const alternatives (+ at most one unconstrained catch-all) -> (values, open, base)."""
    values: list[tuple[str | int, str]] = []
    is_open = False
    bases: set[str] = set()
    for alt in alts:
        if not isinstance(alt, dict) or "properties" in alt or "$ref" in alt or "allOf" in alt:
            return None
        const = alt.get("const")
        if isinstance(const, bool):
            return None
        if isinstance(const, (str, int)):
            values.append((const, str(alt.get("description", ""))))
            bases.add("str" if isinstance(const, str) else "int")
        elif alt.get("type") in ("string", "integer") and "enum" not in alt and not is_open:
            is_open = True
            bases.add("str" if alt["type"] == "string" else "int")
        else:
            return None
    if not values or len(bases) != 1:
        return None
    return values, is_open, bases.pop()


def count_refs(defs: dict[str, Any]) -> Counter[str]:
    counts: Counter[str] = Counter()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                counts[ref[len("#/$defs/") :]] += 1
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(defs)
    return counts


def json_type_of(schema: LoadedSchema, node: Any, seen: frozenset[str] = frozenset()) -> JsonType | None:
    if not isinstance(node, dict):
        return None
    types = node.get("type")
    if isinstance(types, list):
        non_null = [t for t in types if t != "null"]
        types = non_null[0] if len(non_null) == 1 else None
    if isinstance(types, str) and types in ("object", "array", "string", "integer", "number", "boolean", "null"):
        return types  # type: ignore[return-value]
    if "properties" in node:
        return "object"
    ref = unwrap_ref(node, allow_props=True)
    if ref is not None and ref in schema.defs and ref not in seen:
        return json_type_of(schema, schema.defs[ref], seen | {ref})
    alts = alternatives(node)
    if alts is not None:
        found = {json_type_of(schema, a, seen) for a in alts[1]} - {"null"}
        return found.pop() if len(found) == 1 else None
    if isinstance(node.get("const"), str):
        return "string"
    return None


def collect_props(
    schema: LoadedSchema,
    node: dict[str, Any],
    pointer: str,
    problems: list[Problem],
    seen: frozenset[str] = frozenset(),
    optional: bool = False,
) -> list[Prop]:
    """Own properties + those pulled in by `allOf` refs + untagged mixin alternatives (optional)."""
    out: list[Prop] = []
    required = node.get("required", [])
    if not isinstance(required, list):
        required = []
    props = node.get("properties", {})
    if not isinstance(props, dict):
        problems.append(Problem("properties must be an object", schema.schema_file, f"{pointer}/properties"))
        props = {}
    for wire, pnode in props.items():
        out.append((wire, pnode, wire in required and not optional, f"{pointer}/properties/{ptr_escape(wire)}"))
    for i, part in enumerate(node.get("allOf", []) if isinstance(node.get("allOf"), list) else []):
        out.extend(_part_props(schema, part, f"{pointer}/allOf/{i}", problems, seen, optional))
    alts = alternatives(node)
    if alts is not None and "properties" in node:
        for i, part in enumerate(alts[1]):
            if isinstance(part, dict) and part.get("type") != "null":
                out.extend(_part_props(schema, part, f"{pointer}/{alts[0]}/{i}", problems, seen, True))
    return out


def _part_props(
    schema: LoadedSchema, part: Any, pointer: str, problems: list[Problem], seen: frozenset[str], optional: bool
) -> list[Prop]:
    if not isinstance(part, dict):
        return []
    ref = part.get("$ref")
    if isinstance(ref, str):
        name = ref.removeprefix("#/$defs/")
        if name not in schema.defs:
            problems.append(
                Problem(f"dangling $ref {ref!r}", schema.schema_file, pointer, "add the type or fix the $ref")
            )
            return []
        if name in seen:
            problems.append(
                Problem(f"$ref cycle through allOf at {name!r}", schema.schema_file, pointer, "break the cycle")
            )
            return []
        target = schema.defs[name]
        return collect_props(schema, target, f"/$defs/{ptr_escape(name)}", problems, seen | {name}, optional)
    return collect_props(schema, part, pointer, problems, seen, optional)


def mixin_groups(
    schema: LoadedSchema, node: dict[str, Any], seen: frozenset[str] = frozenset()
) -> tuple[tuple[str, ...], ...]:
    """For an object whose untagged `anyOf` alternatives were flattened into optional fields:
    the required keys of each alternative (a value must carry all keys of at least one)."""
    alts = alternatives(node)
    if alts is not None and "properties" in node:
        groups: list[tuple[str, ...]] = []
        for part in alts[1]:
            ref = unwrap_ref(part) if isinstance(part, dict) else None
            target = schema.defs.get(ref) if ref is not None else part
            required = target.get("required", []) if isinstance(target, dict) else []
            groups.append(tuple(r for r in required if isinstance(r, str)))
        if groups and all(groups):
            return tuple(groups)
    for part in node.get("allOf", []) if isinstance(node.get("allOf"), list) else []:
        ref = unwrap_ref(part) if isinstance(part, dict) else None
        if ref is not None and ref in schema.defs and ref not in seen:
            found = mixin_groups(schema, schema.defs[ref], seen | {ref})
            if found:
                return found
    return ()
