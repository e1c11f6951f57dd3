"""The class model from datamodel-code-generator, run in-process.

datamodel-code-generator (pinned in pyproject.toml) parses the schema into its own data
models; we keep what it decides well — the Python field name of every wire property of every
`$defs` object and which fields are required — and let the IR fix what it gets wrong for ACP
(numbered class names, dict-literal defaults, `_meta` -> `field_meta` without a wire alias,
ErrorCode as a bare int union). Its own code output is never used.
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class ModelField:
    py: str
    wire: str
    required: bool


@dataclass(frozen=True)
class ClassModel:
    """`$defs` name -> the fields datamodel-code-generator gives that class."""

    classes: Mapping[str, tuple[ModelField, ...]]

    def field_name(self, def_name: str | None, wire: str) -> str | None:
        if def_name is None:
            return None
        for f in self.classes.get(def_name, ()):
            if f.wire == wire:
                return f.py
        return None


_DEFS_PREFIX = "#/$defs/"


def build_class_model(schema_doc: dict[str, Any]) -> ClassModel:
    """The class model of a schema document; computed once per distinct document per process.

    It is a pure function of the document's text (of `names_only`'s, which gives the same model)
    and the most expensive step of a build (~0.2 s for v1), so a process that builds the same
    schema again (`diff` after `generate`, a test session, a program using codegen as a library)
    gets the model it already has. Only memory: nothing is stored between runs.
    """
    return _class_model(json.dumps(names_only(schema_doc)))  # key order kept: it is part of the content


# A def with one of these beside `properties` may merge its fields with others' (inheritance,
# unions), where property schemas could matter: such a def is given whole.
_COMBINING = frozenset({"allOf", "anyOf", "oneOf", "$ref"})
# A def without `properties` has fields only through these (inheritance, an alias): kept whole.
_INHERITING = frozenset({"allOf", "$ref"})


def names_only(schema_doc: dict[str, Any]) -> dict[str, Any]:
    """`schema_doc` reduced to what decides the class model: the property schemas of every plain
    `$defs` object replaced by `{}`, and every def without properties (unions, enums, strings)
    by `{}`, unless it inherits (`allOf`, `$ref`).

    datamodel-code-generator names a field from the property's name, the names before it in the
    same object and the class name only (`parse_object_fields` in the pinned 0.89.0), never
    from the property's schema or from another def; a def without properties has no fields of
    its own. Parsing what this leaves out (types, unions and their inline variants,
    descriptions) was ~60% of its time. tests/test_classmodel.py proves the class model
    unchanged on every release schema and every bundled one.
    """
    defs = schema_doc.get("$defs")
    if not isinstance(defs, dict):
        return schema_doc
    return {**schema_doc, "$defs": {name: _plain(node) for name, node in defs.items()}}


def _plain(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    props = node.get("properties")
    if not isinstance(props, dict):
        return node if "properties" in node or not _INHERITING.isdisjoint(node) else {}
    if not _COMBINING.isdisjoint(node):
        return node
    return {**node, "properties": dict.fromkeys(props, {})}


@functools.lru_cache(maxsize=256)
def _class_model(source: str) -> ClassModel:
    # Imported lazily: it pulls in pydantic and its own templates (~0.2 s).
    from datamodel_code_generator._shared_types import LiteralType
    from datamodel_code_generator.enums import DataModelType
    from datamodel_code_generator.format import PythonVersion
    from datamodel_code_generator.model import get_data_model_types
    from datamodel_code_generator.parser.jsonschema import JsonSchemaParser

    types = get_data_model_types(DataModelType.DataclassesDataclass, target_python_version=PythonVersion.PY_310)
    parser = JsonSchemaParser(
        source,
        data_model_type=types.data_model,
        data_model_root_type=types.root_model,
        data_model_field_type=types.field_model,
        data_type_manager_type=types.data_type_manager,
        dump_resolve_reference_action=types.dump_resolve_reference_action,
        snake_case_field=True,
        use_tag_as_union_variant_name=True,
        enum_field_as_literal=LiteralType.All,
        target_python_version=PythonVersion.PY_310,
    )
    with warnings.catch_warnings():
        # It warns about integer formats it does not know (uint32, ...); they are plain ints.
        warnings.simplefilter("ignore")
        parser.parse_raw()
    classes: dict[str, tuple[ModelField, ...]] = {}
    for model in parser.results:
        path = model.reference.path
        if not path.startswith(_DEFS_PREFIX) or "#" in path[len(_DEFS_PREFIX) :]:
            continue  # inline helper classes: the IR names and shapes those itself
        fields = tuple(
            ModelField(f.name or "", f.original_name or f.name or "", bool(f.required)) for f in model.fields if f.name
        )
        classes[path[len(_DEFS_PREFIX) :]] = fields
    return ClassModel(MappingProxyType(classes))
