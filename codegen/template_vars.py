"""What the templates receive, in words: each context variable, filter and test that render
provides, for docs/templates.md (`template_docs` checks these against a real context)."""

from __future__ import annotations

# What each context variable holds (its type is checked against a real context by `problems`).
CONTEXT = {
    "pkg": ("Package", "the package being generated: role, schema facts, definitions, methods"),
    "objects": ("list[ObjectDef]", "the object types (dataclasses), in schema order"),
    "enums": ("list[EnumDef]", "the enums, in schema order"),
    "unions": ("list[UnionDef]", "the unions, in schema order"),
    "aliases": (
        "list[AliasDef | UnionDef]",
        "aliases and unions in definition order: each after the aliases and unions it names",
    ),
    "defs": ("dict[str, Definition]", "every definition by its Python name"),
    "handled": ("tuple[Method, ...]", "the methods this role answers (`pkg.handled()`)"),
    "called": ("tuple[Method, ...]", "the methods this role calls on its peer (`pkg.called()`)"),
    "uses_method_names": ("bool", "whether the role module refers to `methods.<CONST>` (imports `methods`)"),
    "proxy_has_methods": ("bool", "whether the proxy has any method (the role module uses `METHODS`, `typing`)"),
    "resume": (
        "tuple[Method, Method] | None",
        "`initialize` and `session/load` when the role calls both with a non-null result"
        " (a client then gets `reconnect_and_load`)",
    ),
    "pagers": (
        "tuple[Pager, ...]",
        "a client's paged list methods (`session/list`): the proxy's `list_<items>()` iterators"
        " that follow the cursors (`codegen.pagers.find_pagers`)",
    ),
    "exports": (
        "Exports",
        "what `__init__.py` imports from each module (`exports.imports`: (module, names)) and lists"
        " in `__all__` (`exports.names`), decided per role and schema (`codegen.exports.package_exports`)",
    ),
    "contrib": (
        "ContribPlan",
        "what `contrib.py` and the agent's terminal handle hold for this schema (`codegen.build_contrib`)",
    ),
    "sessions": (
        "SessionsPlan | None",
        "what the agent's session layer `sessions.py` serves for this schema (`codegen.build_sessions`);"
        " None: no `sessions.py` (client role, or a schema without the session basics)",
    ),
    "typing_names": ("list[str]", "the `typing` names types.py imports, decided from the IR (none unused)"),
    "dataclasses_names": ("list[str]", "the `dataclasses` names types.py imports (`field` only where used)"),
    "helpers_imports": (
        "list[str]",
        "the import lines helpers.py needs (`Iterable`, `Any`, `typing`; `types` when it has a builder),"
        " from its builders and their parameters",
    ),
    "sdk_builders_missing": (
        "list[str]",
        "the official SDK's builders that helpers.py lacks: the schema lacks their variant or shapes it differently"
        " (a builder of an SDK name that does not fit takes the variant's fields instead, `Builder.sdk` False)",
    ),
    "serde_imports": (
        "list[tuple[str, str]]",
        "(name, alias) of each `from .serde import name as alias` of types.py: its re-exports and the helpers it uses",
    ),
}

# Filters: `value|name(args)`; the first parameter is the value left of the `|`.
FILTERS = {
    "hint": "the Python type hint for a `TypeExpr` (`list[ContentBlock]`, `dict[str, Any]`, ...); `qualified=True`: "
    "as a role module spells it (`types.`, `typing.Literal`)",
    "field_hint": "a `Field`'s annotation: the hint plus `| None` when nullable and `| Unset` when optional "
    "without a default",
    "plan": "how a decoder checks and decodes a present, non-null `Field` value `v` (a `DecodePlan`: "
    "`cond`, `value`, `expected`, `call`, `enum`, and for an array field `loop`, a `ListLoop` that decodes it "
    "item by item in place); `f|plan(i)` suffixes the names it binds with `i` (unique per field of an object)",
    "failure": "the statement for a `Field` value that failed its inline check (tolerated when lenient)",
    "fallback": "what a malformed lenient `Field` value becomes (its `on_error` default, else `UNSET`)",
    "enum_dec": "the expression decoding JSON value `obj` as an `EnumDef`",
    "object_plan": "for an `ObjectDef`, an `ObjectPlan`: how its decoder tells fields from unknown keys by "
    "counting (a local `n`: the keys besides the tag, plus one per absent optional field): `quick`, a check that "
    "`obj` holds only its required fields (setting `n`; empty where there is nothing to gain), `count`, the "
    "statement setting `n` where no quick check does, `tail`, the last optional field, before which "
    "`tail_check` tells that every other key is a known field, and `no_unknown`",
    "dec": "an expression decoding JSON value `v` of `TypeExpr` `t` at path `p` (raises `DecodeError`)",
    "enc": "an expression encoding Python value `v` of `TypeExpr` `t` to JSON",
    "fn": "a decoder function `(value, path, ctx)` for a `TypeExpr` (list items, map values, union variants)",
    "default": "a `Default` as a Python expression (`[]`, `ClassName(field=...)`, ...); note that this "
    "replaces Jinja's built-in `default` filter",
    "pyrepr": "Python's `repr`: a value as a Python literal",
    "decoder_ref": "the decoder of a definition by name: `types.X.from_dict` or `types.decode_X`",
    "encoder_ref": "the encoder of a definition by name: `types.X.to_dict` or `types.encode_X`",
    "differs_from_default": "the condition under which `Field` `f`'s value `expr` differs from its default",
    "docstring": "schema prose as a safe triple-quoted docstring body, indented by `indent`; `continued` when "
    "the template already wrote lines of the docstring",
    "keyword_params": "a proxy method's keyword form for the params type named `params`: one `KeywordParam` "
    "(`name`, `hint` spelled through `types.`, `default`: None when required, `...` for a mutable default) per "
    "field; None when the params type is a union no field picks the variant of (object form only)",
    "keyword_union": "how a proxy's keyword form picks the variant of the union params type named `params`: a "
    "`KeywordUnion` (`field`, the picking field's Python name; `variants`, each `cls` with the `checks` its "
    "value must pass, tried in order), or None",
}
FILTERS["param_hint"] = (
    "a `BuilderParam`'s annotation as helpers.py spells it: `Iterable[item]` when `iterable`, plus `| None` "
    "and `| types.Unset` as its flags say"
)
FILTERS["builder_expr"] = "a `BuilderExpr` (a builder's argument or the object it returns) as a Python expression"
TESTS = {
    "mutable_default": "`d is mutable_default`: a `Default` that is a list, map or object (needs a "
    "`field(default_factory=...)`)",
}
