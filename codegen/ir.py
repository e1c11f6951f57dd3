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
    ├── builders                 Builder: one function of helpers.py (name, BuilderParams, the
    │                            object it returns as a New of BuilderExprs), codegen/build_helpers.py
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
    """Which scalar: `str`, `int`, `float`, `bool`, `null`, `json` (any value) or `object` (a raw dict)."""


@dataclass(frozen=True)
class Named:
    """A reference to a definition by its Python name."""

    name: str
    """The Python name of the definition (a key of `defs`)."""
    kind: Literal["object", "union", "enum", "alias"]
    """The kind of that definition, as its `kind` field says."""


@dataclass(frozen=True)
class ListOf:
    """A JSON array -> `list[item]`."""

    item: TypeExpr
    """The type of every item."""
    skip_invalid: bool = False
    """`x-deserialize-skip-invalid-items`: invalid items are dropped (and reported), not an error."""


@dataclass(frozen=True)
class MapOf:
    """A JSON object with arbitrary keys (`additionalProperties`) -> `dict[str, value]`."""

    value: TypeExpr
    """The type of every value."""


@dataclass(frozen=True)
class LiteralOf:
    """A closed set of string values given inline (`enum`/`const`)."""

    values: tuple[str, ...]
    """The allowed strings, in schema order."""


TypeExpr = Scalar | Named | ListOf | MapOf | LiteralOf


@dataclass(frozen=True)
class DefaultScalar:
    """A scalar schema default (`"default": 0`)."""

    value: str | int | float | bool | None
    """The default as a Python value (`None` for JSON null)."""


@dataclass(frozen=True)
class DefaultList:
    """A list default (`"default": []`)."""

    items: tuple[Default, ...]
    """The typed items."""


@dataclass(frozen=True)
class DefaultMap:
    """A map default (`"default": {}` for a `MapOf` field)."""

    items: tuple[tuple[str, Default], ...]
    """The (key, typed value) pairs, in schema order."""


@dataclass(frozen=True)
class DefaultObject:
    """A typed default: `ClassName(field=..., ...)`, never a dict literal."""

    cls: str
    """The Python class name to construct."""
    args: tuple[tuple[str, Default], ...]
    """The (Python field name, typed value) keyword arguments, for the fields the default sets."""


Default = DefaultScalar | DefaultList | DefaultMap | DefaultObject


@dataclass(frozen=True)
class Field:
    """One property of an object type -> one dataclass attribute."""

    wire: str
    """The property name on the wire (`sessionId`, `_meta`)."""
    py: str
    """The Python attribute name (`session_id`, `meta`)."""
    type: TypeExpr
    """The type of a present, non-null value."""
    required: bool
    """Listed in the schema's `required`: must be present on the wire."""
    nullable: bool
    """JSON `null` is allowed (the attribute may be `None`)."""
    default: Default | None
    """The schema default, typed; `None` when the schema gives none (an absent field is then `UNSET`)."""
    lenient: bool  # x-deserialize-default-on-error
    """`x-deserialize-default-on-error`: a malformed value becomes `on_error` (reported to the
    `DecodeContext`) instead of failing the decode."""
    doc: str
    """The property's description from the schema ("" when none)."""
    # What a malformed lenient value becomes: the schema default, else the empty list/map
    # for a required collection; None means "absent" (UNSET).
    on_error: Default | None = None


@dataclass(frozen=True)
class Tag:
    """The discriminator a union variant carries: `"sessionUpdate": "agent_message_chunk"`."""

    wire: str
    """The tag property's wire name (`sessionUpdate`, `type`)."""
    value: str
    """The tag's constant value for this variant."""


@dataclass(frozen=True)
class ObjectDef:
    """A JSON object type -> a dataclass with `from_dict`/`to_dict`."""

    name: str
    """The Python class name."""
    pointer: str
    """The JSON pointer of the definition in the schema (`/$defs/PromptRequest`)."""
    doc: str
    """The schema's description ("" when none)."""
    fields: tuple[Field, ...]
    """The properties, in schema order."""
    tag: Tag | None
    """The discriminator this object carries as a variant of a tagged union, if any."""
    extra_attr: str  # attribute holding unknown wire fields
    unstable: bool
    """Only in the unstable schema (`--unstable`)."""
    side: str | None = None  # x-side
    """The schema's `x-side`: the side whose method uses this type, if given."""
    method: str | None = None  # x-method
    """The schema's `x-method`: the method whose params or result this type is, if given."""
    # Flattened untagged alternatives (e.g. an elicitation's session or request scope): a
    # value must carry every key of at least one group.
    one_of_keys: tuple[tuple[str, ...], ...] = ()

    kind: Literal["object"] = "object"
    """Always "object": tells the definition kinds apart in templates (`d.kind == "object"`)."""

    @property
    def has_defaults(self) -> bool:
        """Some field has a schema default."""
        return any(f.default is not None for f in self.fields)


@dataclass(frozen=True)
class Variant:
    """One alternative of a union."""

    type: TypeExpr
    """What the variant decodes to."""
    json_type: JsonType
    """The JSON type of its values (`object`, `string`, `null`, ...)."""
    tag_value: str | None = None
    """For tagged object variants: the tag's value that selects it."""
    key: str | None = None  # for untagged objects: a required key no sibling variant has
    doc: str = ""
    """The variant's description from the schema ("" when none)."""


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
class PickedVariant:
    """A variant of a `KeywordUnion`, and what its picking field's value is an instance of."""

    cls: str
    """The variant's class."""
    checks: tuple[str, ...]
    """The Python classes (`bool`, `str`, `int`, `float`) a value picking this variant is an instance of."""


@dataclass(frozen=True)
class KeywordUnion:
    """A union the proxy takes as keywords: its object variants have the same fields but one,
    whose value's Python type picks the variant (`value`: a bool or a string)."""

    field: str
    """The Python name of the picking field."""
    variants: tuple[PickedVariant, ...]
    """The variants, in the order their checks are tried."""


@dataclass(frozen=True)
class UnionDef:
    """A `oneOf`/`anyOf` -> a type alias over its variants plus `decode_<Name>`/`encode_<Name>`."""

    name: str
    """The Python name of the alias."""
    pointer: str
    """The JSON pointer of the definition in the schema."""
    doc: str
    """The schema's description ("" when none)."""
    variants: tuple[Variant, ...]
    """Every variant, in schema order."""
    objects: ObjectDispatch | None
    """How JSON objects are routed to the object variants; `None` when there are none."""
    arrays: tuple[Variant, ...]  # routed by the first item's distinguishing key
    scalars: tuple[Variant, ...]  # routed by JSON type
    unstable: bool
    """Only in the unstable schema (`--unstable`)."""
    keywords: KeywordUnion | None = None
    """Set when one field's value picks the variant: the proxy then takes the fields as keywords."""
    kind: Literal["union"] = "union"
    """Always "union"."""


@dataclass(frozen=True)
class EnumValue:
    """One known value of an enum."""

    value: str | int
    """The value on the wire."""
    const: str  # Python constant name
    doc: str
    """The value's description from the schema ("" when none)."""


@dataclass(frozen=True)
class EnumDef:
    """String or integer constants -> a `Literal` alias (or `str`/`int` when open) plus constants."""

    name: str
    """The Python name of the alias."""
    pointer: str
    """The JSON pointer of the definition in the schema."""
    doc: str
    """The schema's description ("" when none)."""
    base: Literal["str", "int"]
    """The JSON type of the values."""
    values: tuple[EnumValue, ...]
    """The known values, in schema order."""
    open: bool  # unknown values are kept (the schema has a catch-all variant)
    unstable: bool
    """Only in the unstable schema (`--unstable`)."""
    kind: Literal["enum"] = "enum"
    """Always "enum"."""


@dataclass(frozen=True)
class AliasDef:
    """A named scalar, list, map or any-value type -> a type alias (`SessionId = str`)."""

    name: str
    """The Python name of the alias."""
    pointer: str
    """The JSON pointer of the definition in the schema."""
    doc: str
    """The schema's description ("" when none)."""
    target: TypeExpr
    """The aliased type."""
    unstable: bool
    """Only in the unstable schema (`--unstable`)."""
    kind: Literal["alias"] = "alias"
    """Always "alias"."""


Definition = ObjectDef | UnionDef | EnumDef | AliasDef

Side = Literal["agent", "client", "both"]


@dataclass(frozen=True)
class Method:
    """One protocol method: listed in meta.json; request or notification and its types from the
    schema's evidence (`x-method`, `*Request`/`*Response`/`*Notification` names, message unions)."""

    wire: str
    """The method name on the wire (`session/prompt`)."""
    const: str  # Python constant name for the wire name
    handled_by: Side
    """Which side answers it; "both" for protocol-level methods (`$/cancel_request`)."""
    kind: Literal["request", "notification"]
    """A request gets a result; a notification does not."""
    params: str | None  # definition name
    result: str | None
    """The result's definition name; None exactly for notifications. A JSON-null result is an
    `AliasDef` of `Scalar("null")` (e.g. made from an inline `{"title": "AuthenticateResponse",
    "type": "null"}` variant of a response union): the proxy returns None, the dispatcher answers null."""
    handler: str  # Python method name on the handler base class / peer proxy
    unstable: bool
    """Not in the stable schema's method list."""
    doc: str
    """A one-paragraph summary from the params type's description ("" when none)."""
    optional: bool  # answered with -32601 until the user implements it
    runtime: bool = False  # protocol-level (`$/...`): the connection itself handles it
    # A request that may also be sent as a notification (unstable `mcp/message`): the
    # notification's params type and the handler that receives it.
    notification_params: str | None = None
    notification_handler: str | None = None
    """The handler name for the notification form (`notification_params`), if any."""
    receiver: str = "self"
    """The proxy method's own name for `self`: `_self` when a params field is named `self`
    (every params field is a keyword argument of the proxy's keyword form)."""
    timeout_arg: str = "timeout"
    """The proxy request's per-call timeout keyword: `timeout_` when a params field is named
    `timeout` (the field keeps its name)."""


@dataclass(frozen=True)
class Ref:
    """A builder argument taken from one of its parameters."""

    param: str
    """The parameter's name."""
    absent_if_none: bool = False
    """`None` leaves the field out (`UNSET`), as the official SDK's builders do."""
    to_list: bool = False
    """The parameter is any iterable; the field gets a new list of its items."""


@dataclass(frozen=True)
class Const:
    """A builder argument fixed by the builder (`kind="read"`)."""

    value: str
    """The string value."""


@dataclass(frozen=True)
class New:
    """A protocol object a builder constructs: `types.<cls>(field=..., ...)`."""

    cls: str
    """The Python class name."""
    args: tuple[tuple[str, BuilderExpr], ...]
    """The (Python field name, value) keyword arguments, in the class's field order."""


@dataclass(frozen=True)
class ListExpr:
    """A list literal a builder fills: `[item, ...]`."""

    items: tuple[BuilderExpr, ...]
    """The items."""


@dataclass(frozen=True)
class DictExpr:
    """A JSON object literal a builder fills: `{"key": value, ...}`."""

    items: tuple[tuple[str, BuilderExpr], ...]
    """The (key, value) pairs."""


BuilderExpr = Ref | Const | New | ListExpr | DictExpr


@dataclass(frozen=True)
class BuilderParam:
    """One parameter of a builder in `helpers.py`."""

    name: str
    """The parameter's name."""
    type: TypeExpr
    """The type of the value it takes (for `iterable`, a list type: any iterable of its items)."""
    default: str | None
    """The default as a Python expression (`None`, `types.UNSET`, `'medium'`); None: required."""
    keyword_only: bool
    """After the `*`: only passed by keyword."""
    nullable: bool = False
    """`| None` in the hint."""
    unset: bool = False
    """`| types.Unset` in the hint (the field may be left absent)."""
    iterable: bool = False
    """Takes any iterable of the list's items (`collections.abc.Iterable`)."""


@dataclass(frozen=True)
class Builder:
    """One function of `helpers.py`: builds a protocol object from a few arguments."""

    name: str
    """The function's name (`text_block`, `update_agent_message_text`, `update_usage`)."""
    params: tuple[BuilderParam, ...]
    """Its parameters, in order (positional ones first)."""
    body: New
    """What it returns: the object it constructs (`body.cls` is the return type)."""
    doc: str
    """Its docstring."""
    sdk: bool
    """It has the official Python SDK's name and parameters (`acp.helpers`)."""


@dataclass(frozen=True)
class Package:
    """One generated package: the role it is for, the schema facts for its header, and its API."""

    role: Literal["agent", "client"]
    """The side the package is for: it handles this role's methods and calls the peer's."""
    package: str
    """The import name (`--package`, or the `--out` folder name), e.g. `myagent.acp`."""
    release: str
    """The schema release (`1.21.0`)."""
    sha256: str
    """The SHA-256 of the schema files read, for the header."""
    schema_label: str
    """The schema as the user named it (`v1`, or a path)."""
    generator_version: str
    """The acp-codegen version."""
    command: str
    """The command that regenerates the package, for the header."""
    protocol_version: int
    """The ACP protocol version the schema describes (`PROTOCOL_VERSION`)."""
    unstable: bool
    """Generated with `--unstable` (the unstable types and methods are included)."""
    definitions: tuple[Definition, ...]
    """Every named type, in schema order."""
    methods: tuple[Method, ...]
    """Every method, sorted by wire name."""
    custom_templates: str | None = None
    """The custom templates directory (`--templates`, as given) when one was used; the header says so."""
    builders: tuple[Builder, ...] = ()
    """The builders of `helpers.py`, decided from the schema's unions (codegen/build_helpers.py)."""

    @property
    def peer(self) -> Literal["agent", "client"]:
        """The other role."""
        return "client" if self.role == "agent" else "agent"

    def handled(self) -> tuple[Method, ...]:
        """The methods this role answers (its base class handlers)."""
        return tuple(m for m in self.methods if m.handled_by in (self.role, "both"))

    def called(self) -> tuple[Method, ...]:
        """The methods this role calls on the peer (its proxy's methods)."""
        return tuple(m for m in self.methods if m.handled_by in (self.peer, "both"))
