"""Stage 2a — build the IR definitions from the raw `$defs`.

Every decision about shape and naming is made here, from the schema's structure (never from
one release's accidents): how `$ref` is wrapped, whether a union is tagged by a `const`
property (with or without a `discriminator` keyword), which variant is the untagged fallback,
whether an enum is open (has a catch-all), and what a variant class is called.
"""

from __future__ import annotations

from typing import Any

from .build_defaults import build_default
from .build_unions import UnionBuilder
from .classmodel import ClassModel
from .errors import CodegenError, Problem
from .ir import (
    AliasDef,
    DefaultList,
    DefaultMap,
    Definition,
    EnumDef,
    EnumValue,
    Field,
    ListOf,
    LiteralOf,
    MapOf,
    Named,
    ObjectDef,
    Scalar,
    Tag,
    TypeExpr,
)
from .load import LoadedSchema
from .naming import RESERVED_TYPE_NAMES, is_identifier, pascal, snake, upper_snake
from .shapes import (
    alternatives,
    collect_props,
    const_of,
    count_refs,
    enum_alternatives,
    find_tag,
    mixin_groups,
    ptr_escape,
    unwrap_ref,
)

_SCALARS: dict[str, TypeExpr] = {
    "string": Scalar("str"),
    "integer": Scalar("int"),
    "number": Scalar("float"),
    "boolean": Scalar("bool"),
    "null": Scalar("null"),
}
_METHOD_NAMES = frozenset({"to_dict", "from_dict", "to_json", "from_json"})


class TypeBuilder:
    """Turns `$defs` into IR definitions; collects problems instead of stopping at the first."""

    def __init__(self, schema: LoadedSchema, model: ClassModel) -> None:
        self.s = schema
        self.model = model
        self.file = schema.schema_file
        self.problems: list[Problem] = []
        self.out: dict[str, Definition] = {}
        self.py: dict[str, str] = {}  # $defs name -> Python name
        self.kinds: dict[str, str] = {}  # $defs name -> object|union|enum|alias
        self.refs = count_refs(schema.defs)
        self.tags: dict[str, Tag] = {}  # $defs objects reused as a tagged variant
        self.method_types: dict[str, tuple[str, str]] = {}  # Python name -> (x-side, x-method)
        self._building: set[str] = set()
        self.unions = UnionBuilder(self)

    def problem(self, what: str, pointer: str, fix: str = "") -> None:
        self.problems.append(Problem(what, self.file, pointer, fix))

    def resolve(self, py: str) -> Definition | None:
        """The definition with Python name `py`, building it first if it is a `$defs` entry."""
        if py not in self.out:
            for name, p in self.py.items():
                if p == py:
                    self._build_def(name)
        return self.out.get(py)

    # -- entry -------------------------------------------------------------------------
    def build(self) -> tuple[Definition, ...]:
        for name, node in self.s.defs.items():
            self.py[name] = self._type_name(name)
            self.kinds[name] = self._classify(node)
        self._check_collisions()
        for name, node in self.s.defs.items():
            if self.kinds[name] == "union":
                self._plan_reuse(name, node)
        for name in self.s.defs:
            self._build_def(name)
        if self.problems:
            raise CodegenError(self.problems)
        return tuple(self.out.values())

    # -- naming ------------------------------------------------------------------------
    def _type_name(self, name: str) -> str:
        py = name if is_identifier(name) else pascal(name)
        if not is_identifier(py):
            py = "T" + py
        return py + "_" if py in RESERVED_TYPE_NAMES else py

    def _check_collisions(self) -> None:
        seen: dict[str, str] = {}
        for name, py in self.py.items():
            if py in seen:
                self.problem(
                    f"types {seen[py]!r} and {name!r} both map to the Python name {py!r}",
                    f"/$defs/{ptr_escape(name)}",
                    "rename one of them in the schema",
                )
            seen[py] = name

    def fresh(self, base: str, pointer: str) -> str:
        """A new class name for an inline type; never ends in a digit, never collides."""
        name = base
        if name in self.out or name in self.py.values() or name in RESERVED_TYPE_NAMES:
            name = base + "Variant"
        if name in self.out or name in self.py.values():
            self.problem(f"cannot find a free Python name for {base!r}", pointer, "add a title to the variant")
        return name

    # -- classification ----------------------------------------------------------------
    def _classify(self, node: dict[str, Any]) -> str:
        alts = alternatives(node)
        if alts is not None and "properties" not in node:
            return "enum" if enum_alternatives(alts[1]) is not None else "union"
        if alts is not None:
            return "union" if find_tag(alts[1]) is not None else "object"
        if node.get("type") == "object" or "properties" in node:
            if "properties" in node or "additionalProperties" not in node:
                return "object"
        if isinstance(node.get("enum"), list):
            return "enum"
        return "alias"

    def named(self, def_name: str) -> Named:
        kind = self.kinds[def_name]
        return Named(self.py[def_name], kind)  # type: ignore[arg-type]

    # -- variant class reuse -------------------------------------------------------------
    def _plan_reuse(self, name: str, node: dict[str, Any]) -> None:
        """A $defs object used only as one tagged variant becomes that variant itself."""
        alts = alternatives(node)
        assert alts is not None
        tag = find_tag(alts[1])
        if tag is None or "properties" in node:
            return
        for alt in alts[1]:
            value = const_of(alt, tag)
            own = [p for p in alt.get("properties", {}) if p != tag]
            ref = unwrap_ref(alt, allow_props=True)
            if value is None or own or ref is None or ref not in self.s.defs:
                continue
            target = self.s.defs[ref]
            if (
                self.refs.get(ref, 0) == 1
                and self.kinds.get(ref) == "object"
                and tag not in target.get("properties", {})
                and ref not in self.tags
            ):
                self.tags[ref] = Tag(tag, value)

    # -- definitions -------------------------------------------------------------------
    def _build_def(self, name: str) -> None:
        py = self.py[name]
        if py in self.out or py in self._building:
            return
        self._building.add(py)
        node = self.s.defs[name]
        pointer = f"/$defs/{ptr_escape(name)}"
        doc = str(node.get("description", ""))
        unstable = name not in self.s.stable_defs
        if "x-method" in node or "x-side" in node:
            self.method_types[py] = (str(node.get("x-side", "")), str(node.get("x-method", "")))
        kind = self.kinds[name]
        if kind == "object":
            self.out[py] = self.object_def(py, node, pointer, doc, unstable, def_name=name)
        elif kind == "enum":
            self.out[py] = self._enum_def(py, node, pointer, doc, unstable)
        elif kind == "union":
            union = self.unions.union_def(py, node, pointer, doc, unstable)
            opaque = union.objects is None and not union.arrays and not union.scalars
            # Shapes that cannot be told apart (JSON-RPC results, ext payloads) stay raw JSON.
            self.out[py] = AliasDef(py, pointer, doc, Scalar("json"), unstable) if opaque else union
        else:
            target, nullable = self.type_expr(node, pointer, py)
            if nullable:
                self.problem("a named type cannot be nullable by itself", pointer, "make the uses nullable")
            self.out[py] = AliasDef(py, pointer, doc, target, unstable)
        self._building.discard(py)

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
    ) -> ObjectDef:
        props = (extra or []) + collect_props(self.s, node, pointer, self.problems)
        if tag is None and def_name is not None:
            tag = self.tags.get(def_name)
        fields: list[Field] = []
        used = set(_METHOD_NAMES)
        for wire, pnode, required, ptr in props:
            if tag is not None and wire == tag.wire:
                continue
            if any(f.wire == wire for f in fields):
                continue
            fields.append(self._field(py, def_name, wire, pnode, required, ptr, used))
        extra_attr = "extra"
        while extra_attr in used:
            extra_attr += "_"
        # Required fields first: dataclass fields without defaults must precede the others.
        ordered = tuple(sorted(fields, key=lambda f: not f.required))
        groups = mixin_groups(self.s, node)
        return ObjectDef(py, pointer, doc, ordered, tag, extra_attr, unstable, one_of_keys=groups)

    def _field(
        self,
        owner: str,
        def_name: str | None,
        wire: str,
        pnode: Any,
        required: bool,
        ptr: str,
        used: set[str],
    ) -> Field:
        if not isinstance(pnode, dict):
            pnode = {}
        texpr, nullable = self.type_expr(pnode, ptr, owner + pascal(wire))
        if pnode.get("x-deserialize-skip-invalid-items") and isinstance(texpr, ListOf):
            texpr = ListOf(texpr.item, True)
        if wire == "_meta":
            py = "meta"
        else:
            py = self.model.field_name(def_name, wire) or snake(wire)
            if not is_identifier(py):
                py = snake(wire)
        while py in used:
            py += "_"
        used.add(py)
        default = None
        if "default" in pnode:
            default = build_default(self, texpr, pnode["default"], f"{ptr}/default")
        lenient = bool(pnode.get("x-deserialize-default-on-error"))
        on_error = default
        if on_error is None and required and lenient:
            if isinstance(texpr, ListOf):
                on_error = DefaultList(())
            elif isinstance(texpr, MapOf):
                on_error = DefaultMap(())
            else:
                lenient = False  # a required scalar has no value to fall back to
        return Field(
            wire=wire,
            py=py,
            type=texpr,
            required=required,
            nullable=nullable,
            default=default,
            lenient=lenient,
            doc=str(pnode.get("description", "")),
            on_error=on_error,
        )

    def _enum_def(self, py: str, node: dict[str, Any], pointer: str, doc: str, unstable: bool) -> EnumDef:
        alts = alternatives(node)
        if alts is None:  # {"type": "string", "enum": [...]}
            found = [(v, "") for v in node.get("enum", [])]
            is_open, base = False, "str"
        else:
            parsed = enum_alternatives(alts[1])
            assert parsed is not None
            found, is_open, base = parsed
        values: list[EnumValue] = []
        consts: set[str] = set()
        for value, vdoc in found:
            const = f"{upper_snake(py)}_{upper_snake(str(value))}"
            if isinstance(value, int):
                title = next((str(a.get("title")) for a in alts[1] if a.get("const") == value), "") if alts else ""
                const = f"{upper_snake(py)}_{upper_snake(title or str(abs(value)))}"
            while const in consts:
                const += "_"
            consts.add(const)
            values.append(EnumValue(value, const, vdoc))
        return EnumDef(py, pointer, doc, base, tuple(values), is_open, unstable)  # type: ignore[arg-type]

    # -- type expressions ----------------------------------------------------------------
    def type_expr(self, node: Any, pointer: str, hint: str) -> tuple[TypeExpr, bool]:
        """The type of a property/item schema and whether it is nullable."""
        if not isinstance(node, dict):
            return Scalar("json"), False
        ref = unwrap_ref(node)
        if ref is not None:
            if ref not in self.s.defs:
                self.problem(f"dangling $ref: no $defs entry {ref!r}", pointer, "add the type or fix the $ref")
                return Scalar("json"), False
            return self.named(ref), False
        alts = alternatives(node)
        if alts is not None:
            non_null = [a for a in alts[1] if not (isinstance(a, dict) and a.get("type") == "null")]
            nullable = len(non_null) < len(alts[1])
            if len(non_null) == 1:
                inner, inner_null = self.type_expr(non_null[0], f"{pointer}/{alts[0]}/0", hint)
                return inner, nullable or inner_null
            if enum_alternatives(non_null) is not None:
                return self._inline_enum(node, pointer, hint), nullable
            union = self.unions.union_def(self.fresh(hint, pointer), {alts[0]: non_null}, pointer, "", False)
            if union.objects is None and not union.arrays and not union.scalars:
                return Scalar("json"), nullable
            self.out[union.name] = union
            return Named(union.name, "union"), nullable
        if "const" in node and isinstance(node["const"], str):
            return LiteralOf((node["const"],)), False
        if isinstance(node.get("enum"), list) and all(isinstance(v, str) for v in node["enum"]):
            return LiteralOf(tuple(node["enum"])), False
        types = node.get("type")
        if types is None:
            return Scalar("json"), False
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            self.problem(f"invalid JSON-schema type {types!r}", pointer, "use a type name or a list of them")
            return Scalar("json"), False
        nullable = "null" in types
        rest = [t for t in types if t != "null"]
        if not rest:
            return Scalar("null"), False
        if len(rest) > 1:
            return Scalar("json"), nullable
        kind = rest[0]
        if kind in _SCALARS:
            return _SCALARS[kind], nullable
        if kind == "array":
            item, _ = self.type_expr(node.get("items"), f"{pointer}/items", hint + "Item")
            return ListOf(item), nullable
        if kind == "object":
            if "properties" in node:
                py = self.fresh(hint, pointer)
                self.out[py] = self.object_def(py, node, pointer, str(node.get("description", "")), False)
                return Named(py, "object"), nullable
            addl = node.get("additionalProperties")
            if isinstance(addl, dict) and addl:
                value, _ = self.type_expr(addl, f"{pointer}/additionalProperties", hint + "Value")
                return MapOf(value), nullable
            return Scalar("object"), nullable
        self.problem(
            f"unknown JSON-schema type {kind!r}",
            f"{pointer}/type",
            "use one of string, integer, number, boolean, array, object, null",
        )
        return Scalar("json"), nullable

    def result_type(self, name: str, inline: dict[str, Any] | None, pointer: str, method: str, unstable: bool) -> str:
        """The Python name of a method's result type: a `$defs` entry, or an inline variant of a
        response union (`{"title": "AuthenticateResponse", "type": "null"}`) made a named type."""
        if inline is None:
            return self.py[name]
        py = self.fresh(self._type_name(name), pointer)
        texpr, nullable = self.type_expr(inline, pointer, py)
        if isinstance(texpr, Named) and not nullable:
            return texpr.name
        if nullable:
            self.problem(
                f"the inline result type {name!r} is nullable", pointer, 'write it as {"type": "null"} or a $ref'
            )
        doc = str(inline.get("description", "")) or f"The result of `{method}`" + (
            ": always JSON null." if texpr == Scalar("null") else "."
        )
        self.out[py] = AliasDef(py, pointer, doc, texpr, unstable)
        return py

    def _inline_enum(self, node: dict[str, Any], pointer: str, hint: str) -> TypeExpr:
        py = self.fresh(hint, pointer)
        self.out[py] = self._enum_def(py, node, pointer, str(node.get("description", "")), False)
        return Named(py, "enum")
