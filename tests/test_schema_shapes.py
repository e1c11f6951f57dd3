"""Schemas have changed shape across ACP releases; small hand-made schemas for each shape.

Each case writes a tiny schema.json + meta.json, generates an agent package from it, imports
it and checks that the generated code reads and writes the wire as the schema says.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from budget import MYPY_CORE
from typecheck import mypy_strict, packages

from codegen.errors import CodegenError
from codegen.generate import Target, generate_all, generate_files
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


# Every schema a test below generates from, by name: the shape tests use them, and
# test_mypy_strict_on_every_shape checks the output of all of them (one mypy run per role).
SHAPES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}


def shape(name: str, defs: dict[str, Any], meta: dict[str, Any] | None = None) -> str:
    SHAPES[name] = (defs, meta or META)
    return name


counter = 0


def generate_from(
    tmp_path: Path, defs: dict[str, Any], meta: dict[str, Any] | None = None, role: str = "agent"
) -> ModuleType:
    global counter
    counter += 1
    schema_dir = tmp_path / f"schema_{counter}"
    schema_dir.mkdir()
    (schema_dir / "schema.json").write_text(json.dumps({"$defs": defs}))
    (schema_dir / "meta.json").write_text(json.dumps(meta or META))
    name = f"shape_pkg_{counter}"
    target = Target(role, tmp_path / name, str(schema_dir))  # type: ignore[arg-type]
    write_tree(target.out, generate_files(target))
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def generate(tmp_path: Path, name: str, role: str = "agent") -> ModuleType:
    defs, meta = copy.deepcopy(SHAPES[name])
    return generate_from(tmp_path, defs, meta, role)


def roundtrip(module: ModuleType, type_name: str, value: Any) -> Any:
    types = module.types
    cls = getattr(types, type_name)
    decoded = cls.from_dict(value) if isinstance(cls, type) else getattr(types, f"decode_{type_name}")(value)
    encoded = decoded.to_dict() if hasattr(decoded, "to_dict") else getattr(types, f"encode_{type_name}")(decoded)
    assert encoded == value
    return decoded


TAGGED = {
    (wrapped, discriminator, keyword): shape(
        f"tagged-{keyword}-{'disc' if discriminator else 'nodisc'}-{'wrapped' if wrapped else 'bare'}",
        new_session(
            ContentBlock=tagged(
                [tag_variant("text", "TextContent", wrapped), tag_variant("image", "ImageContent", wrapped)],
                discriminator,
                keyword,
            ),
            TextContent=TEXT,
            ImageContent=IMAGE,
        ),
    )
    for wrapped in (True, False)
    for discriminator in (True, False)
    for keyword in ("oneOf", "anyOf")
}


@pytest.mark.parametrize("wrapped", [True, False], ids=["allOf-wrapped-ref", "bare-ref-with-siblings"])
@pytest.mark.parametrize("discriminator", [True, False], ids=["discriminator", "no-discriminator"])
@pytest.mark.parametrize("keyword", ["oneOf", "anyOf"])
def test_tagged_union_shapes(tmp_path: Path, wrapped: bool, discriminator: bool, keyword: str) -> None:
    module = generate(tmp_path, TAGGED[wrapped, discriminator, keyword])
    types = module.types
    block = roundtrip(module, "ContentBlock", {"type": "image", "data": "xx"})
    assert isinstance(block, types.ImageContent)
    unknown = roundtrip(module, "ContentBlock", {"type": "video", "url": "u"})
    assert type(unknown).__name__ == "UnknownContentBlock"
    request = roundtrip(module, "NewSessionRequest", {"cwd": "/", "block": {"type": "text", "text": "hi"}})
    assert isinstance(request.block, types.TextContent)


def _ref_wrapping() -> dict[str, Any]:
    defs = new_session(ContentBlock=TEXT, SessionId={"type": "string"})
    defs["NewSessionResponse"]["properties"] = {
        "wrapped": {"description": "x", "allOf": [{"$ref": "#/$defs/SessionId"}]},
        "bare": {"description": "y", "$ref": "#/$defs/SessionId", "default": "s"},
        "nullable": {"anyOf": [{"$ref": "#/$defs/SessionId"}, {"type": "null"}]},
        "typelist": {"type": ["string", "null"]},
    }
    defs["NewSessionResponse"]["required"] = ["wrapped"]
    return defs


REF_WRAPPING = shape("ref-wrapping", _ref_wrapping())


def test_ref_wrapping_styles_for_fields(tmp_path: Path) -> None:
    module = generate(tmp_path, REF_WRAPPING)
    value = roundtrip(module, "NewSessionResponse", {"wrapped": "a", "nullable": None, "typelist": None})
    assert value.bare == "s"  # schema default applied, and not re-encoded since it was absent
    roundtrip(module, "NewSessionResponse", {"wrapped": "a", "bare": "b"})


UNTITLED = shape(
    "untitled-inline-variants",
    new_session(
        ContentBlock=TEXT,
        Outcome=tagged(
            [
                {
                    "type": "object",
                    "properties": {"outcome": {"type": "string", "const": "cancelled"}},
                    "required": ["outcome"],
                },
                {
                    "type": "object",
                    "properties": {"outcome": {"type": "string", "const": "selected"}, "optionId": {"type": "string"}},
                    "required": ["outcome", "optionId"],
                },
            ],
            discriminator=False,
        ),
    ),
)


def test_inline_variants_without_titles_get_names_from_tags(tmp_path: Path) -> None:
    module = generate(tmp_path, UNTITLED)
    types = module.types
    assert isinstance(roundtrip(module, "Outcome", {"outcome": "cancelled"}), types.OutcomeCancelled)
    selected = roundtrip(module, "Outcome", {"outcome": "selected", "optionId": "o"})
    assert isinstance(selected, types.OutcomeSelected) and selected.option_id == "o"


FALLBACK = shape(
    "untagged-fallback",
    new_session(
        ContentBlock=TEXT,
        Server={"anyOf": [tag_variant("http", "Http"), {"title": "stdio", "allOf": [{"$ref": "#/$defs/Stdio"}]}]},
        Http={"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
        Stdio={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    ),
)


def test_untagged_fallback_variant_and_titles(tmp_path: Path) -> None:
    module = generate(tmp_path, FALLBACK)
    assert isinstance(roundtrip(module, "Server", {"command": "x"}), module.types.Stdio)
    assert isinstance(roundtrip(module, "Server", {"type": "http", "url": "u"}), module.types.Http)


KEYED = shape(
    "untagged-keyed",
    new_session(
        ContentBlock=TEXT,
        Res={
            "anyOf": [
                {"title": "T", "allOf": [{"$ref": "#/$defs/TextRes"}]},
                {"title": "B", "allOf": [{"$ref": "#/$defs/BlobRes"}]},
            ]
        },
        TextRes={
            "type": "object",
            "properties": {"uri": {"type": "string"}, "text": {"type": "string"}},
            "required": ["uri", "text"],
        },
        BlobRes={
            "type": "object",
            "properties": {"uri": {"type": "string"}, "blob": {"type": "string"}},
            "required": ["uri", "blob"],
        },
    ),
)


def test_untagged_objects_told_apart_by_required_keys(tmp_path: Path) -> None:
    module = generate(tmp_path, KEYED)
    assert isinstance(roundtrip(module, "Res", {"uri": "u", "blob": "b"}), module.types.BlobRes)
    assert isinstance(roundtrip(module, "Res", {"uri": "u", "text": "t"}), module.types.TextRes)


def _enums() -> dict[str, Any]:
    closed = {"oneOf": [{"type": "string", "const": "a"}, {"type": "string", "const": "b"}]}
    open_ = {"anyOf": [{"type": "string", "const": "a"}, {"title": "other", "type": "string"}]}
    listed = {"type": "string", "enum": ["x", "y"]}
    defs = new_session(ContentBlock=TEXT, Closed=closed, Open=open_, Listed=listed)
    defs["NewSessionResponse"]["properties"].update(
        closed={"$ref": "#/$defs/Closed"}, open={"$ref": "#/$defs/Open"}, listed={"$ref": "#/$defs/Listed"}
    )
    return defs


ENUMS = shape("enums", _enums())


def test_open_and_closed_enums(tmp_path: Path) -> None:
    module = generate(tmp_path, ENUMS)
    roundtrip(module, "NewSessionResponse", {"sessionId": "s", "open": "future-value", "closed": "b", "listed": "y"})
    with pytest.raises(module.types.DecodeError, match="closed"):
        module.types.NewSessionResponse.from_dict({"sessionId": "s", "closed": "c"})


def _no_extensions() -> tuple[dict[str, Any], dict[str, Any]]:
    defs = new_session(ContentBlock=TEXT)
    for node in defs.values():
        node.pop("x-side", None)
        node.pop("x-method", None)
    defs["CancelNotification"] = {"type": "object", "properties": {"sessionId": {"type": "string"}}}
    meta = copy.deepcopy(META)
    meta["agentMethods"]["session_cancel"] = "session/cancel"
    return defs, meta


NO_EXTENSIONS = shape("no-x-extensions", *_no_extensions())


def test_no_envelope_and_no_x_extensions_meta_and_naming_decide(tmp_path: Path) -> None:
    module = generate(tmp_path, NO_EXTENSIONS)
    spec = module.METHODS["session/new"]
    assert (spec.params_type, spec.result_type, spec.kind) == ("NewSessionRequest", "NewSessionResponse", "request")
    cancel = module.METHODS["session/cancel"]
    assert (cancel.params_type, cancel.kind) == ("CancelNotification", "notification")


def _unknown_side() -> dict[str, Any]:
    defs = new_session(ContentBlock=TEXT)
    for node in defs.values():
        if "x-side" in node:
            node["x-side"] = "conductor"  # a side this generator has never heard of
    return defs


UNKNOWN_SIDE = shape("unknown-x-side", _unknown_side())


def test_unknown_x_side_value_defers_to_meta(tmp_path: Path) -> None:
    module = generate(tmp_path, UNKNOWN_SIDE)
    assert module.METHODS["session/new"].handled_by == "agent"


def test_method_without_types_is_a_clear_error(tmp_path: Path) -> None:
    meta = copy.deepcopy(META)
    meta["agentMethods"]["fly"] = "session/fly"
    with pytest.raises(CodegenError) as info:
        generate_from(tmp_path, new_session(ContentBlock=TEXT), meta)
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


# -- request or notification: from evidence (issue 9) ----------------------------------------
def _methods_meta(**agent: str) -> dict[str, Any]:
    meta = copy.deepcopy(META)
    meta["agentMethods"].update(agent)
    return meta


def _auth(response: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """session/new plus an `authenticate` request whose result is described by `response`."""
    defs = new_session(ContentBlock=TEXT, **extra)
    defs["AuthenticateRequest"] = {
        "type": "object",
        "properties": {"methodId": {"type": "string"}},
        "required": ["methodId"],
        "x-side": "agent",
        "x-method": "authenticate",
    }
    defs["ClientRequest"] = {"anyOf": [{"$ref": "#/$defs/NewSessionRequest"}, {"$ref": "#/$defs/AuthenticateRequest"}]}
    variants: list[dict[str, Any]] = [{"$ref": "#/$defs/NewSessionResponse"}]
    defs["AgentResponse"] = {"anyOf": variants + ([response] if response else [])}
    return defs


AUTH_META = _methods_meta(authenticate="authenticate")
# 2025-08: a null result written only as an inline variant of the response union.
INLINE_NULL = shape("inline-null-response", _auth({"title": "AuthenticateResponse", "type": "null"}), AUTH_META)
# 0.2.0: the response is a $defs type without x-method, named after the request.
DEF_NO_X_METHOD = shape(
    "response-def-without-x-method",
    _auth(
        {"$ref": "#/$defs/AuthenticateResponse"},
        AuthenticateResponse={"type": "object", "properties": {"token": {"type": "string"}}},
    ),
    AUTH_META,
)
# 2025-08 AgentResponse: several methods whose result is null, each a null variant.
NULLS = _auth({"title": "AuthenticateResponse", "type": "null"})
NULLS["AgentResponse"]["anyOf"].append({"title": "LoadSessionResponse", "type": "null"})
NULLS["LoadSessionRequest"] = {
    "type": "object",
    "properties": {"sessionId": {"type": "string"}},
    "required": ["sessionId"],
    "x-side": "agent",
    "x-method": "session/load",
}
NULLS["ClientRequest"]["anyOf"].append({"$ref": "#/$defs/LoadSessionRequest"})
SEVERAL_NULLS = shape(
    "several-null-variants", NULLS, _methods_meta(authenticate="authenticate", session_load="session/load")
)


# A request renamed without its response (`KillTerminalCommandRequest` answered by an inline
# `KillTerminalResponse`): the response is named after the method, not the request.
RENAMED = _auth({"title": "AuthenticateResponse", "type": "null"})
RENAMED["AuthenticateUserRequest"] = RENAMED.pop("AuthenticateRequest")
RENAMED["ClientRequest"]["anyOf"][1] = {"$ref": "#/$defs/AuthenticateUserRequest"}
RESPONSE_NAMED_BY_METHOD = shape("response-named-by-method", RENAMED, AUTH_META)


def test_response_named_after_the_method_not_the_request(tmp_path: Path) -> None:
    spec = generate(tmp_path, RESPONSE_NAMED_BY_METHOD).METHODS["authenticate"]
    assert (spec.kind, spec.params_type, spec.result_type) == (
        "request",
        "AuthenticateUserRequest",
        "AuthenticateResponse",
    )


class _Handler:
    async def authenticate(self, params: Any) -> None:
        assert params.method_id == "m"
        return None


class _Connection:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.sent: list[tuple[str, Any]] = []

    async def request(self, method: str, params: Any, *, timeout: float | None = None) -> Any:
        self.sent.append((method, params))
        return self.answer


@pytest.mark.parametrize("name", [INLINE_NULL, SEVERAL_NULLS])
def test_inline_null_response_variant_makes_a_request_with_a_null_result(tmp_path: Path, name: str) -> None:
    agent = generate(tmp_path, name)
    spec = agent.METHODS["authenticate"]
    assert (spec.kind, spec.params_type, spec.result_type) == ("request", "AuthenticateRequest", "AuthenticateResponse")
    assert agent.types.decode_AuthenticateResponse(None) is None
    with pytest.raises(agent.types.DecodeError):
        agent.types.decode_AuthenticateResponse({})
    # The dispatcher answers a real request (not -32601) with "result": null.
    dispatcher = agent.Dispatcher(_Handler(), frozenset({"authenticate"}))
    assert asyncio.run(dispatcher.request("authenticate", {"methodId": "m"})) is None
    # The client's proxy sends a request and returns the (null) result.
    client = generate(tmp_path, name, role="client")
    connection = _Connection(None)
    proxy = client.AgentProxy(connection)
    assert asyncio.run(proxy.authenticate(client.types.AuthenticateRequest(method_id="m"))) is None
    assert connection.sent == [("authenticate", {"methodId": "m"})]


def test_response_def_without_x_method_is_the_result(tmp_path: Path) -> None:
    module = generate(tmp_path, DEF_NO_X_METHOD)
    spec = module.METHODS["authenticate"]
    assert (spec.kind, spec.result_type, spec.result_is_object) == ("request", "AuthenticateResponse", True)
    assert roundtrip(module, "AuthenticateResponse", {"token": "t"}).token == "t"


def test_several_null_variants_are_one(tmp_path: Path) -> None:
    module = generate(tmp_path, SEVERAL_NULLS)
    assert module.METHODS["session/load"].kind == "request"
    assert module.METHODS["session/load"].result_type == "LoadSessionResponse"
    assert module.types.decode_AgentResponse(None) is None
    assert roundtrip(module, "AgentResponse", {"sessionId": "s"}).session_id == "s"


def _stop(tmp_path: Path, defs: dict[str, Any], meta: dict[str, Any]) -> str:
    with pytest.raises(CodegenError) as info:
        generate_from(tmp_path, defs, meta)
    return str(info.value)


def test_request_without_result_stops_naming_method_and_pointer(tmp_path: Path) -> None:
    message = _stop(tmp_path, _auth(), AUTH_META)
    assert "method 'authenticate'" in message and "has no result type" in message
    assert "#/$defs/AuthenticateRequest" in message and "/agentMethods/authenticate" in message


def test_conflicting_evidence_stops(tmp_path: Path) -> None:
    defs = _auth({"title": "AuthenticateResponse", "type": "null"})
    defs["AuthenticateNotification"] = defs.pop("AuthenticateRequest")
    defs["ClientRequest"]["anyOf"][1] = {"$ref": "#/$defs/AuthenticateNotification"}
    message = _stop(tmp_path, defs, AUTH_META)
    assert "'AuthenticateNotification' is named a notification but is a variant of a request union" in message
    assert "#/$defs/ClientRequest/anyOf/1" in message


def test_missing_evidence_stops(tmp_path: Path) -> None:
    defs = _auth()
    defs["Authenticate"] = defs.pop("AuthenticateRequest")
    del defs["ClientRequest"]
    message = _stop(tmp_path, defs, AUTH_META)
    assert "cannot tell whether it is a request or a notification" in message
    assert "#/$defs/Authenticate" in message


@pytest.mark.slow
def test_mypy_strict_on_every_shape(tmp_path: Path, mypy_cache: Path) -> None:
    """The output of every shape schema above, both roles, mypy --strict.

    In two runs sharing one cache: the agents, then each client as a copy named like its agent,
    so the modules both roles share byte for byte (types.py, the runtime) are found in the
    cache, not analysed again (`from_config`: one header text in both roles, as in
    test_releases.py).
    """
    targets: list[Target] = []
    for i, (defs, meta) in enumerate(SHAPES.values()):
        schema_dir = tmp_path / "schemas" / f"{i}"
        schema_dir.mkdir(parents=True)
        (schema_dir / "schema.json").write_text(json.dumps({"$defs": defs}))
        (schema_dir / "meta.json").write_text(json.dumps(meta))
        for role in ("agent", "client"):
            out = tmp_path / role / f"shape_{i}"  # the client checked under its agent's name
            targets.append(Target(role, out, str(schema_dir), from_config=True))  # type: ignore[arg-type]
    # As `acp-codegen generate` does it: each schema built once for both roles, one formatter run.
    for target, files in zip(targets, generate_all(targets), strict=True):
        write_tree(target.out, files)
    for role in ("agent", "client"):
        names = [t.out.name for t in targets if t.role == role]
        result = mypy_strict(tmp_path / role, *MYPY_CORE, *packages(names), cache=mypy_cache)
        assert result.returncode == 0, f"{role} packages:\n{result.stdout}{result.stderr}"


def test_invariants_catch_a_broken_ir(tmp_path: Path) -> None:
    from codegen.build import build_api
    from codegen.invariants import check_invariants
    from codegen.load import load, locate

    defs, meta = SHAPES[SEVERAL_NULLS]
    (tmp_path / "schema.json").write_text(json.dumps({"$defs": defs}))
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    api = build_api(load(locate(str(tmp_path), False)))
    check_invariants(api.schema, api.definitions, api.methods)  # the real IR passes
    broken = tuple(replace(m, result=None) if m.wire == "authenticate" else m for m in api.methods)
    missing = tuple(d for d in api.definitions if d.name != "AuthenticateResponse")
    cases = [
        (api.definitions, broken, "request 'authenticate' has no result type"),
        (missing, api.methods, "refers to type 'AuthenticateResponse', which is not generated"),
        (api.definitions, api.methods + api.methods[:1], "is in METHODS 2 times"),
    ]
    for definitions, methods, message in cases:
        with pytest.raises(CodegenError, match=re.escape(message)):
            check_invariants(api.schema, definitions, methods)
