"""Stage 1b — validate: check the raw schema before the IR sees it.

`load` checks that the files are readable JSON of the right outline; this pass walks every
schema node and reports, with a JSON pointer, what would otherwise make a later stage crash,
hang or silently produce something odd:

- size limits (number of types, nodes, nesting depth), so a runaway schema fails in bounded time;
- malformed keywords (`type`, `properties`, `required`, `allOf`/`anyOf`/`oneOf`, `items`, ...);
- `$ref`s that are not local `#/$defs/Name` references, or that name a missing type;
- `$ref` cycles through aliases (`A -> B -> A` with no object or array in between);
- type names that give no Python name or the same one, property names that give no Python
  name or collide after snake_casing (a Python keyword is fine: `from` becomes `from_`);
- meta.json methods that no type describes.

The size limits and the per-node walk (`_Walk`) live here; the checks over all types at once
(names, alias cycles, method coverage) in validate_names. Every problem found is collected;
the IR only runs on a schema that passed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .errors import CodegenError
from .load import LoadedSchema
from .naming import snake, words
from .shapes import ptr_escape
from .validate_names import Report, check_alias_cycles, check_methods, check_type_names, python_type_name

__all__ = ["MAX_DEPTH", "MAX_NODES", "MAX_TYPES", "ptr_escape", "python_field_name", "python_type_name", "validate"]

# ACP releases have 170-270 types and at most ~8,300 JSON values nested 12 deep. The limits
# leave about 3x room (more for types) and bound the worst case to about a minute of CPU:
# generation time grows with the size of the output, ~45 ms per small type, ~3 ms per value.
MAX_TYPES = 1000
MAX_NODES = 25_000
MAX_DEPTH = 64

JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
# Keywords whose value is a schema, a map of name -> schema, a list of schemas, or a scalar.
_ONE_SCHEMA = tuple(
    "items additionalProperties not if then else contains propertyNames additionalItems unevaluatedItems "
    "unevaluatedProperties".split()
)
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_ALIAS_KEYS = ("allOf", "anyOf", "oneOf")
_STRINGS = ("title", "description", "format", "pattern", "$comment")
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_REF_PREFIX = "#/$defs/"


def python_field_name(wire: str) -> str:
    """The Python attribute of a property: `_meta` is `meta`, the rest snake_case."""
    return "meta" if wire == "_meta" else snake(wire)


def validate(schema: LoadedSchema) -> None:
    """Raise a `CodegenError` listing every problem with the raw schema; return if there is none."""
    report = Report(schema)
    if within_limits(report):
        walk = _Walk(report)
        walk.run()
        check_type_names(report)
        check_alias_cycles(report, walk.alias_edges)
        check_methods(report)
    if report.problems:
        raise CodegenError(report.problems)


def _json_size(value: Any, limit: int) -> tuple[int, int]:
    """(number of JSON values, nesting depth) of `value`; counting stops past `limit` values."""
    count, depth = 0, 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack and count <= limit:
        node, level = stack.pop()
        count += 1
        depth = max(depth, level)
        if isinstance(node, dict):
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, level + 1) for v in node)
    return count, depth


def within_limits(report: Report) -> bool:
    """Size limits first, so a runaway schema fails in bounded time."""
    defs = report.s.defs
    if len(defs) > MAX_TYPES:
        report.problem(
            f"schema defines {len(defs)} types; acp-codegen handles at most {MAX_TYPES}",
            "/$defs",
            "check this is the ACP schema (ACP releases define fewer than 300 types)",
        )
        return False
    total = 0
    deep: list[tuple[str, int]] = []
    for name, node in defs.items():
        count, depth = _json_size(node, MAX_NODES - total)
        total += count
        if total > MAX_NODES:
            report.problem(
                f"schema has more than {MAX_NODES} JSON values under $defs; acp-codegen handles at most that many",
                "/$defs",
                "check this is the ACP schema (ACP releases have fewer than 10,000)",
            )
            return False
        if depth > MAX_DEPTH:
            deep.append((name, depth))
    for name, depth in deep:
        report.problem(
            f"type {name!r} is nested {depth} levels deep; acp-codegen handles at most {MAX_DEPTH}",
            f"/$defs/{ptr_escape(name)}",
            "move the inner schemas into $defs entries of their own and $ref them",
        )
    return not deep


class _Walk:
    """Checks every schema node's keywords; records the `$ref`s a def's root aliases."""

    def __init__(self, report: Report) -> None:
        self.r = report
        self.s = report.s
        # def name -> refs reachable from its root without passing through an object or array
        self.alias_edges: dict[str, list[tuple[str, str]]] = {}

    def problem(self, what: str, pointer: str, fix: str = "") -> None:
        self.r.problem(what, pointer, fix)

    def run(self) -> None:
        for name, node in self.s.defs.items():
            pointer = f"/$defs/{ptr_escape(name)}"
            self.alias_edges[name] = []
            self._schema(node, pointer, name)

    # -- the walk ------------------------------------------------------------------------
    def _schema(self, node: Any, pointer: str, alias_of: str | None) -> None:
        """Check one schema node; `alias_of` is the def whose root this node still is."""
        if isinstance(node, bool):
            return
        if not isinstance(node, dict):
            self.problem(
                f"a schema must be a JSON object, found {_kind(node)}", pointer, "write the schema as an object"
            )
            return
        self._type(node, pointer)
        self._ref(node, pointer, alias_of)
        for key in _STRINGS:
            if key in node and not isinstance(node[key], str):
                self.problem(
                    f"{key} must be a string, found {_kind(node[key])}", f"{pointer}/{key}", f"quote the {key}"
                )
            elif key in ("title", "description") and (bad := _control_char(node.get(key, ""))):
                # Copied into docstrings, where a NUL would make the generated module unimportable.
                self.problem(
                    f"{key} contains the control character U+{ord(bad):04X}",
                    f"{pointer}/{key}",
                    "remove it (tabs and line breaks are fine)",
                )
        for key in _NUMBERS:
            if key in node and (isinstance(node[key], bool) or not isinstance(node[key], (int, float))):
                self.problem(
                    f"{key} must be a number, found {_kind(node[key])}", f"{pointer}/{key}", "write a JSON number"
                )
        for key in _COUNTS:
            value = node.get(key)
            if key in node and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                self.problem(
                    f"{key} must be a non-negative integer, found {_kind(value)}",
                    f"{pointer}/{key}",
                    "write a whole number, 0 or more",
                )
        if "enum" in node and (not isinstance(node["enum"], list) or not node["enum"]):
            self.problem("enum must be a non-empty array of values", f"{pointer}/enum", "list the allowed values")
        if "required" in node:
            self._required(node["required"], f"{pointer}/required")
        if "discriminator" in node:
            disc = node["discriminator"]
            if not isinstance(disc, dict) or not isinstance(disc.get("propertyName"), str):
                self.problem(
                    "discriminator must be an object with a string propertyName",
                    f"{pointer}/discriminator",
                    'write {"propertyName": "type"}',
                )
        for key, ptr, child in self._children(node, pointer):
            # allOf/anyOf/oneOf parts are still the def itself; anything else is inside a container.
            self._schema(child, ptr, alias_of if key in _ALIAS_KEYS else None)
        if isinstance(node.get("properties"), dict):
            self._property_names(node["properties"], f"{pointer}/properties")

    def _children(self, node: dict[str, Any], pointer: str) -> Iterator[tuple[str, str, Any]]:
        for key in _ONE_SCHEMA:
            if key not in node:
                continue
            value = node[key]
            if key == "items" and isinstance(value, list):  # draft-7 tuple form
                yield from ((key, f"{pointer}/items/{i}", v) for i, v in enumerate(value))
            else:
                yield key, f"{pointer}/{key}", value
        for key in _SCHEMA_MAPS:
            if key not in node:
                continue
            value = node[key]
            if not isinstance(value, dict):
                self.problem(
                    f"{key} must be an object of name -> schema, found {_kind(value)}",
                    f"{pointer}/{key}",
                    f'write "{key}": {{"name": {{...}}}}',
                )
                continue
            yield from ((key, f"{pointer}/{key}/{ptr_escape(k)}", v) for k, v in value.items())
        for key in _SCHEMA_LISTS:
            if key not in node:
                continue
            value = node[key]
            if not isinstance(value, list) or not value:
                self.problem(
                    f"{key} must be a non-empty array of schemas, found {_kind(value)}",
                    f"{pointer}/{key}",
                    f'write "{key}": [{{...}}, ...]',
                )
                continue
            if key in ("anyOf", "oneOf") and all(isinstance(v, dict) and v.get("type") == "null" for v in value):
                self.problem(
                    f"{key} has no alternative but null",
                    f"{pointer}/{key}",
                    'write {"type": "null"}, or add the non-null alternatives',
                )
                continue
            for i, v in enumerate(value):
                if isinstance(v, bool):
                    self.problem(
                        f"a boolean schema ({str(v).lower()}) is not supported in {key}",
                        f"{pointer}/{key}/{i}",
                        "write the alternative as a schema object",
                    )
                else:
                    yield key, f"{pointer}/{key}/{i}", v

    def _type(self, node: dict[str, Any], pointer: str) -> None:
        if "type" not in node:
            return
        value = node["type"]
        names = value if isinstance(value, list) else [value]
        fix = "use one of " + ", ".join(JSON_TYPES)
        if isinstance(value, list) and not value:
            self.problem("type must not be an empty array", f"{pointer}/type", fix)
        for i, name in enumerate(names):
            where = f"{pointer}/type/{i}" if isinstance(value, list) else f"{pointer}/type"
            if not isinstance(name, str):
                self.problem(f"type must be a string or an array of strings, found {_kind(name)}", where, fix)
            elif name not in JSON_TYPES:
                self.problem(f"unknown JSON-schema type {name!r}", where, fix)

    def _ref(self, node: dict[str, Any], pointer: str, alias_of: str | None) -> None:
        if "$ref" not in node:
            return
        ref = node["$ref"]
        where = f"{pointer}/$ref"
        if not isinstance(ref, str):
            self.problem(f"$ref must be a string, found {_kind(ref)}", where, 'write "#/$defs/Name"')
            return
        if not ref.startswith(_REF_PREFIX) or not ref[len(_REF_PREFIX) :]:
            self.problem(
                f"unsupported $ref {ref!r}: only local references to $defs are supported",
                where,
                'refer to a type of this schema as "#/$defs/Name"',
            )
            return
        target = ref[len(_REF_PREFIX) :].replace("~1", "/").replace("~0", "~")
        if target not in self.s.defs:
            self.problem(
                f"dangling $ref {ref!r}: there is no type {target!r} under $defs",
                where,
                f"add {target!r} under $defs or correct the reference",
            )
            return
        if alias_of is not None:
            self.alias_edges[alias_of].append((target, where))

    def _required(self, value: Any, pointer: str) -> None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.problem("required must be an array of property names", pointer, 'write "required": ["name", ...]')

    def _property_names(self, props: dict[str, Any], pointer: str) -> None:
        seen: dict[str, str] = {}
        for wire in props:
            where = f"{pointer}/{ptr_escape(wire)}"
            if wire != "_meta" and not words(wire):
                self.problem(
                    f"property name {wire!r} has no letters or digits to make a Python attribute name from",
                    where,
                    "rename the property",
                )
                continue
            py = python_field_name(wire)
            if py in seen:
                self.problem(
                    f"properties {seen[py]!r} and {wire!r} both map to the Python attribute {py!r}",
                    where,
                    "rename one of them in the schema",
                )
                continue
            seen[py] = wire


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")  # below U+0020 but tab, newline, CR


def _control_char(text: str) -> str | None:
    # One C scan: a generator over every character of every description was ~25% of validate.
    found = _CONTROL.search(text)
    return found.group() if found else None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if value == "":
        return "an empty string"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {text!r}"
    if isinstance(value, list):
        return "an array" if value else "an empty array"
    return "an object"
