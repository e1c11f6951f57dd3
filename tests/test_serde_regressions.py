"""Regression tests for issue 3: one per wire-fidelity failure the official SDKs have.

Each test pins one behaviour of the generated serde (generated/agent/types.py; the client package
has the same types): what goes in comes out, unknowns are kept, leniency is reported, errors
carry JSON paths, and unions are decoded by their tag.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import agent
import pytest
from agent import METHODS, types

T = types


def lenient() -> types.DecodeContext:
    return types.DecodeContext(strict=False)


def strict() -> types.DecodeContext:
    return types.DecodeContext(strict=True)


def notification(update: dict[str, Any]) -> dict[str, Any]:
    return {"sessionId": "sess_1", "update": update}


# -- 1. ContentBlock `_meta` and `annotations` survive ----------------------------------------

ANNOTATIONS = {"audience": ["user", "assistant"], "priority": 0.25, "lastModified": "2025-01-01T00:00:00Z"}
META = {"zed.dev/origin": "buffer", "nested": {"list": [1, None, True], "null": None}}

CONTENT_BLOCKS = {
    "TextContent": {"type": "text", "text": "hi"},
    "ImageContent": {"type": "image", "mimeType": "image/png", "data": "AAAA", "uri": "file:///a.png"},
    "AudioContent": {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
    "ResourceLink": {"type": "resource_link", "uri": "file:///a", "name": "a", "size": 3},
    "EmbeddedResource": {"type": "resource", "resource": {"uri": "file:///a", "text": "x", "_meta": {"k": 1}}},
}


@pytest.mark.parametrize("cls", sorted(CONTENT_BLOCKS))
def test_content_block_keeps_meta_and_annotations(cls: str) -> None:
    wire = {**CONTENT_BLOCKS[cls], "annotations": ANNOTATIONS, "_meta": META}
    block = T.decode_ContentBlock(wire, strict())
    assert type(block).__name__ == cls
    assert block.meta == META
    assert isinstance(block.annotations, T.Annotations)
    assert block.annotations.audience == ["user", "assistant"]
    assert block.annotations.priority == 0.25
    assert block.annotations.last_modified == "2025-01-01T00:00:00Z"
    assert T.encode_ContentBlock(block) == wire
    assert json.loads(block.to_json()) == wire
    # ... and nested in a message, where the SDKs dropped them.
    chunk = notification({"sessionUpdate": "agent_message_chunk", "content": wire})
    assert T.SessionNotification.from_dict(chunk).to_dict() == chunk
    prompt = {"sessionId": "s", "prompt": [wire, {"type": "text", "text": "plain"}]}
    spec = METHODS["session/prompt"]
    assert spec.encode_params(spec.decode_params(prompt, strict())) == prompt


def test_content_block_meta_null_and_annotations_null_are_kept() -> None:
    wire = {"type": "text", "text": "hi", "annotations": None, "_meta": None}
    block = T.decode_ContentBlock(wire)
    assert block.annotations is None and block.meta is None
    assert T.encode_ContentBlock(block) == wire
    absent = T.decode_ContentBlock({"type": "text", "text": "hi"})
    assert absent.annotations is T.UNSET and absent.meta is T.UNSET
    assert T.encode_ContentBlock(absent) == {"type": "text", "text": "hi"}


# -- 2. an unknown sessionUpdate kind with a `content` key stays unknown -----------------------


def test_unknown_session_update_with_content_is_not_a_message_chunk() -> None:
    update = {
        "sessionUpdate": "agent_future_chunk",
        "content": {"type": "text", "text": "from the future"},
        "messageId": "m1",
        "_meta": {"x": 1},
    }
    wire = notification(update)
    decoded = T.SessionNotification.from_dict(wire, lenient())
    assert isinstance(decoded.update, T.UnknownSessionUpdate)
    assert not isinstance(decoded.update, T.SessionUpdateUserMessageChunk | T.SessionUpdateAgentMessageChunk)
    assert decoded.update.tag == "agent_future_chunk"
    assert decoded.update.raw == update
    assert decoded.to_dict() == wire
    assert json.loads(decoded.to_json()) == wire
    spec = METHODS["session/update"]
    assert spec.encode_params(spec.decode_params(wire, None)) == wire
    # SessionUpdate is closed (every variant tagged, no catch-all): strict mode rejects the tag.
    with pytest.raises(T.DecodeError, match="agent_future_chunk"):
        T.SessionNotification.from_dict(wire, strict())


@pytest.mark.parametrize(
    ("union", "wire", "closed"),
    [
        ("ContentBlock", {"type": "video", "uri": "file:///v.mp4", "text": "looks like text"}, True),
        ("ToolCallContent", {"type": "image_diff", "content": {"type": "text", "text": "x"}}, True),
        ("RequestPermissionOutcome", {"outcome": "deferred", "optionId": "o"}, True),
        ("McpServer", {"type": "websocket", "name": "n", "command": "c", "args": [], "env": []}, False),
        ("AuthMethod", {"type": "oauth", "id": "a", "name": "A"}, False),
        ("SessionConfigOption", {"type": "slider", "id": "x", "name": "X", "currentValue": 3}, True),
    ],
)
def test_unknown_tags_are_kept_raw_and_re_encoded_unchanged(union: str, wire: dict[str, Any], closed: bool) -> None:
    decode = getattr(T, f"decode_{union}")
    value = decode(wire, lenient())
    assert type(value).__name__ == f"Unknown{union}"
    assert value.raw == wire
    assert getattr(T, f"encode_{union}")(value) == wire
    # Strict mode rejects the tag where the schema closes the union (an untagged fallback
    # variant, as in McpServer and AuthMethod, leaves it open).
    if closed:
        with pytest.raises(T.DecodeError, match="not a known"):
            decode(wire, strict())
    else:
        assert getattr(T, f"encode_{union}")(decode(wire, strict())) == wire


def test_unknown_value_of_an_open_enum_is_kept() -> None:
    # SessionConfigOptionCategory is open (`_`-prefixed names are for custom use).
    wire = {
        "type": "select",
        "id": "effort",
        "name": "Effort",
        "category": "_acme_effort",
        "currentValue": "low",
        "options": [{"value": "low", "name": "Low"}],
    }
    option = T.decode_SessionConfigOption(wire, strict())
    assert isinstance(option, T.SessionConfigOptionSelect)
    assert option.category == "_acme_effort"
    assert T.encode_SessionConfigOption(option) == wire


# -- 3. fs/write_text_file with `content: ""` is valid -----------------------------------------


def test_write_text_file_with_empty_content_is_valid() -> None:
    spec = METHODS["fs/write_text_file"]
    wire = {"sessionId": "s", "path": "/tmp/empty.txt", "content": ""}
    params = spec.decode_params(wire, strict())
    assert isinstance(params, T.WriteTextFileRequest)
    assert params.content == ""
    assert spec.encode_params(params) == wire
    assert T.WriteTextFileRequest(session_id="s", path="/tmp/empty.txt", content="").to_dict() == wire
    # The matching read result and an empty text block are fine too.
    assert T.ReadTextFileResponse.from_dict({"content": ""}).content == ""
    assert T.encode_ContentBlock(T.decode_ContentBlock({"type": "text", "text": ""})) == {"type": "text", "text": ""}


# -- 4. session_info_update with `title: null` round-trips; absent stays absent ---------------


def test_session_info_update_title_null_round_trips() -> None:
    cleared = {"sessionUpdate": "session_info_update", "title": None, "updatedAt": None}
    update = T.decode_SessionUpdate(cleared, strict())
    assert isinstance(update, T.SessionInfoUpdate)
    assert update.title is None and update.updated_at is None
    assert T.encode_SessionUpdate(update) == cleared
    wire = notification(cleared)
    assert T.SessionNotification.from_dict(wire).to_dict() == wire


def test_session_info_update_absent_title_stays_absent() -> None:
    only_meta = {"sessionUpdate": "session_info_update", "_meta": {"k": "v"}}
    update = T.decode_SessionUpdate(only_meta, strict())
    assert update.title is T.UNSET and update.updated_at is T.UNSET
    assert T.encode_SessionUpdate(update) == only_meta
    assert "title" not in T.encode_SessionUpdate(update)


def test_session_info_update_sender_can_clear_the_title() -> None:
    assert T.SessionInfoUpdate(title=None).to_dict() == {"sessionUpdate": "session_info_update", "title": None}
    assert T.SessionInfoUpdate().to_dict() == {"sessionUpdate": "session_info_update"}
    assert T.SessionInfoUpdate(title="t").to_dict() == {"sessionUpdate": "session_info_update", "title": "t"}


# -- 5. `_meta: {"sessionId": "x"}` leaves the real sessionId alone ---------------------------


def test_meta_session_id_does_not_override_the_real_one() -> None:
    meta = {"sessionId": "x", "prompt": "not a prompt", "traceparent": "00-1-2-01"}
    wire = {"sessionId": "real", "prompt": [{"type": "text", "text": "hi"}], "_meta": meta}
    spec = METHODS["session/prompt"]
    params = spec.decode_params(wire, strict())
    assert params.session_id == "real"
    assert len(params.prompt) == 1
    assert params.meta == meta
    assert params.extra == {}
    assert spec.encode_params(params) == wire
    # Encoding never lets `_meta` keys leak into the params either.
    built = T.PromptRequest(session_id="real", prompt=[], meta={"sessionId": "x"})
    assert built.to_dict() == {"sessionId": "real", "prompt": [], "_meta": {"sessionId": "x"}}


def test_meta_is_passed_verbatim_to_the_handler() -> None:
    meta = {"sessionId": "x", "deep": {"a": [1, {"b": None}]}}
    seen: list[Any] = []

    class Handler:
        async def session_prompt(self, params: Any) -> Any:
            seen.append(params)
            return T.PromptResponse(stop_reason="end_turn", meta={"sessionId": "y"})

    dispatcher = agent.Dispatcher(Handler(), frozenset({"session/prompt"}))
    result = asyncio.run(dispatcher.request("session/prompt", {"sessionId": "real", "prompt": [], "_meta": meta}))
    (params,) = seen
    assert isinstance(params, T.PromptRequest)
    assert params.session_id == "real"
    assert params.meta == meta
    assert result == {"stopReason": "end_turn", "_meta": {"sessionId": "y"}}


# -- 6. malformed `_meta` and unknown ToolKind follow the schema's leniency rules -------------


@pytest.mark.parametrize("bad", [5, "meta", [1, 2], True])
def test_malformed_meta_is_tolerated_reported_and_strict_raises(bad: Any) -> None:
    # Every `_meta` in the schema is `x-deserialize-default-on-error`.
    wire = notification({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}})
    wire["update"]["_meta"] = bad
    seen: list[types.LenientWarning] = []
    ctx = types.DecodeContext(on_warning=seen.append)
    decoded = T.SessionNotification.from_dict(wire, ctx)
    assert decoded.update.meta is T.UNSET  # the default: no metadata
    assert decoded.update.content.text == "x"
    assert [w.path for w in ctx.warnings] == ["update._meta"]
    assert seen == ctx.warnings
    assert "_meta" not in decoded.to_dict()["update"]
    with pytest.raises(types.DecodeError) as info:
        T.SessionNotification.from_dict(wire, strict())
    assert info.value.path == "update._meta"


def test_malformed_top_level_meta_in_params() -> None:
    ctx = lenient()
    params = METHODS["session/prompt"].decode_params({"sessionId": "s", "prompt": [], "_meta": "oops"}, ctx)
    assert params.meta is T.UNSET and params.session_id == "s"
    assert [w.path for w in ctx.warnings] == ["_meta"]
    with pytest.raises(types.DecodeError) as info:
        METHODS["session/prompt"].decode_params({"sessionId": "s", "prompt": [], "_meta": "oops"}, strict())
    assert info.value.path == "_meta"


@pytest.mark.parametrize("update_kind", ["tool_call", "tool_call_update"])
def test_unknown_tool_kind_is_tolerated_reported_and_strict_raises(update_kind: str) -> None:
    update = {"sessionUpdate": update_kind, "toolCallId": "call_1", "title": "t", "kind": "teleport"}
    ctx = lenient()
    decoded = T.SessionNotification.from_dict(notification(update), ctx)
    assert decoded.update.tool_call_id == "call_1"
    assert decoded.update.kind is T.UNSET  # the schema gives ToolKind no default value: absent
    assert [w.path for w in ctx.warnings] == ["update.kind"]
    assert "teleport" in ctx.warnings[0].message or "ToolKind" in ctx.warnings[0].message
    with pytest.raises(types.DecodeError) as info:
        T.SessionNotification.from_dict(notification(update), strict())
    assert info.value.path == "update.kind"


def test_tool_kind_in_a_permission_request_is_tolerated_too() -> None:
    wire = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "c", "kind": "teleport", "status": "sleeping"},
        "options": [{"optionId": "o", "name": "Ok", "kind": "allow_once"}],
    }
    ctx = lenient()
    params = METHODS["session/request_permission"].decode_params(wire, ctx)
    assert params.tool_call.kind is T.UNSET and params.tool_call.status is T.UNSET
    assert sorted(w.path for w in ctx.warnings) == ["toolCall.kind", "toolCall.status"]


def test_unknown_enum_value_where_the_schema_is_not_lenient_is_an_error() -> None:
    # PermissionOption.kind and PromptResponse.stopReason are not x-deserialize-default-on-error.
    with pytest.raises(types.DecodeError) as info:
        T.PermissionOption.from_dict({"optionId": "o", "name": "n", "kind": "maybe"}, lenient())
    assert info.value.path == "kind"
    with pytest.raises(types.DecodeError) as info:
        METHODS["session/prompt"].decode_result({"stopReason": "bored"}, lenient())
    assert info.value.path == "stopReason"


def test_default_context_logs_tolerated_values(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"):
        decoded = T.SessionInfoUpdate.from_dict({"title": 5})
    assert decoded.title is T.UNSET
    assert "title" in caplog.text


# -- 7. skip-invalid-items drops bad items, with a warning ------------------------------------


def test_skip_invalid_items_drops_bad_items_and_reports_them() -> None:
    good_content = {"type": "content", "content": {"type": "text", "text": "a"}}
    terminal = {"type": "terminal", "terminalId": "t1"}
    update = {
        "sessionUpdate": "tool_call",
        "toolCallId": "c",
        "title": "t",
        "content": [good_content, {"type": "diff"}, 5, terminal],
        "locations": [{"path": "/a", "line": 1}, {"line": 3}],
    }
    ctx = lenient()
    decoded = T.SessionNotification.from_dict(notification(update), ctx)
    assert [type(c).__name__ for c in decoded.update.content] == ["Content", "Terminal"]
    assert [loc.path for loc in decoded.update.locations] == ["/a"]
    assert [w.path for w in ctx.warnings] == ["update.content[1]", "update.content[2]", "update.locations[1]"]
    assert decoded.to_dict()["update"]["content"] == [good_content, terminal]


def test_skip_invalid_items_in_a_response() -> None:
    wire = {"protocolVersion": 1, "authMethods": [{"id": "a", "name": "A"}, {"id": 5}, {"name": "no id"}]}
    ctx = lenient()
    result = METHODS["initialize"].decode_result(wire, ctx)
    assert [m.id for m in result.auth_methods] == ["a"]
    assert [w.path for w in ctx.warnings] == ["authMethods[1]", "authMethods[2]"]


def test_skip_invalid_items_strict_mode_raises_at_the_item() -> None:
    update = {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "t", "content": [{"type": "diff"}]}
    with pytest.raises(types.DecodeError) as info:
        T.SessionNotification.from_dict(notification(update), strict())
    # The error points at the bad item (`update.content[0]`, or deeper), not the whole list.
    assert info.value.path.startswith("update.content[0]"), info.value.path


# -- 8. typed defaults -------------------------------------------------------------------------


def test_initialize_response_defaults_are_typed_objects() -> None:
    result = METHODS["initialize"].decode_result({"protocolVersion": 1}, strict())
    caps = result.agent_capabilities
    assert isinstance(caps, T.AgentCapabilities)
    assert caps.load_session is False
    assert isinstance(caps.prompt_capabilities, T.PromptCapabilities)
    assert (caps.prompt_capabilities.image, caps.prompt_capabilities.audio) == (False, False)
    assert caps.prompt_capabilities.embedded_context is False
    assert isinstance(caps.mcp_capabilities, T.McpCapabilities)
    assert (caps.mcp_capabilities.http, caps.mcp_capabilities.sse) == (False, False)
    assert isinstance(caps.session_capabilities, T.SessionCapabilities)
    assert isinstance(caps.auth, T.AgentAuthCapabilities)
    assert result.auth_methods == []


def test_defaults_re_encode_without_inventing_fields() -> None:
    for wire in (
        {"protocolVersion": 1},
        {"protocolVersion": 1, "agentCapabilities": {}},
        {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}, "authMethods": []},
        {"protocolVersion": 1, "agentCapabilities": {"promptCapabilities": {"image": True}}},
    ):
        assert METHODS["initialize"].encode_result(METHODS["initialize"].decode_result(wire, strict())) == wire
    assert T.InitializeRequest.from_dict({"protocolVersion": 1}).to_dict() == {"protocolVersion": 1}


def test_default_values_are_not_shared_between_instances() -> None:
    a = T.InitializeResponse.from_dict({"protocolVersion": 1})
    b = T.InitializeResponse.from_dict({"protocolVersion": 1})
    a.agent_capabilities.prompt_capabilities.image = True
    a.auth_methods.append(T.AuthMethodAgent(id="x", name="X"))
    assert b.agent_capabilities.prompt_capabilities.image is False
    assert b.auth_methods == []
    # A changed default is a real value: it is sent.
    assert a.to_dict()["agentCapabilities"]["promptCapabilities"]["image"] is True
    assert a.to_dict()["authMethods"] == [{"id": "x", "name": "X"}]


def test_client_capabilities_defaults_are_typed() -> None:
    params = METHODS["initialize"].decode_params({"protocolVersion": 1}, strict())
    caps = params.client_capabilities
    assert isinstance(caps, T.ClientCapabilities)
    assert isinstance(caps.fs, T.FileSystemCapabilities)
    assert (caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal) == (False, False, False)
    assert isinstance(caps.auth, T.AuthCapabilities) and caps.auth.terminal is False


# -- 9. unknown fields are kept ----------------------------------------------------------------


def test_unknown_fields_are_kept_at_every_level() -> None:
    wire = notification(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c",
            "title": "t",
            "futureField": {"a": [1, 2]},
            "content": [{"type": "content", "content": {"type": "text", "text": "x", "lang": "en"}, "z": None}],
            "locations": [{"path": "/a", "column": 4}],
        }
    )
    wire["topLevelNew"] = True
    decoded = T.SessionNotification.from_dict(wire, strict())
    assert decoded.extra == {"topLevelNew": True}
    assert decoded.update.extra == {"futureField": {"a": [1, 2]}}
    assert decoded.update.content[0].extra == {"z": None}
    assert decoded.update.content[0].content.extra == {"lang": "en"}
    assert decoded.update.locations[0].extra == {"column": 4}
    assert decoded.to_dict() == wire
    assert T.SessionNotification.from_json(decoded.to_json()).to_dict() == wire


def test_unknown_fields_never_override_known_ones() -> None:
    built = T.TextContent(text="real", extra={"text": "fake", "type": "fake", "other": 1})
    assert built.to_dict() == {"type": "text", "text": "real", "other": 1}


# -- 10. DecodeError carries the JSON path -----------------------------------------------------


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"sessionId": "s", "prompt": [{"type": 5, "text": "x"}]}, "prompt[0].type"),
        ({"sessionId": "s", "prompt": [{"text": "x"}]}, "prompt[0].type"),
        ({"sessionId": "s", "prompt": [{"type": "text", "text": "a"}, {"type": "text"}]}, "prompt[1].text"),
        (
            {"sessionId": "s", "prompt": [{"type": "resource", "resource": {"uri": 1, "text": ""}}]},
            "prompt[0].resource",
        ),
        ({"sessionId": "s", "prompt": {"type": "text"}}, "prompt"),
        ({"prompt": []}, "sessionId"),
        ({"sessionId": None, "prompt": []}, "sessionId"),
    ],
)
def test_decode_error_paths(params: dict[str, Any], path: str) -> None:
    with pytest.raises(types.DecodeError) as info:
        METHODS["session/prompt"].decode_params(params, None)
    assert info.value.path == path or info.value.path.startswith(path + "."), info.value.path
    assert info.value.message
    assert str(info.value).startswith(info.value.path)


def test_decode_error_paths_in_nested_unions() -> None:
    wire = notification({"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "data": "x"}})
    with pytest.raises(types.DecodeError) as info:
        T.SessionNotification.from_dict(wire)
    assert info.value.path == "update.content.mimeType"
    with pytest.raises(types.DecodeError) as info:
        T.SessionNotification.from_dict(notification({"sessionUpdate": 7}))
    assert info.value.path == "update.sessionUpdate"


def test_dict_subclasses_decode_by_their_items() -> None:
    """A caller's dict subclass decodes as the plain dict of its items: a required field it
    lacks is missing (its `__missing__` is not asked), its tag dispatches as a dict's would."""
    from collections import OrderedDict, defaultdict

    wire = notification({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}})
    ordered = OrderedDict(wire)
    ordered["update"] = OrderedDict(wire["update"])
    assert T.SessionNotification.from_dict(ordered) == T.SessionNotification.from_dict(wire)
    lacking: defaultdict[str, Any] = defaultdict(lambda: "invented", {"update": wire["update"]})
    with pytest.raises(types.DecodeError) as info:
        T.SessionNotification.from_dict(lacking)
    assert (info.value.path, info.value.message) == ("sessionId", "missing required field")
    assert "sessionId" not in lacking
    for bad in ([], "x", None, 1):
        with pytest.raises(types.DecodeError, match="expected object"):
            T.SessionNotification.from_dict(bad)


def test_tags_of_another_type_are_errors() -> None:
    """A tag that is not a string (a str subclass included, as before) or names no variant."""

    class Tag(str):
        pass

    for tag, message in [
        (7, "expected string, got integer"),
        ([1], "expected string, got array"),
        (Tag("agent_message_chunk"), "expected string"),
    ]:
        with pytest.raises(types.DecodeError) as info:
            T.SessionNotification.from_dict(notification({"sessionUpdate": tag, "content": {}}))
        assert info.value.path == "update.sessionUpdate" and info.value.message.startswith(message)
    with pytest.raises(types.DecodeError, match="update.content.type: missing required field"):
        T.SessionNotification.from_dict(notification({"sessionUpdate": "agent_message_chunk", "content": {}}))
    unknown = T.SessionNotification.from_dict(notification({"sessionUpdate": "new_kind", "x": 1}))
    assert isinstance(unknown.update, T.UnknownSessionUpdate)


def test_invalid_json_text_is_a_decode_error() -> None:
    with pytest.raises(types.DecodeError):
        T.PromptRequest.from_json("{not json")
    with pytest.raises(types.DecodeError) as info:
        T.PromptRequest.from_json(b"[]")
    assert info.value.path == ""


def test_dispatcher_reports_the_path_as_invalid_params() -> None:
    class Handler:
        async def session_prompt(self, params: Any) -> Any:  # pragma: no cover - never reached
            raise AssertionError("must not be called with invalid params")

    dispatcher = agent.Dispatcher(Handler(), frozenset({"session/prompt"}))
    with pytest.raises(agent.RequestError) as info:
        asyncio.run(dispatcher.request("session/prompt", {"sessionId": "s", "prompt": [{"type": 5}]}))
    assert info.value.code == -32602
    assert info.value.data["path"] == "params.prompt[0].type"


# -- 11. tagged unions are decoded by the tag, never by trying variants in order -------------


def test_mcp_server_without_type_is_stdio() -> None:
    wire = {"name": "fs", "command": "/bin/mcp", "args": ["--stdio"], "env": [{"name": "K", "value": "V"}]}
    server = T.decode_McpServer(wire, strict())
    assert isinstance(server, T.McpServerStdio)
    assert server.env[0].name == "K"
    assert T.encode_McpServer(server) == wire
    assert "type" not in T.encode_McpServer(server)


def test_mcp_server_tag_wins_over_shape() -> None:
    # Has every stdio field but says http: it is an (invalid) http server, not stdio.
    with pytest.raises(types.DecodeError) as info:
        T.decode_McpServer({"type": "http", "name": "n", "command": "c", "args": [], "env": []})
    assert info.value.path in ("url", "headers")
    http = {"type": "http", "name": "n", "url": "https://x", "headers": [], "command": "c"}
    server = T.decode_McpServer(http, strict())
    assert isinstance(server, T.McpServerHttp)
    assert server.extra == {"command": "c"}
    assert T.encode_McpServer(server) == http
    # A stdio server missing a field is an error at that field, not some other variant.
    with pytest.raises(types.DecodeError) as info:
        T.decode_McpServer({"name": "n", "command": "c", "args": []})
    assert info.value.path == "env"


def test_auth_method_without_type_is_agent() -> None:
    wire = {"id": "agent-login", "name": "Agent login", "description": "d"}
    method = T.decode_AuthMethod(wire, strict())
    assert isinstance(method, T.AuthMethodAgent)
    assert T.encode_AuthMethod(method) == wire
    terminal = {"id": "t", "name": "T", "type": "terminal", "args": ["--login"], "env": {"A": "1"}}
    method = T.decode_AuthMethod(terminal, strict())
    assert isinstance(method, T.AuthMethodTerminal)
    assert T.encode_AuthMethod(method) == terminal
    # Terminal-only fields without the tag do not make it a terminal method.
    shaped = {"id": "a", "name": "A", "args": ["--login"]}
    method = T.decode_AuthMethod(shaped, strict())
    assert isinstance(method, T.AuthMethodAgent)
    assert method.extra == {"args": ["--login"]}


def test_content_block_decoded_by_tag_not_by_shape() -> None:
    # An `image` block that also has `text`: an ImageContent (text kept as unknown), never TextContent.
    wire = {"type": "image", "mimeType": "image/png", "data": "AAAA", "text": "alt"}
    block = T.decode_ContentBlock(wire, strict())
    assert isinstance(block, T.ImageContent)
    assert block.extra == {"text": "alt"}
    assert T.encode_ContentBlock(block) == wire
    # An `image` block missing its data is an error at `data`, not a fallback to TextContent.
    with pytest.raises(types.DecodeError) as info:
        T.decode_ContentBlock({"type": "image", "text": "hi"})
    assert info.value.path in ("data", "mimeType")


def test_other_tagged_unions_by_tag() -> None:
    outcome = T.decode_RequestPermissionOutcome({"outcome": "cancelled", "optionId": "o"}, strict())
    assert isinstance(outcome, T.RequestPermissionOutcomeCancelled)
    assert outcome.extra == {"optionId": "o"}
    with pytest.raises(types.DecodeError) as info:
        T.decode_RequestPermissionOutcome({"outcome": "selected"})
    assert info.value.path == "optionId"
    content = T.decode_ToolCallContent({"type": "terminal", "terminalId": "t", "path": "/a", "newText": "x"}, strict())
    assert isinstance(content, T.Terminal)
    update = T.decode_SessionUpdate({"sessionUpdate": "plan", "entries": [], "content": {"type": "text", "text": "x"}})
    assert isinstance(update, T.Plan)
    with pytest.raises(types.DecodeError) as info:
        T.decode_SessionUpdate({"sessionUpdate": "user_message_chunk", "toolCallId": "c", "title": "t"})
    assert info.value.path == "content"


@pytest.mark.parametrize("union", ["ContentBlock", "SessionUpdate", "ToolCallContent", "McpServer", "AuthMethod"])
def test_non_string_tag_is_an_error_at_the_tag(union: str) -> None:
    tag = {"SessionUpdate": "sessionUpdate"}.get(union, "type")
    with pytest.raises(types.DecodeError) as info:
        getattr(T, f"decode_{union}")({tag: 3, "name": "n", "id": "i", "command": "c", "args": [], "env": []})
    assert info.value.path == tag
    with pytest.raises(types.DecodeError) as info:
        getattr(T, f"decode_{union}")(["not", "an", "object"])
    assert info.value.path == ""


# -- 12. JSON text: to_json / from_json agree with the JSON the dict API carries ---------------

# With orjson importable the generated `dumps`/`loads` use it; orjson only handles 64-bit
# integers and rejects lone surrogates, where the stdlib `json` the dict API is measured
# against handles both. Found by the property tests (an unknown field holding a big integer).


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param({"type": "text", "text": "x", "big": 2**64}, id="unknown-field-beyond-64-bits"),
        pytest.param({"type": "text", "text": "x", "neg": -(2**63) - 1}, id="negative-beyond-64-bits"),
        pytest.param({"type": "text", "text": "\ud800"}, id="lone-surrogate"),
    ],
)
def test_to_json_handles_what_to_dict_handles(wire: dict[str, Any]) -> None:
    block = T.TextContent.from_dict(wire)
    assert block.to_dict() == wire
    assert json.loads(block.to_json()) == wire


def test_from_json_keeps_big_integers_exact() -> None:
    text = '{"type":"text","text":"x","big":18446744073709551616}'
    block = T.TextContent.from_json(text)
    assert block.extra == {"big": 2**64}
    assert type(block.extra["big"]) is int


# -- 13. the schema's own union rules (found while writing these tests) ------------------------


def test_set_config_option_unknown_type_with_string_value_is_value_id() -> None:
    wire = {"sessionId": "s", "configId": "mode", "type": "_acme", "value": "code"}
    params = METHODS["session/set_config_option"].decode_params(wire, strict())
    assert isinstance(params, T.SetSessionConfigOptionRequestValueId)
    assert params.value == "code"
    assert METHODS["session/set_config_option"].encode_params(params) == wire


def test_set_config_option_without_type_is_value_id() -> None:
    wire = {"sessionId": "s", "configId": "mode", "value": "code"}
    params = METHODS["session/set_config_option"].decode_params(wire, strict())
    assert isinstance(params, T.SetSessionConfigOptionRequestValueId)
    boolean = {"sessionId": "s", "configId": "brave", "type": "boolean", "value": True}
    assert isinstance(
        METHODS["session/set_config_option"].decode_params(boolean, strict()), T.SetSessionConfigOptionRequestBoolean
    )


@pytest.mark.parametrize("mode", ["form", "url"])
def test_elicitation_request_needs_a_scope(mode: str) -> None:
    wire: dict[str, Any] = {"mode": mode, "message": "m"}
    if mode == "form":
        wire["requestedSchema"] = {"type": "object", "properties": {}}
    else:
        wire.update(elicitationId="e", url="https://example.com")
    assert METHODS["elicitation/create"].decode_params({**wire, "sessionId": "s"}, strict())
    assert METHODS["elicitation/create"].decode_params({**wire, "requestId": 7}, strict())
    with pytest.raises(types.DecodeError):
        METHODS["elicitation/create"].decode_params(wire, strict())


# -- the shared empty `extra` of decoded objects (issue 31 §2: fewer allocations per object) ----


def test_decoded_objects_without_unknown_fields_share_one_read_only_extra() -> None:
    import copy
    import dataclasses
    import pickle

    first = T.TextContent.from_dict({"type": "text", "text": "a"})
    second = T.TextContent.from_dict({"type": "text", "text": "b", "_meta": {"k": 1}})
    assert first.extra is second.extra and first.extra == {} and not first.extra
    for mutate in (
        lambda e: e.__setitem__("k", 1),
        lambda e: e.update(k=1),
        lambda e: e.update({"k": 1}),
        lambda e: e.setdefault("k", 1),
        lambda e: e.__ior__({"k": 1}),
    ):
        with pytest.raises(TypeError, match="assign a dict of your own"):
            mutate(first.extra)
    # What leaves an empty dict empty behaves as on any empty dict.
    assert first.extra.pop("k", None) is None and first.extra.get("k") is None
    first.extra.update({})
    first.extra.clear()
    for missing in (lambda e: e.pop("k"), lambda e: e.popitem(), lambda e: e.__delitem__("k")):
        with pytest.raises(KeyError):
            missing(first.extra)
    assert first.extra == {}
    first.extra = {"futureField": 1}  # the way to add fields: a dict of its own
    assert first.to_dict() == {"type": "text", "text": "a", "futureField": 1} and second.extra == {}
    # Built, copied, pickled or compared, it behaves as the empty dict it stands for.
    assert second == T.TextContent(text="b", meta={"k": 1})
    built = T.TextContent(text="c")
    built.extra["k"] = 1  # a constructed object's extra is its own, as before
    assert dataclasses.replace(second, text="d").to_dict() == {"type": "text", "text": "d", "_meta": {"k": 1}}
    assert copy.deepcopy(second) == second and pickle.loads(pickle.dumps(second)) == second
    assert json.loads(second.to_json()) == {"type": "text", "text": "b", "_meta": {"k": 1}}
    # With unknown fields, an object keeps them in a dict of its own.
    third = T.TextContent.from_dict({"type": "text", "text": "e", "x": 1})
    third.extra["y"] = 2
    assert third.to_dict() == {"type": "text", "text": "e", "x": 1, "y": 2}
