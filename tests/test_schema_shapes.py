"""Schemas have changed shape across ACP releases; small hand-made schemas for each shape.

Each case writes a tiny schema.json + meta.json, generates an agent package from it, imports
it and checks that the generated code reads and writes the wire as the schema says.
"""

from __future__ import annotations

import copy
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from codegen.errors import CodegenError
from codegen.generate import Target, generate_files
from codegen.write import write_tree

META = {"version": 1, "agentMethods": {"session_new": "session/new"}, "clientMethods": {}, "protocolMethods": {}}


def new_session(**extra: Any) -> dict[str, Any]:
    """A NewSessionRequest/Response pair, with x-method/x-side unless told otherwise."""
    request = {
        "type": "object",
        "properties": {"cwd": {"type": "string"}, "block": {"$ref": "#/$defs/ContentBlock"}},
        "required": ["cwd"],
        "x-side": "agent",
        "x-method": "session/new",
    }
    response = {
        "type": "object",
        "properties": {"sessionId": {"type": "string"}},
        "required": ["sessionId"],
        "x-side": "agent",
        "x-method": "session/new",
    }
    defs = {"NewSessionRequest": request, "NewSessionResponse": response}
    defs.update(extra)
    return defs


TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
IMAGE = {"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}


def tagged(variants: list[dict[str, Any]], discriminator: bool = True, keyword: str = "oneOf") -> dict[str, Any]:
    node: dict[str, Any] = {keyword: variants}
    if discriminator:
        node["discriminator"] = {"propertyName": "type"}
    return node


def tag_variant(value: str, ref: str, wrapped: bool = True, title: str | None = None) -> dict[str, Any]:
    variant: dict[str, Any] = {
        "type": "object",
        "properties": {"type": {"type": "string", "const": value}},
        "required": ["type"],
    }
    if wrapped:
        variant["allOf"] = [{"$ref": f"#/$defs/{ref}"}]
    else:
        variant["$ref"] = f"#/$defs/{ref}"
    if title:
        variant["title"] = title
    return variant


counter = 0


def generate(tmp_path: Path, defs: dict[str, Any], meta: dict[str, Any] | None = None) -> ModuleType:
    global counter
    counter += 1
    schema_dir = tmp_path / "schema"
    schema_dir.mkdir()
    (schema_dir / "schema.json").write_text(json.dumps({"$defs": defs}))
    (schema_dir / "meta.json").write_text(json.dumps(meta or META))
    name = f"shape_pkg_{counter}"
    target = Target("agent", tmp_path / name, str(schema_dir))
    write_tree(target.out, generate_files(target))
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def roundtrip(module: ModuleType, type_name: str, value: Any) -> Any:
    types = module.types
    cls = getattr(types, type_name)
    decoded = cls.from_dict(value) if isinstance(cls, type) else getattr(types, f"decode_{type_name}")(value)
    encoded = decoded.to_dict() if hasattr(decoded, "to_dict") else getattr(types, f"encode_{type_name}")(decoded)
    assert encoded == value
    return decoded


@pytest.mark.parametrize("wrapped", [True, False], ids=["allOf-wrapped-ref", "bare-ref-with-siblings"])
@pytest.mark.parametrize("discriminator", [True, False], ids=["discriminator", "no-discriminator"])
@pytest.mark.parametrize("keyword", ["oneOf", "anyOf"])
def test_tagged_union_shapes(tmp_path: Path, wrapped: bool, discriminator: bool, keyword: str) -> None:
    union = tagged(
        [tag_variant("text", "TextContent", wrapped), tag_variant("image", "ImageContent", wrapped)],
        discriminator,
        keyword,
    )
    module = generate(tmp_path, new_session(ContentBlock=union, TextContent=TEXT, ImageContent=IMAGE))
    types = module.types
    block = roundtrip(module, "ContentBlock", {"type": "image", "data": "xx"})
    assert isinstance(block, types.ImageContent)
    unknown = roundtrip(module, "ContentBlock", {"type": "video", "url": "u"})
    assert type(unknown).__name__ == "UnknownContentBlock"
    request = roundtrip(module, "NewSessionRequest", {"cwd": "/", "block": {"type": "text", "text": "hi"}})
    assert isinstance(request.block, types.TextContent)


def test_ref_wrapping_styles_for_fields(tmp_path: Path) -> None:
    defs = new_session(ContentBlock=TEXT, SessionId={"type": "string"})
    defs["NewSessionResponse"]["properties"] = {
        "wrapped": {"description": "x", "allOf": [{"$ref": "#/$defs/SessionId"}]},
        "bare": {"description": "y", "$ref": "#/$defs/SessionId", "default": "s"},
        "nullable": {"anyOf": [{"$ref": "#/$defs/SessionId"}, {"type": "null"}]},
        "typelist": {"type": ["string", "null"]},
    }
    defs["NewSessionResponse"]["required"] = ["wrapped"]
    module = generate(tmp_path, defs)
    value = roundtrip(module, "NewSessionResponse", {"wrapped": "a", "nullable": None, "typelist": None})
    assert value.bare == "s"  # schema default applied, and not re-encoded since it was absent
    roundtrip(module, "NewSessionResponse", {"wrapped": "a", "bare": "b"})


def test_inline_variants_without_titles_get_names_from_tags(tmp_path: Path) -> None:
    union = tagged(
        [
            {"type": "object", "properties": {"outcome": {"type": "string", "const": "cancelled"}},
             "required": ["outcome"]},
            {"type": "object", "properties": {"outcome": {"type": "string", "const": "selected"},
                                              "optionId": {"type": "string"}}, "required": ["outcome", "optionId"]},
        ],
        discriminator=False,
    )
    module = generate(tmp_path, new_session(ContentBlock=TEXT, Outcome=union))
    types = module.types
    assert isinstance(roundtrip(module, "Outcome", {"outcome": "cancelled"}), types.OutcomeCancelled)
    selected = roundtrip(module, "Outcome", {"outcome": "selected", "optionId": "o"})
    assert isinstance(selected, types.OutcomeSelected) and selected.option_id == "o"


def test_untagged_fallback_variant_and_titles(tmp_path: Path) -> None:
    union = {
        "anyOf": [
            tag_variant("http", "Http"),
            {"title": "stdio", "allOf": [{"$ref": "#/$defs/Stdio"}]},
        ]
    }
    http = {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
    stdio = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    module = generate(tmp_path, new_session(ContentBlock=TEXT, Server=union, Http=http, Stdio=stdio))
    assert isinstance(roundtrip(module, "Server", {"command": "x"}), module.types.Stdio)
    assert isinstance(roundtrip(module, "Server", {"type": "http", "url": "u"}), module.types.Http)


def test_untagged_objects_told_apart_by_required_keys(tmp_path: Path) -> None:
    union = {"anyOf": [{"title": "T", "allOf": [{"$ref": "#/$defs/TextRes"}]},
                       {"title": "B", "allOf": [{"$ref": "#/$defs/BlobRes"}]}]}
    text = {"type": "object", "properties": {"uri": {"type": "string"}, "text": {"type": "string"}},
            "required": ["uri", "text"]}
    blob = {"type": "object", "properties": {"uri": {"type": "string"}, "blob": {"type": "string"}},
            "required": ["uri", "blob"]}
    module = generate(tmp_path, new_session(ContentBlock=TEXT, Res=union, TextRes=text, BlobRes=blob))
    assert isinstance(roundtrip(module, "Res", {"uri": "u", "blob": "b"}), module.types.BlobRes)
    assert isinstance(roundtrip(module, "Res", {"uri": "u", "text": "t"}), module.types.TextRes)


def test_open_and_closed_enums(tmp_path: Path) -> None:
    closed = {"oneOf": [{"type": "string", "const": "a"}, {"type": "string", "const": "b"}]}
    open_ = {"anyOf": [{"type": "string", "const": "a"}, {"title": "other", "type": "string"}]}
    listed = {"type": "string", "enum": ["x", "y"]}
    defs = new_session(ContentBlock=TEXT, Closed=closed, Open=open_, Listed=listed)
    defs["NewSessionResponse"]["properties"].update(
        closed={"$ref": "#/$defs/Closed"}, open={"$ref": "#/$defs/Open"}, listed={"$ref": "#/$defs/Listed"}
    )
    module = generate(tmp_path, defs)
    roundtrip(module, "NewSessionResponse", {"sessionId": "s", "open": "future-value", "closed": "b", "listed": "y"})
    with pytest.raises(module.types.DecodeError, match="closed"):
        module.types.NewSessionResponse.from_dict({"sessionId": "s", "closed": "c"})


def test_no_envelope_and_no_x_extensions_meta_and_naming_decide(tmp_path: Path) -> None:
    defs = new_session(ContentBlock=TEXT)
    for node in defs.values():
        node.pop("x-side", None)
        node.pop("x-method", None)
    defs["CancelNotification"] = {"type": "object", "properties": {"sessionId": {"type": "string"}}}
    meta = copy.deepcopy(META)
    meta["agentMethods"]["session_cancel"] = "session/cancel"
    module = generate(tmp_path, defs, meta)
    spec = module.METHODS["session/new"]
    assert (spec.params_type, spec.result_type, spec.kind) == ("NewSessionRequest", "NewSessionResponse", "request")
    cancel = module.METHODS["session/cancel"]
    assert (cancel.params_type, cancel.kind) == ("CancelNotification", "notification")


def test_unknown_x_side_value_defers_to_meta(tmp_path: Path) -> None:
    defs = new_session(ContentBlock=TEXT)
    for node in defs.values():
        if "x-side" in node:
            node["x-side"] = "conductor"  # a side this generator has never heard of
    module = generate(tmp_path, defs)
    assert module.METHODS["session/new"].handled_by == "agent"


def test_method_without_types_is_a_clear_error(tmp_path: Path) -> None:
    meta = copy.deepcopy(META)
    meta["agentMethods"]["fly"] = "session/fly"
    with pytest.raises(CodegenError) as info:
        generate(tmp_path, new_session(ContentBlock=TEXT), meta)
    assert "session/fly" in str(info.value)


@pytest.mark.parametrize("release", ["v1", "v2"])
def test_real_schema_without_x_extensions_maps_methods_the_same(tmp_path: Path, release: str) -> None:
    """Older releases lack x-method/x-side: meta.json + type naming must give the same table."""
    from codegen.build import build_package
    from codegen.load import load, locate

    root = Path(__file__).resolve().parent.parent / "schema" / release
    schema = json.loads((root / "schema.json").read_text())
    for node in schema["$defs"].values():
        node.pop("x-method", None)
        node.pop("x-side", None)
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    (tmp_path / "meta.json").write_text((root / "meta.json").read_text())

    def table(path: str) -> dict[str, tuple[str, str, str | None, str]]:
        package = build_package(load(locate(path, False)), "agent", "x", "cmd")
        return {m.wire: (m.kind, m.params or "", m.result, m.handled_by) for m in package.methods}

    assert table(str(tmp_path)) == table(release)


def test_previous_release_generates_imports_and_maps_its_methods(tmp_path: Path) -> None:
    """The previous v1 release (1.20.0, before elicitation) still generates a working package."""
    fixture = Path(__file__).resolve().parent / "fixtures" / "schemas" / "v1.20.0"
    target = Target("agent", tmp_path / "acp_1_20", str(fixture))
    write_tree(target.out, generate_files(target))
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("acp_1_20")
    finally:
        sys.path.remove(str(tmp_path))
    meta = json.loads((fixture / "meta.json").read_text())
    wanted = {*meta["agentMethods"].values(), *meta["clientMethods"].values(), *meta["protocolMethods"].values()}
    assert set(module.METHODS) == wanted
    assert "elicitation/create" not in module.METHODS
    assert module.SCHEMA_RELEASE == "1.20.0"
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    update = {"sessionId": "s", "update": chunk}
    assert module.types.SessionNotification.from_dict(update).to_dict() == update
