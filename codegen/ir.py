"""Stage 2 — the intermediate representation (IR) that templates render.

The tree, top down::

    Package                      one generated package (role + schema + options)
    ├── definitions              every named protocol type, in schema order
    │   ├── ObjectDef            a JSON object -> a dataclass
    │   │   └── Field            wire name, Python name, TypeExpr, required/nullable,
    │   │                        typed Default, leniency (x-deserialize-*)
    │   ├── UnionDef             a oneOf/anyOf -> a type alias + decoder; how a value is
    │   │                        routed is precomputed: by tag (ObjectDispatch), by JSON type,
    │   │                        by distinguishing keys; unknown tags -> an Unknown* class
    │   ├── EnumDef              string/integer consts -> Literal alias + constants (open or closed)
    │   └── AliasDef             a named scalar/list/any (SessionId = str)
    ├── methods                  Method: wire name, side that handles it, request|notification,
    │                            params/result type names, handler name, unstable
    └── header facts             release, sha256, generator version, regenerate command

TypeExpr is the type of a field or variant: Scalar | Named | ListOf | MapOf | LiteralOf.
All naming is decided when the IR is built (codegen.build); templates only print it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ScalarKind = Literal["str", "int", "float", "bool", "json", "object", "null"]
JsonType = Literal["object", "array", "string", "integer", "number", "boolean", "null"]


@dataclass(frozen=True)
class Scalar:
    """A JSON scalar; `json` is any JSON value, `object` a raw JSON object (dict)."""

    kind: ScalarKind


@dataclass(frozen=True)
class Named:
    """A reference to a definition by its Python name."""

    name: str
    kind: Literal["object", "union", "enum", "alias"]


@dataclass(frozen=True)
class ListOf:
    item: TypeExpr
    skip_invalid: bool = False


@dataclass(frozen=True)
class MapOf:
    value: TypeExpr


@dataclass(frozen=True)
class LiteralOf:
    """A closed set of string values given inline (`enum`/`const`)."""

    values: tuple[str, ...]


TypeExpr = Scalar | Named | ListOf | MapOf | LiteralOf


@dataclass(frozen=True)
class DefaultScalar:
    value: str | int | float | bool | None


@dataclass(frozen=True)
class DefaultList:
    items: tuple[Default, ...]


@dataclass(frozen=True)
class DefaultMap:
    items: tuple[tuple[str, Default], ...]


@dataclass(frozen=True)
class DefaultObject:
    """A typed default: `ClassName(field=..., ...)`, never a dict literal."""

    cls: str
    args: tuple[tuple[str, Default], ...]


Default = DefaultScalar | DefaultList | DefaultMap | DefaultObject


@dataclass(frozen=True)
class Field:
    wire: str
    py: str
    type: TypeExpr
    required: bool
    nullable: bool
    default: Default | None
    lenient: bool  # x-deserialize-default-on-error
    doc: str
    # What a malformed lenient value becomes: the schema default, else the empty list/map
    # for a required collection; None means "absent" (UNSET).
    on_error: Default | None = None


@dataclass(frozen=True)
class Tag:
    """The discriminator a union variant carries: `"sessionUpdate": "agent_message_chunk"`."""

    wire: str
    value: str


@dataclass(frozen=True)
class ObjectDef:
    name: str
    pointer: str
    doc: str
    fields: tuple[Field, ...]
    tag: Tag | None
    extra_attr: str  # attribute holding unknown wire fields
    unstable: bool
    side: str | None = None  # x-side
    method: str | None = None  # x-method
    # Flattened untagged alternatives (e.g. an elicitation's session or request scope): a
    # value must carry every key of at least one group.
    one_of_keys: tuple[tuple[str, ...], ...] = ()

    kind: Literal["object"] = "object"

    @property
    def has_defaults(self) -> bool:
        return any(f.default is not None for f in self.fields)


@dataclass(frozen=True)
class Variant:
    type: TypeExpr
    json_type: JsonType
    tag_value: str | None = None
    key: str | None = None  # for untagged objects: a required key no sibling variant has
    doc: str = ""


@dataclass(frozen=True)
class ObjectDispatch:
    """How a JSON object is routed to a variant."""

    tag: str | None  # wire name of the tag property
    tagged: tuple[Variant, ...]  # by tag value
    keyed: tuple[Variant, ...]  # by a distinguishing key, in order
    fallback: Variant | None  # tag absent / no key matched
    unknown_class: str | None  # unknown tag -> this class keeps the raw object
    # No catch-all variant, but an untagged fallback that does not constrain the tag: JSON
    # Schema lets an unknown tag match the fallback, so it is decoded as that (when it fits).
    unknown_to_fallback: bool = False
    # Every variant is tagged and none is a catch-all or an untagged fallback: an unknown tag
    # matches no variant, so the schema rejects it (strict decoding raises; lenient keeps it).
    closed: bool = False


@dataclass(frozen=True)
class UnionDef:
    name: str
    pointer: str
    doc: str
    variants: tuple[Variant, ...]
    objects: ObjectDispatch | None
    arrays: tuple[Variant, ...]  # routed by the first item's distinguishing key
    scalars: tuple[Variant, ...]  # routed by JSON type
    unstable: bool
    kind: Literal["union"] = "union"


@dataclass(frozen=True)
class EnumValue:
    value: str | int
    const: str  # Python constant name
    doc: str


@dataclass(frozen=True)
class EnumDef:
    name: str
    pointer: str
    doc: str
    base: Literal["str", "int"]
    values: tuple[EnumValue, ...]
    open: bool  # unknown values are kept (the schema has a catch-all variant)
    unstable: bool
    kind: Literal["enum"] = "enum"


@dataclass(frozen=True)
class AliasDef:
    name: str
    pointer: str
    doc: str
    target: TypeExpr
    unstable: bool
    kind: Literal["alias"] = "alias"


Definition = ObjectDef | UnionDef | EnumDef | AliasDef

Side = Literal["agent", "client", "both"]


@dataclass(frozen=True)
class Method:
    wire: str
    const: str  # Python constant name for the wire name
    handled_by: Side
    kind: Literal["request", "notification"]
    params: str | None  # definition name
    result: str | None  # definition name (requests only)
    handler: str  # Python method name on the handler base class / peer proxy
    unstable: bool
    doc: str
    optional: bool  # answered with -32601 until the user implements it
    runtime: bool = False  # protocol-level (`$/...`): the connection itself handles it
    # A request that may also be sent as a notification (unstable `mcp/message`): the
    # notification's params type and the handler that receives it.
    notification_params: str | None = None
    notification_handler: str | None = None


@dataclass(frozen=True)
class Package:
    role: Literal["agent", "client"]
    package: str
    release: str
    sha256: str
    schema_label: str
    generator_version: str
    command: str
    protocol_version: int
    unstable: bool
    definitions: tuple[Definition, ...]
    methods: tuple[Method, ...]

    @property
    def peer(self) -> Literal["agent", "client"]:
        return "client" if self.role == "agent" else "agent"

    def handled(self) -> tuple[Method, ...]:
        return tuple(m for m in self.methods if m.handled_by in (self.role, "both"))

    def called(self) -> tuple[Method, ...]:
        return tuple(m for m in self.methods if m.handled_by in (self.peer, "both"))
