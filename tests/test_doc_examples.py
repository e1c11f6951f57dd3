"""Every JSON example in the protocol docs decodes into the right type and re-encodes to equal JSON.

The examples are extracted from `acp-docs/v1/*.mdx` into tests/fixtures/doc_examples/ (see the
README there). Each one is decoded with the generated bindings of both roles:

- requests / notifications: `METHODS[method].decode_params(params)`;
- responses: `METHODS[method].decode_result(result)`; the method comes from the extractor or,
  where it could not tell (`method: null`), from RESPONSE_METHODS below, worked out by hand;
- error responses: `error` decodes as the schema's `Error`;
- extension methods (`_zed.dev/...`): the schema's open `ExtRequest`/`ExtResponse`/`ExtNotification`;
- fragments: mapped by hand in FRAGMENTS to a schema type (and the variant they must decode to).

"Decodes into the right type" is checked strictly: decoding runs with `DecodeContext(strict=True)`
(no tolerated value may hide a mismatch), the value must be an instance of the expected type, and
nothing in it may be unknown (no `.extra` fields, no `Unknown<Union>` variants) -- the docs
describe the protocol, so an unknown field there is a doc bug or a generator bug. The re-encoded
value (`to_dict` and `to_json`) must equal the example.

Examples that contradict the schema are in KNOWN_DOC_BUGS with the reason, and are asserted to
still fail, so the list cannot silently rot when the docs are fixed.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import agent
import client
import pytest
from serde_support import codec, members, unknowns

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "doc_examples"
EXAMPLES: list[dict[str, Any]] = json.loads((FIXTURES / "examples.json").read_text())
UNPARSEABLE: list[dict[str, Any]] = json.loads((FIXTURES / "unparseable.json").read_text())
BY_ID = {e["id"]: e for e in EXAMPLES}

ROLES = {"agent": agent, "client": client}

# The counts in tests/fixtures/doc_examples/README.md.
EXPECTED_COUNTS = {"request": 29, "notification": 17, "response": 31, "fragment": 17}

# Blocks that are not JSON at all (elided with `[...]`); nothing to decode.
EXPECTED_UNPARSEABLE = {
    "session-config-options-6": "`options: [...]` elided in a session/new-style result",
    "session-config-options-7": "`options: [...]` elided in a config_option_update notification",
}

# Responses whose request is not in the same file (the extractor leaves `method` null).
# Worked out from the section and the shape of `result`.
RESPONSE_METHODS = {
    # "Checking support" sections: the `initialize` response (id 0) advertising a capability.
    "authentication-1": "initialize",
    "extensibility-6": "initialize",
    "file-system-1": "initialize",
    "session-delete-1": "initialize",
    "session-list-1": "initialize",
    "session-setup-3": "initialize",
    "session-setup-8": "initialize",
    "session-setup-11": "initialize",
    "session-setup-18": "initialize",
    "terminals-1": "initialize",
    # `sessionId` plus initial modes / config options: the `session/new` response.
    "session-config-options-1": "session/new",
    "session-modes-1": "session/new",
}

# Extension methods (not in METHODS): the schema's open Ext* types.
EXT_METHODS = {
    "extensibility-2": "ExtRequest",
    "extensibility-3": "ExtResponse",
    "extensibility-5": "ExtNotification",
}

# JSON-RPC error responses: `error` is the schema's `Error`.
ERROR_RESPONSES = {"extensibility-4"}

# Fragments: id -> (schema type, key path inside the fragment, class the value must decode to).
# A non-empty key path means the fragment is an excerpt of a larger object (e.g. the
# `clientCapabilities` member of `initialize` params) and only that member is a whole type.
FRAGMENTS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "authentication-2": ("AuthMethod", (), "AuthMethodAgent"),  # no `type`: the default, agent
    "authentication-3": ("AuthMethod", (), "AuthMethodTerminal"),
    "content-1": ("ContentBlock", (), "TextContent"),
    "content-2": ("ContentBlock", (), "ImageContent"),
    "content-3": ("ContentBlock", (), "AudioContent"),
    "content-4": ("ContentBlock", (), "EmbeddedResource"),
    "content-5": ("ContentBlock", (), "ResourceLink"),
    "elicitation-1": ("ClientCapabilities", ("clientCapabilities",), "ClientCapabilities"),
    "session-config-options-2": ("ClientCapabilities", ("clientCapabilities",), "ClientCapabilities"),
    "session-config-options-3": ("SessionConfigOption", (), "SessionConfigOptionBoolean"),
    "session-setup-15": ("McpServer", (), "McpServerStdio"),  # no `type`: the stdio fallback
    "session-setup-16": ("McpServer", (), "McpServerHttp"),
    "session-setup-17": ("McpServer", (), "McpServerSse"),
    "tool-calls-6": ("ToolCallContent", (), "Content"),
    "tool-calls-7": ("ToolCallContent", (), "Diff"),
    "tool-calls-8": ("ToolCallContent", (), "Terminal"),
    "tool-calls-9": ("ToolCallLocation", (), "ToolCallLocation"),
}

# Examples that contradict schema release 1.21.0: id -> reason (doc bug vs schema change).
# Each is asserted to still fail; when the docs are fixed, remove the entry.
KNOWN_DOC_BUGS = {
    "file-system-1": (
        "doc bug: a 'Checking Support' initialize *response* carrying `clientCapabilities`; client "
        "capabilities are sent in the initialize request params (InitializeRequest), the response "
        "has `agentCapabilities` -- decodes with `clientCapabilities` as an unknown field"
    ),
    "terminals-1": (
        "doc bug: same as file-system-1, `clientCapabilities` shown in the initialize response "
        "(it belongs to the initialize request params)"
    ),
    "file-system-5": (
        "schema change: `fs/write_text_file` returns WriteTextFileResponse, an object (`{}` or with "
        "`_meta`); the docs still show the old `result: null`"
    ),
    "session-setup-7": (
        "schema change: `session/load` returns LoadSessionResponse, an object (optional modes, "
        "configOptions, `_meta`); the docs still show the old `result: null`"
    ),
    "session-modes-3": (
        "doc bug: current_mode_update names the field `modeId`; the schema's CurrentModeUpdate "
        "requires `currentModeId` (what the SDKs send)"
    ),
    "session-modes-4": (
        "doc bug: the tool call's `content` holds a bare ContentBlock `{type: text, ...}`; "
        "ToolCallContent wraps it as `{type: content, content: {type: text, ...}}`, so the item "
        "decodes as an unknown ToolCallContent variant `text`"
    ),
}


def _at(value: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = value[key]
    return value


def _check_value(types: ModuleType, name: str, src: Any, expected: tuple[type, ...]) -> list[str]:
    """Decode `src` as schema type `name` (strictly) and report every way it is not a faithful,
    fully understood round trip."""
    decode, encode = codec(types, name)
    try:
        value = decode(src, types.DecodeContext(strict=True))
    except types.DecodeError as exc:
        return [f"DecodeError: {exc}"]
    problems: list[str] = []
    if expected and not isinstance(value, expected):
        problems.append(f"decoded to {type(value).__name__}, expected {[c.__name__ for c in expected]}")
    problems += unknowns(value)
    out = encode(value)
    if out != src:
        problems.append(f"re-encoded to {out!r}, expected {src!r}")
    if hasattr(value, "to_json") and json.loads(value.to_json()) != src:
        problems.append(f"to_json gave {value.to_json()!r}")
    return problems


def problems_of(example: dict[str, Any], pkg: ModuleType) -> list[str]:
    """Everything wrong with one doc example under the bindings `pkg`; [] means it is good."""
    types = pkg.types
    ex_id, kind, msg = example["id"], example["kind"], example["json"]
    if kind == "fragment":
        name, keys, cls = FRAGMENTS[ex_id]
        problems = []
        if keys and list(msg) != [keys[0]]:
            problems.append(f"fragment wrapper has other keys: {sorted(msg)}")
        return problems + _check_value(types, name, _at(msg, keys), (getattr(types, cls),))

    problems = [] if msg.get("jsonrpc") == "2.0" else ["`jsonrpc` is not '2.0'"]
    if kind in ("request", "notification"):
        method = msg["method"]
        assert method == example["method"]
        if ("id" in msg) != (kind == "request"):
            problems.append(f"a {kind} {'without' if kind == 'request' else 'with'} an `id`")
        if ex_id in EXT_METHODS:
            assert method.startswith("_") and method not in pkg.METHODS
            return problems + _check_value(types, EXT_METHODS[ex_id], msg["params"], ())
        spec = pkg.METHODS[method]
        if spec.kind != kind:
            problems.append(f"{method} is a {spec.kind}, the docs show a {kind}")
        expected = members(types, spec.params_type)
        return problems + _check_value(types, spec.params_type, msg["params"], expected)

    assert kind == "response"
    if "id" not in msg or ("result" in msg) == ("error" in msg):
        problems.append("not a JSON-RPC response (needs `id` and exactly one of result/error)")
    if ex_id in ERROR_RESPONSES:
        return problems + _check_value(types, "Error", msg["error"], (types.Error,))
    if ex_id in EXT_METHODS:
        return problems + _check_value(types, EXT_METHODS[ex_id], msg["result"], ())
    method = example["method"] or RESPONSE_METHODS[ex_id]
    spec = pkg.METHODS[method]
    if spec.result_type is None:
        return problems + [f"{method} is a notification; it has no response"]
    expected = members(types, spec.result_type)
    return problems + _check_value(types, spec.result_type, msg["result"], expected)


GOOD = [e["id"] for e in EXAMPLES if e["id"] not in KNOWN_DOC_BUGS]


# -- coverage: every example is accounted for, explicitly ------------------------------------


def test_example_counts_match_the_fixture_readme() -> None:
    assert len(EXAMPLES) == 94
    assert len(BY_ID) == len(EXAMPLES), "example ids are unique"
    counts = {k: sum(e["kind"] == k for e in EXAMPLES) for k in EXPECTED_COUNTS}
    assert counts == EXPECTED_COUNTS
    assert len(GOOD) + len(KNOWN_DOC_BUGS) == len(EXAMPLES)


def test_the_two_unparseable_examples_are_listed() -> None:
    assert {u["id"]: u["reason"] for u in UNPARSEABLE}.keys() == EXPECTED_UNPARSEABLE.keys()
    assert len(UNPARSEABLE) == 2
    assert not EXPECTED_UNPARSEABLE.keys() & BY_ID.keys()
    for u in UNPARSEABLE:
        assert "[...]" in u["text"]


def test_every_example_has_exactly_one_explicit_mapping() -> None:
    fragments = {e["id"] for e in EXAMPLES if e["kind"] == "fragment"}
    assert FRAGMENTS.keys() == fragments
    unresolved = {e["id"] for e in EXAMPLES if e["kind"] == "response" and e["method"] is None}
    assert RESPONSE_METHODS.keys() == unresolved
    # The "10 initialize responses with id 0".
    inits = [i for i, m in RESPONSE_METHODS.items() if m == "initialize"]
    assert len(inits) == 10
    assert all(BY_ID[i]["json"]["id"] == 0 for i in inits)
    for ex_id in ERROR_RESPONSES:
        assert "error" in BY_ID[ex_id]["json"]
    # Every method named by a non-extension message is in the method table.
    for e in EXAMPLES:
        if e["kind"] != "fragment" and e["id"] not in EXT_METHODS and e["id"] not in ERROR_RESPONSES:
            assert (e["method"] or RESPONSE_METHODS[e["id"]]) in agent.METHODS, e["id"]
    assert KNOWN_DOC_BUGS.keys() <= BY_ID.keys()
    for reason in KNOWN_DOC_BUGS.values():
        assert reason.startswith(("doc bug:", "schema change:"))


def test_every_method_in_the_docs_is_exercised() -> None:
    # Not required by the docs, but a cheap canary: which methods have no example at all.
    seen = {e["method"] or RESPONSE_METHODS.get(e["id"]) for e in EXAMPLES}
    missing = sorted(set(agent.METHODS) - seen)
    assert missing == ["$/cancel_request", "elicitation/complete"]


# -- the examples ------------------------------------------------------------------------------


@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("ex_id", GOOD)
def test_doc_example_round_trips(ex_id: str, role: str) -> None:
    assert problems_of(BY_ID[ex_id], ROLES[role]) == []


@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("ex_id", sorted(KNOWN_DOC_BUGS))
def test_known_doc_bug_still_fails(ex_id: str, role: str) -> None:
    problems = problems_of(BY_ID[ex_id], ROLES[role])
    assert problems, f"{ex_id} now decodes cleanly: remove it from KNOWN_DOC_BUGS ({KNOWN_DOC_BUGS[ex_id]})"


def test_error_response_shape() -> None:
    error = agent.types.Error.from_dict(BY_ID["extensibility-4"]["json"]["error"])
    assert error.code == agent.types.ERROR_CODE_METHOD_NOT_FOUND == -32601
    assert error.message == "Method not found"
    assert error.to_dict() == {"code": -32601, "message": "Method not found"}


def test_checker_rejects_what_it_should() -> None:
    """The checker itself can fail: a wrong field, an unknown field and a wrong type are caught."""
    good = BY_ID["content-1"]
    assert problems_of(good, agent) == []
    bad_type = {**good, "json": {"type": "text", "text": 5}}
    assert any("DecodeError" in p for p in problems_of(bad_type, agent))
    extra = {**good, "json": {"type": "text", "text": "x", "colour": "red"}}
    assert any("unknown fields ['colour']" in p for p in problems_of(extra, agent))
    wrong_variant = {**good, "id": "content-2"}  # content-2 must decode to ImageContent
    assert any("expected ['ImageContent']" in p for p in problems_of(wrong_variant, agent))
