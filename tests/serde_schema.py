"""Standalone JSON schemas per `$defs` entry, adapted so hypothesis-jsonschema can generate from
them quickly and so "schema-valid" means what the protocol means.

`standalone(name)` is the literal construction: every `$defs` entry copied, `$ref` to `name`.
`for_hypothesis(schema)` then rewrites it. Every rewrite is listed here, with its reason:

Speed (hypothesis-jsonschema re-canonicalises `allOf`/`$ref` merges on every draw, which made a
single `SessionNotification` example take seconds):
- `$ref` is inlined and `allOf` is merged into its parent object schema (properties merged per
  key, `required` united, `type` intersected). Merging is exact for these schemas: the only
  `additionalProperties` in them is `true` (a no-op, dropped) or sits on a leaf map.
- `oneOf` whose branches are mutually exclusive (distinct `const`s, or distinct `const` values of
  one required tag property) becomes `anyOf`: same meaning, no "exactly one" filtering.

Keywords hypothesis-jsonschema does not support or that do not constrain values:
- annotations (`description`, `title`, `default`, `discriminator`, `x-*`, `$schema`) are dropped;
- `unevaluatedProperties: true` (only on open "other" variants) is a no-op and is dropped;
- objects get `maxProperties` = their declared properties + EXTRA_FIELDS (hypothesis-jsonschema
  otherwise adds ~5 random unknown keys to every nested object): a bound on the size of what is
  generated -- a subset of the valid values -- that keeps unknown fields in every example;
- integer `format`s (Rust types: uint16/uint32/uint64/int32/int64) become `minimum`/`maximum`
  bounds; `double` is dropped (any finite JSON number -- hypothesis-jsonschema never generates
  NaN/inf); `uri` is kept (hypothesis-jsonschema knows it).

Protocol meaning, where the literal schema is looser than the wire rule the issue mandates:
- a tagged union's untagged fallback branch (McpServer stdio, AuthMethod agent,
  MultiSelectItems titled, SetSessionConfigOptionRequest value_id) gets `not: {required: [tag]}`:
  unions are decoded by their tag whenever it is present (issue 3: "never try variants in order"),
  so an object that carries the tag is that tag's variant, not the fallback. (This only narrows
  what is generated. SetSessionConfigOptionRequest's prose even routes unknown tags with string
  values to value_id -- a generator gap pinned by an xfail test in test_serde_regressions.py.);
- a def whose generated class is a union variant that writes its tag (`TextContent` writes
  `"type": "text"`; these defs are only ever used inside that union) must carry that tag.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "v1" / "schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
DEFS: dict[str, Any] = SCHEMA["$defs"]
_DEFS_TEXT = json.dumps(DEFS)  # standalone() copies by parsing it: far faster than copy.deepcopy

ANNOTATIONS = frozenset({"description", "title", "default", "discriminator", "$schema", "examples"})
INT_FORMATS = {
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
KEEP_FORMATS = frozenset({"uri"})
EXTRA_FIELDS = 2  # unknown fields generated per object, at most (see _bound_size)


class CannotMerge(Exception):
    pass


def standalone(name: str) -> dict[str, Any]:
    """The def `name` as a schema of its own: all `$defs` copied, the root a `$ref` to it."""
    return {"$defs": json.loads(_DEFS_TEXT), "$ref": f"#/$defs/{name}"}


def for_hypothesis(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (as from `standalone`) with the rewrites listed in the module docstring."""
    defs = schema.get("$defs", {})
    root = {k: v for k, v in schema.items() if k != "$defs"}
    return _bound_size(_flatten(root, defs, ()), frozenset())


def with_tag(schema: dict[str, Any], tag: tuple[str, str] | None) -> dict[str, Any]:
    """Require the union tag a variant class always writes."""
    if tag is None:
        return schema
    wire, value = tag
    return _merge(schema, {"type": "object", "properties": {wire: {"const": value}}, "required": [wire]})


def class_tag(types: ModuleType, name: str) -> tuple[str, str] | None:
    obj = getattr(types, name)
    tag = getattr(obj, "_tag", None) if isinstance(obj, type) else None
    return tuple(tag) if tag else None  # type: ignore[return-value]


def _flatten(node: Any, defs: dict[str, Any], stack: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_flatten(x, defs, stack) for x in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    ref = node.pop("$ref", None)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ANNOTATIONS or key.startswith("x-"):
            continue
        if key == "unevaluatedProperties":
            assert value is True, "only `unevaluatedProperties: true` (a no-op) is expected"
            continue
        if key == "additionalProperties" and value is True:
            continue
        if key == "format":
            if value in INT_FORMATS:
                low, high = INT_FORMATS[value]
                out["minimum"] = max(low, node.get("minimum", low))
                out["maximum"] = min(high, node.get("maximum", high))
            elif value in KEEP_FORMATS:
                out["format"] = value
            continue
        if key in ("minimum", "maximum") and node.get("format") in INT_FORMATS:
            continue  # folded into the bounds above
        if key in ("properties", "$defs"):
            out[key] = {k: _flatten(v, defs, stack) for k, v in value.items()}
        elif key in ("allOf", "anyOf", "oneOf", "items", "not", "additionalProperties"):
            out[key] = _flatten(value, defs, stack)
        else:
            out[key] = value
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]
        assert ref == f"#/$defs/{name}" and name not in stack, f"unexpected or recursive $ref {ref}"
        out = _merge(out, _flatten(defs[name], defs, (*stack, name)))
    for part in out.pop("allOf", []):
        out = _merge(out, part)
    if "oneOf" in out and _exclusive(out["oneOf"]):
        out["anyOf"] = out.pop("oneOf")
    if "anyOf" in out:
        out["anyOf"] = _mark_fallbacks(out["anyOf"])
    return out


def _bound_size(node: Any, inherited: frozenset[str]) -> Any:
    """Add `maxProperties`: declared properties (with those of an enclosing schema whose
    `anyOf` branch this is) + EXTRA_FIELDS unknown ones. A size bound on what is generated
    (a subset of the valid values), not a change of meaning."""
    if isinstance(node, list):
        return [_bound_size(x, frozenset()) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    names = inherited | set(node.get("properties", {}))
    for key, value in node.items():
        if key == "not":
            out[key] = value  # bounding inside `not` would widen what it allows
        elif key == "properties":
            out[key] = {k: _bound_size(v, frozenset()) for k, v in value.items()}
        elif key in ("anyOf", "oneOf"):
            out[key] = [_bound_size(b, frozenset(names)) for b in value]
        else:
            out[key] = _bound_size(value, frozenset())
    nested = any(k in node for k in ("anyOf", "oneOf", "allOf"))
    if names and not nested and "maxProperties" not in node and node.get("type", "object") == "object":
        out["maxProperties"] = len(names) + EXTRA_FIELDS
    return out


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Both schemas at once (their conjunction); falls back to `allOf` where not exact."""
    try:
        return _merge_exact(a, b)
    except CannotMerge:
        return {"allOf": [a, b]}


def _merge_exact(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        if key not in out:
            out[key] = value
        elif out[key] == value:
            continue
        elif key == "properties":
            props = dict(out[key])
            for name, schema in value.items():
                props[name] = _merge(props[name], schema) if name in props else schema
            out[key] = props
        elif key == "required":
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key == "type":
            mine = {out[key]} if isinstance(out[key], str) else set(out[key])
            theirs = {value} if isinstance(value, str) else set(value)
            both = sorted(mine & theirs)
            if not both:
                raise CannotMerge
            out[key] = both[0] if len(both) == 1 else both
        else:
            raise CannotMerge
    return out


def _tag_of(branch: dict[str, Any]) -> tuple[str, Any] | None:
    for name, prop in branch.get("properties", {}).items():
        if isinstance(prop, dict) and "const" in prop and name in branch.get("required", []):
            return name, prop["const"]
    return None


def _exclusive(branches: list[Any]) -> bool:
    if all(isinstance(b, dict) and "const" in b for b in branches):
        return len({json.dumps(b["const"]) for b in branches}) == len(branches)
    tags = [_tag_of(b) for b in branches]
    if any(t is None for t in tags):
        return False
    return len({t[0] for t in tags if t}) == 1 and len({json.dumps(t[1]) for t in tags if t}) == len(tags)


def _mark_fallbacks(branches: list[Any]) -> list[Any]:
    tags = {t[0] for b in branches if isinstance(b, dict) and (t := _tag_of(b))}
    if len(tags) != 1:
        return branches
    (tag,) = tags
    out = []
    exclude = {"required": [tag]}
    for b in branches:
        fallback = isinstance(b, dict) and b.get("type", "object") == "object" and tag not in b.get("properties", {})
        if fallback and b.get("not") != exclude and exclude not in b.get("allOf", []):
            b = {**b, "not": exclude} if "not" not in b else {"allOf": [b, {"not": exclude}]}
        out.append(b)
    return out
