"""The class model datamodel-code-generator is asked for is the one of the whole schema.

`build_class_model` parses `names_only(doc)` (property schemas of plain `$defs` objects, and
defs without properties that do not inherit, replaced by `{}`: ~40% of the parse). Here
each release schema (tests/fixtures/releases) and each bundled one is parsed both ways, past
the cache, and the two models must be equal: every class, every field's Python name, wire
name and required flag.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codegen.classmodel import _class_model, build_class_model, names_only
from codegen.load import load, locate
from codegen.resources import bundled_schema_names

RELEASES = Path(__file__).parent / "fixtures" / "releases"
CASES = [(name, unstable) for name in sorted(bundled_schema_names()) for unstable in (False, True)] + [
    (str(d), False) for d in sorted(RELEASES.iterdir()) if (d / "schema.json").is_file()
]


@pytest.mark.parametrize(("schema", "unstable"), CASES, ids=[f"{Path(s).name}{'-unstable' * u}" for s, u in CASES])
def test_names_only_gives_the_whole_schemas_class_model(schema: str, unstable: bool) -> None:
    doc: dict[str, Any] = {"$defs": load(locate(schema, unstable)).defs}
    reduced = names_only(doc)
    assert reduced != doc  # the reduction applies: the comparison below is not of a document with itself
    whole = _class_model.__wrapped__(json.dumps(doc))
    assert len(whole.classes) > 50
    assert build_class_model(doc) == whole


def test_names_only_keeps_names_order_and_inheriting_defs() -> None:
    ref = {"$ref": "#/$defs/B"}
    doc: dict[str, Any] = {
        "$defs": {
            "A": {"type": "object", "required": ["zeta"], "properties": {"zeta": ref, "alpha": {"type": "string"}}},
            "B": {"allOf": [ref], "properties": {"x": {"type": "integer"}}},
            "C": {"oneOf": [{"type": "object", "properties": {"y": ref}}]},
            "D": {"type": "string", "enum": ["a"]},
            "E": {"anyOf": [ref], "properties": {"z": ref}},
            "F": ref,
        },
        "title": "kept",
    }
    reduced = names_only(doc)
    assert reduced["title"] == "kept"
    a = reduced["$defs"]["A"]
    assert list(a["properties"].items()) == [("zeta", {}), ("alpha", {})]
    assert a["required"] == ["zeta"] and a["type"] == "object"
    for name in "BEF":  # inheriting, or combining beside properties: whole
        assert reduced["$defs"][name] is doc["$defs"][name]
    assert reduced["$defs"]["C"] == reduced["$defs"]["D"] == {}  # no properties, no inheritance
    assert doc["$defs"]["A"]["properties"]["zeta"] is ref  # the input is not changed
    assert names_only({"type": "object"}) == {"type": "object"}
