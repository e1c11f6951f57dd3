"""`acp-codegen diff OLD NEW`: the v1.20.0 -> v1.21.0 release, every change kind on small schemas, the formats."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from codegen import diff
from codegen.cli import app
from codegen.diff import KINDS, Change, DiffReport, diff_schemas
from codegen.diff_format import TEMPLATES, render

ROOT = Path(__file__).resolve().parent.parent
OLD = ROOT / "tests" / "fixtures" / "schemas" / "v1.20.0"
NEW = ROOT / "schema" / "v1"

Row = tuple[str, str, str | None, str]  # kind, target, member, the sides it breaks ("agent,client")


def rows(changes: tuple[Change, ...]) -> list[Row]:
    return [(c.kind, c.target, c.member, ",".join(sorted(c.breaking))) for c in changes]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


# --- the 1.21.0 release --------------------------------------------------------------------------
# Computed by hand from the two schemas (see test_raw_schema_facts_behind_the_expected_lists).

# Types 1.21.0 adds to the stable schema: the 28 new `$defs` plus the 5 variant classes the IR names
# for their inline union variants (CreateElicitationRequest{Form,Url}, CreateElicitationResponse{...}).
NEW_STABLE_DEFS = [
    "AuthCapabilities",
    "AuthMethodTerminal",
    "BooleanPropertySchema",
    "CompleteElicitationNotification",
    "CreateElicitationRequest",
    "CreateElicitationResponse",
    "ElicitationAcceptAction",
    "ElicitationCapabilities",
    "ElicitationContentValue",
    "ElicitationFormCapabilities",
    "ElicitationFormMode",
    "ElicitationId",
    "ElicitationPropertySchema",
    "ElicitationRequestScope",
    "ElicitationSchema",
    "ElicitationSchemaType",
    "ElicitationSessionScope",
    "ElicitationUrlCapabilities",
    "ElicitationUrlMode",
    "EnumOption",
    "IntegerPropertySchema",
    "MultiSelectItems",
    "MultiSelectPropertySchema",
    "NumberPropertySchema",
    "StringFormat",
    "StringMultiSelectItems",
    "StringPropertySchema",
    "TitledMultiSelectItems",
]
SYNTHESIZED = [
    "CreateElicitationRequestForm",
    "CreateElicitationRequestUrl",
    "CreateElicitationResponseAccept",
    "CreateElicitationResponseCancel",
    "CreateElicitationResponseDecline",
]
NEW_STABLE_TYPES = sorted(NEW_STABLE_DEFS + SYNTHESIZED)

STABLE_CHANGES: list[Row] = [
    # stabilize elicitation
    ("method-added", "elicitation/complete", None, ""),
    ("method-added", "elicitation/create", None, ""),
    ("field-added", "ClientCapabilities", "elicitation", ""),
    # stabilize terminal authentication. Breaking for clients: a 1.20 client reads a terminal method as
    # AuthMethodAgent (1.20's AuthMethod has no tag); agents only send it to clients that opted in via
    # ClientCapabilities.auth.terminal, which the schema cannot express.
    ("variant-added", "AuthMethod", "type=terminal", "client"),
    ("field-added", "ClientCapabilities", "auth", ""),
    # the new types of both
    *[("type-added", name, None, "") for name in NEW_STABLE_TYPES],
]

UNSTABLE_CHANGES: list[Row] = [
    # stabilize elicitation / terminal authentication: already in 1.20's unstable schema, now stable
    ("method-stability-changed", "elicitation/complete", None, ""),
    ("method-stability-changed", "elicitation/create", None, ""),
    *[("type-stability-changed", name, None, "") for name in NEW_STABLE_TYPES],
    # stabilizing terminal auth dropped the unstable env_var auth method (not named in the CHANGELOG)
    ("type-removed", "AuthEnvVar", None, "agent,client"),
    ("type-removed", "AuthMethodEnvVar", None, "agent,client"),
    ("variant-removed", "AuthMethod", "type=env_var", "agent,client"),
    # add session compaction updates
    ("field-added", "ClientSessionCapabilities", "compaction", ""),
    ("type-added", "CompactionCapabilities", None, ""),
    ("type-added", "CompactionId", None, ""),
    ("type-added", "CompactionStatus", None, ""),
    ("type-added", "CompactionSummaryChunk", None, ""),
    ("type-added", "CompactionUpdate", None, ""),
    ("variant-added", "SessionUpdate", "sessionUpdate=compaction_summary_chunk", ""),
    ("variant-added", "SessionUpdate", "sessionUpdate=compaction_update", ""),
]


@pytest.fixture(scope="module", autouse=True)
def bundled_packages_built_once() -> Iterator[None]:
    """A diff builds the IR of both schemas (load, validate, build_package: ~0.5 s each), and the
    same bundled schemas come back in many tests here, through the API and the CLI. The IR is
    immutable (frozen dataclasses and tuples), so each of those is built once per module; the
    schemas the tests write to tmp_path are built as usual."""
    build = diff._package
    cached = functools.cache(build)

    def package(schema_arg: str, unstable: bool) -> Any:
        return cached(schema_arg, unstable) if schema_arg in ("v1", "v2", str(OLD)) else build(schema_arg, unstable)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(diff, "_package", package)
        yield


@pytest.fixture(scope="module")
def release() -> DiffReport:
    return diff_schemas(str(OLD), "v1")


@pytest.fixture(scope="module")
def release_unstable() -> DiffReport:
    return diff_schemas(str(OLD), "v1", unstable=True)


def test_release_reports_exactly_the_expected_changes(release: DiffReport) -> None:
    assert (release.old.release, release.new.release) == ("1.20.0", "1.21.0")
    assert sorted(rows(release.changes), key=str) == sorted(STABLE_CHANGES, key=str)


def test_release_unstable_reports_exactly_the_expected_changes(release_unstable: DiffReport) -> None:
    assert sorted(rows(release_unstable.changes), key=str) == sorted(UNSTABLE_CHANGES, key=str)


def test_compaction_shows_only_with_unstable(release: DiffReport, release_unstable: DiffReport) -> None:
    assert not [c for c in release.changes if "ompaction" in f"{c.target} {c.member} {c.new}"]
    assert len([c for c in release_unstable.changes if "ompaction" in f"{c.target} {c.member} {c.new}"]) == 8


def test_every_changelog_entry_shows_up(release: DiffReport, release_unstable: DiffReport) -> None:
    text = (NEW / "CHANGELOG.md").read_text()
    entry = text.split("## [1.21.0]")[1].split("\n## [")[0]
    added = entry.split("### Added")[1].split("###")[0]
    bullets = sorted(re.findall(r"^- \*\((\w+)\)\* (.+?) \(\[#", added, re.M))
    stable = set(rows(release.changes))
    unstable = set(rows(release_unstable.changes))
    evidence = {
        ("schema", "stabilize terminal authentication"): [
            ("variant-added", "AuthMethod", "type=terminal", "client") in stable,
            ("field-added", "ClientCapabilities", "auth", "") in stable,
            ("type-added", "AuthCapabilities", None, "") in stable,
            ("type-stability-changed", "AuthMethodTerminal", None, "") in unstable,
        ],
        ("schema", "stabilize elicitation"): [
            ("method-added", "elicitation/create", None, "") in stable,
            ("method-added", "elicitation/complete", None, "") in stable,
            ("field-added", "ClientCapabilities", "elicitation", "") in stable,
            ("method-stability-changed", "elicitation/create", None, "") in unstable,
        ],
        ("unstable", "add session compaction updates"): [
            ("variant-added", "SessionUpdate", "sessionUpdate=compaction_update", "") in unstable,
            ("field-added", "ClientSessionCapabilities", "compaction", "") in unstable,
        ],
    }
    assert sorted(evidence) == bullets
    assert {k: all(v) for k, v in evidence.items()} == {k: True for k in evidence}


def test_raw_schema_facts_behind_the_expected_lists() -> None:
    """The expected lists above, checked against the raw JSON rather than the IR."""

    def defs(directory: Path, name: str) -> dict[str, Any]:
        return dict(json.loads((directory / name).read_text())["$defs"])

    def methods(directory: Path, name: str) -> set[str]:
        meta = json.loads((directory / name).read_text())
        return {m for key in ("agentMethods", "clientMethods", "protocolMethods") for m in meta.get(key, {}).values()}

    old, new = defs(OLD, "schema.json"), defs(NEW, "schema.json")
    assert sorted(new.keys() - old.keys()) == NEW_STABLE_DEFS and not old.keys() - new.keys()
    assert methods(NEW, "meta.json") - methods(OLD, "meta.json") == {"elicitation/create", "elicitation/complete"}
    assert methods(OLD, "meta.json") <= methods(NEW, "meta.json")
    assert new["ClientCapabilities"]["properties"].keys() - old["ClientCapabilities"]["properties"].keys() == {
        "auth",
        "elicitation",
    }
    uold, unew = defs(OLD, "schema.unstable.json"), defs(NEW, "schema.unstable.json")
    assert sorted(uold.keys() - unew.keys()) == ["AuthEnvVar", "AuthMethodEnvVar"]
    assert unew.keys() - uold.keys() == {
        "CompactionCapabilities",
        "CompactionId",
        "CompactionStatus",
        "CompactionSummaryChunk",
        "CompactionUpdate",
    }
    assert set(NEW_STABLE_DEFS) <= uold.keys()  # stabilized, not new, in the unstable schema
    assert methods(OLD, "meta.unstable.json") == methods(NEW, "meta.unstable.json")


def test_release_text_output(release: DiffReport) -> None:
    text = render(release, "text")
    lines = text.splitlines()
    assert lines[0] == f"ACP schema diff: 1.20.0 ({OLD}) -> 1.21.0 (v1)"
    assert lines[1] == "38 changes; breaking for agents: 0, for clients: 1"
    assert "  + elicitation/create: added: request handled by client (CreateElicitationRequest -> " in text
    assert (
        "  + AuthMethod: variant type=terminal added: AuthMethodTerminal  "
        "[BREAKING for client: old receivers read it as AuthMethodAgent]"
    ) in lines
    assert "  + ClientCapabilities: field elicitation added: ElicitationCapabilities | None, optional" in lines
    assert lines.index("Methods:") < lines.index("Types:")


# --- identical schemas and v1 -> v2 --------------------------------------------------------------


@pytest.mark.parametrize("unstable", [[], ["--unstable"]])
def test_identical_schemas_have_no_changes(unstable: list[str]) -> None:
    result = invoke("diff", "v1", str(NEW), *unstable, "--fail-on-breaking")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1] == "no API changes"


def test_v1_to_v2_is_a_large_breaking_diff() -> None:
    result = invoke("diff", "v1", "v2", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["summary"]["changes"] > 100
    kinds = {c["kind"] for c in doc["changes"]}
    assert {"method-removed", "method-added", "type-removed", "field-removed", "enum-open-changed"} <= kinds
    removed = {c["target"] for c in doc["changes"] if c["kind"] == "method-removed"}
    assert {"fs/read_text_file", "terminal/create", "session/load"} <= removed
    assert invoke("diff", "v1", "v2", "--fail-on-breaking").exit_code == 1
    assert invoke("diff", "v1", "v2", "--unstable", "--format", "markdown").exit_code == 0


# --- each change kind on a small hand-made schema ------------------------------------------------
# initialize: client -> agent (InitializeRequest), agent -> client (InitializeResponse, Speed, Tone);
# session/prompt: client -> agent (PromptRequest, ContentBlock, TextContent, ImageContent);
# session/update: agent -> client notification (SessionNotification).

BASE: dict[str, Any] = {
    "$defs": {
        "InitializeRequest": {
            "type": "object",
            "x-side": "agent",
            "x-method": "initialize",
            "properties": {"protocolVersion": {"type": "integer"}, "clientName": {"type": "string"}},
            "required": ["protocolVersion"],
        },
        "InitializeResponse": {
            "type": "object",
            "x-side": "agent",
            "x-method": "initialize",
            "properties": {
                "protocolVersion": {"type": "integer"},
                "speed": {"$ref": "#/$defs/Speed"},
                "title": {"type": "string"},
                "tone": {"$ref": "#/$defs/Tone"},
            },
            "required": ["protocolVersion"],
        },
        "Speed": {"oneOf": [{"const": "fast", "type": "string"}, {"const": "slow", "type": "string"}]},
        "Tone": {"oneOf": [{"const": "calm", "type": "string"}, {"type": "string", "description": "any other"}]},
        "PromptRequest": {
            "type": "object",
            "x-side": "agent",
            "x-method": "session/prompt",
            "properties": {
                "sessionId": {"type": "string"},
                "prompt": {"type": "array", "items": {"$ref": "#/$defs/ContentBlock"}},
            },
            "required": ["sessionId", "prompt"],
        },
        "PromptResponse": {
            "type": "object",
            "x-side": "agent",
            "x-method": "session/prompt",
            "properties": {"stopReason": {"type": "string"}},
            "required": ["stopReason"],
        },
        "ContentBlock": {
            "oneOf": [
                {
                    "allOf": [{"$ref": "#/$defs/TextContent"}],
                    "properties": {"type": {"const": "text", "type": "string"}},
                    "required": ["type"],
                    "type": "object",
                },
                {
                    "allOf": [{"$ref": "#/$defs/ImageContent"}],
                    "properties": {"type": {"const": "image", "type": "string"}},
                    "required": ["type"],
                    "type": "object",
                },
            ],
            "discriminator": {"propertyName": "type"},
        },
        "TextContent": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "ImageContent": {"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]},
        "SessionNotification": {
            "type": "object",
            "x-side": "client",
            "x-method": "session/update",
            "properties": {"sessionId": {"type": "string"}, "text": {"type": "string"}},
            "required": ["sessionId"],
        },
    }
}
META: dict[str, Any] = {
    "version": 1,
    "agentMethods": {"initialize": "initialize", "session_prompt": "session/prompt"},
    "clientMethods": {"session_update": "session/update"},
}


def write(directory: Path, schema: dict[str, Any], meta: dict[str, Any]) -> Path:
    directory.mkdir(parents=True)
    (directory / "schema.json").write_text(json.dumps(schema))
    (directory / "meta.json").write_text(json.dumps(meta))
    return directory


def diff_after(tmp_path: Path, edit: Any) -> list[Row]:
    """Rows of the diff BASE -> BASE changed by `edit(defs, meta)`."""
    schema, meta = copy.deepcopy(BASE), copy.deepcopy(META)
    edit(schema["$defs"], meta)
    old = write(tmp_path / "old", BASE, META)
    new = write(tmp_path / "new", schema, meta)
    return rows(diff_schemas(str(old), str(new)).changes)


def _props(defs: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(defs[name]["properties"])


def add_field(name: str, wire: str, required: bool) -> Any:
    def edit(defs: dict[str, Any], meta: dict[str, Any]) -> None:
        defs[name]["properties"][wire] = {"type": "string"}
        if required:
            defs[name]["required"].append(wire)

    return edit


def set_required(name: str, wire: str, required: bool) -> Any:
    def edit(defs: dict[str, Any], meta: dict[str, Any]) -> None:
        names = [n for n in defs[name]["required"] if n != wire]
        defs[name]["required"] = [*names, wire] if required else names

    return edit


def set_type(name: str, wire: str, node: dict[str, Any]) -> Any:
    def edit(defs: dict[str, Any], meta: dict[str, Any]) -> None:
        defs[name]["properties"][wire] = node

    return edit


def _del(*path: str) -> Any:
    def edit(defs: dict[str, Any], meta: dict[str, Any]) -> None:
        node: Any = {"defs": defs, "meta": meta}
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return edit


def _enum_values(name: str, values: list[str], catch_all: bool) -> Any:
    def edit(defs: dict[str, Any], meta: dict[str, Any]) -> None:
        alts: list[Any] = [{"const": v, "type": "string"} for v in values]
        defs[name] = {"oneOf": alts + ([{"type": "string"}] if catch_all else [])}

    return edit


def _add_variant(defs: dict[str, Any], meta: dict[str, Any]) -> None:
    defs["AudioContent"] = {"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}
    variant = copy.deepcopy(defs["ContentBlock"]["oneOf"][1])
    variant["allOf"] = [{"$ref": "#/$defs/AudioContent"}]
    variant["properties"]["type"]["const"] = "audio"
    defs["ContentBlock"]["oneOf"].append(variant)


def _drop_variant(defs: dict[str, Any], meta: dict[str, Any]) -> None:
    defs["ContentBlock"]["oneOf"].pop()
    del defs["ImageContent"]


def _untagged_prompt(defs: dict[str, Any], meta: dict[str, Any]) -> None:
    # PromptRequest.prompt takes one ContentBlock-like union with no tag: text or a bare string
    defs["Input"] = {"anyOf": [{"$ref": "#/$defs/TextContent"}, {"type": "string"}]}
    defs["PromptRequest"]["properties"]["input"] = {"$ref": "#/$defs/Input"}


def _baseline_method(defs: dict[str, Any], meta: dict[str, Any]) -> None:
    defs["CancelNotification"] = {
        "type": "object",
        "x-side": "agent",
        "x-method": "session/cancel",
        "properties": {"sessionId": {"type": "string"}},
        "required": ["sessionId"],
    }
    meta["agentMethods"]["session_cancel"] = "session/cancel"


def _optional_method(defs: dict[str, Any], meta: dict[str, Any]) -> None:
    defs["PingRequest"] = {"type": "object", "x-side": "client", "x-method": "ping", "properties": {}}
    defs["PingResponse"] = {"type": "object", "x-side": "client", "x-method": "ping", "properties": {}}
    meta["clientMethods"]["ping"] = "ping"


def _update_becomes_agent_side(defs: dict[str, Any], meta: dict[str, Any]) -> None:
    del meta["clientMethods"]["session_update"]
    meta["agentMethods"]["session_update"] = "session/update"
    defs["SessionNotification"]["x-side"] = "agent"


def _prompt_becomes_notification(defs: dict[str, Any], meta: dict[str, Any]) -> None:
    del defs["PromptResponse"]
    defs["PromptNotification"] = defs.pop("PromptRequest")


def _prompt_also_as_notification(defs: dict[str, Any], meta: dict[str, Any]) -> None:
    defs["PromptNotification"] = copy.deepcopy(defs["PromptRequest"])


CASES: dict[str, tuple[Any, list[Row]]] = {
    # fields: InitializeRequest is sent by the client, InitializeResponse by the agent
    "optional field added": (add_field("InitializeRequest", "locale", False), [
        ("field-added", "InitializeRequest", "locale", ""),
    ]),
    "required field added, client sends": (add_field("InitializeRequest", "locale", True), [
        ("field-added", "InitializeRequest", "locale", "client"),
    ]),
    "required field added, agent sends": (add_field("InitializeResponse", "motd", True), [
        ("field-added", "InitializeResponse", "motd", "agent"),
    ]),
    "optional field removed": (_del("defs", "InitializeRequest", "properties", "clientName"), [
        ("field-removed", "InitializeRequest", "clientName", "agent,client"),
    ]),
    "optional -> required": (set_required("InitializeRequest", "clientName", True), [
        ("field-required-changed", "InitializeRequest", "clientName", "client"),
    ]),
    "required -> optional": (set_required("InitializeResponse", "protocolVersion", False), [
        ("field-required-changed", "InitializeResponse", "protocolVersion", "client"),
    ]),
    "nullable added": (set_type("InitializeResponse", "title", {"type": ["string", "null"]}), [
        ("field-nullable-changed", "InitializeResponse", "title", "client"),
    ]),
    "nullable added, client sends": (set_type("InitializeRequest", "clientName", {"type": ["string", "null"]}), [
        ("field-nullable-changed", "InitializeRequest", "clientName", "agent"),
    ]),
    "type widened int -> float": (set_type("InitializeResponse", "protocolVersion", {"type": "number"}), [
        ("field-type-changed", "InitializeResponse", "protocolVersion", "client"),
    ]),
    "type changed str -> int": (set_type("InitializeRequest", "clientName", {"type": "integer"}), [
        ("field-type-changed", "InitializeRequest", "clientName", "agent,client"),
    ]),
    "str -> Literal narrows": (set_type("InitializeResponse", "title", {"enum": ["a", "b"], "type": "string"}), [
        ("field-type-changed", "InitializeResponse", "title", "agent"),
    ]),
    # enums: Speed (closed) and Tone (open) are sent by the agent
    "closed enum value added": (_enum_values("Speed", ["fast", "slow", "warp"], False), [
        ("enum-value-added", "Speed", "warp", "client"),
    ]),
    "closed enum value removed": (_enum_values("Speed", ["fast"], False), [
        ("enum-value-removed", "Speed", "slow", "agent,client"),
    ]),
    "open enum value added": (_enum_values("Tone", ["calm", "loud"], True), [
        ("enum-value-added", "Tone", "loud", ""),
    ]),
    "enum closed -> open": (_enum_values("Speed", ["fast", "slow"], True), [
        ("enum-open-changed", "Speed", None, "client"),
    ]),
    "enum open -> closed": (_enum_values("Tone", ["calm"], False), [
        ("enum-open-changed", "Tone", None, "agent"),
    ]),
    # unions: ContentBlock is tagged and keeps unknown tags; it is sent by the client
    "tagged variant added": (_add_variant, [
        ("type-added", "AudioContent", None, ""),
        ("variant-added", "ContentBlock", "type=audio", ""),
    ]),
    "tagged variant removed": (_drop_variant, [
        ("type-removed", "ImageContent", None, "agent,client"),
        ("variant-removed", "ContentBlock", "type=image", "agent,client"),
    ]),
    # types and methods
    "method removed": (_del("meta", "clientMethods", "session_update"), [
        ("method-removed", "session/update", None, "agent,client"),
    ]),
    "optional method added": (_optional_method, [
        ("method-added", "ping", None, ""),
        ("type-added", "PingRequest", None, ""),
        ("type-added", "PingResponse", None, ""),
    ]),
    "baseline method added": (_baseline_method, [
        ("method-added", "session/cancel", None, "agent"),
        ("type-added", "CancelNotification", None, ""),
    ]),
    "handling side changed": (_update_becomes_agent_side, [
        ("method-side-changed", "session/update", None, "agent,client"),
    ]),
    "notification form added": (_prompt_also_as_notification, [
        ("method-notification-changed", "session/prompt", None, "agent,client"),
        ("type-added", "PromptNotification", None, ""),
    ]),
    "request -> notification": (_prompt_becomes_notification, [
        ("method-kind-changed", "session/prompt", None, "agent,client"),
        ("method-params-changed", "session/prompt", None, "agent,client"),
        ("type-added", "PromptNotification", None, ""),
        ("type-removed", "PromptRequest", None, "agent,client"),
        ("type-removed", "PromptResponse", None, "agent,client"),
    ]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_change_kind(tmp_path: Path, case: str) -> None:
    edit, want = CASES[case]
    assert sorted(diff_after(tmp_path, edit), key=str) == sorted(want, key=str)


def test_untagged_union_variant_added_breaks_receivers(tmp_path: Path) -> None:
    def more(defs: dict[str, Any], meta: dict[str, Any]) -> None:
        _untagged_prompt(defs, meta)
        defs["Input"]["anyOf"].append({"type": "integer"})

    schema, meta = copy.deepcopy(BASE), copy.deepcopy(META)
    _untagged_prompt(schema["$defs"], meta)
    old = write(tmp_path / "old", schema, meta)
    more(schema["$defs"], meta)
    new = write(tmp_path / "new", schema, meta)
    assert rows(diff_schemas(str(old), str(new)).changes) == [("variant-added", "Input", "int", "agent")]


def test_alias_spelling_is_not_a_type_change(tmp_path: Path) -> None:
    def alias(defs: dict[str, Any], meta: dict[str, Any]) -> None:
        defs["SessionId"] = {"type": "string"}
        defs["PromptRequest"]["properties"]["sessionId"] = {"$ref": "#/$defs/SessionId"}

    assert diff_after(tmp_path, alias) == [("type-added", "SessionId", None, "")]


def test_identical_hand_made_schemas(tmp_path: Path) -> None:
    assert diff_after(tmp_path, lambda defs, meta: None) == []


def test_changes_are_in_a_stable_order(tmp_path: Path) -> None:
    def many(defs: dict[str, Any], meta: dict[str, Any]) -> None:
        add_field("InitializeResponse", "zeta", True)(defs, meta)
        add_field("InitializeResponse", "alpha", False)(defs, meta)
        _optional_method(defs, meta)
        _enum_values("Speed", ["slow", "fast", "warp"], False)(defs, meta)

    got = diff_after(tmp_path, many)
    assert got == [
        ("method-added", "ping", None, ""),
        ("field-added", "InitializeResponse", "alpha", ""),
        ("field-added", "InitializeResponse", "zeta", "agent"),
        ("type-added", "PingRequest", None, ""),
        ("type-added", "PingResponse", None, ""),
        ("enum-value-added", "Speed", "warp", "client"),
    ]


# --- CLI: formats, --fail-on-breaking, errors ----------------------------------------------------


@pytest.fixture()
def breaking_pair(tmp_path: Path) -> tuple[str, str]:
    """A required field the client must now send: breaking for clients only."""
    schema, meta = copy.deepcopy(BASE), copy.deepcopy(META)
    add_field("InitializeRequest", "locale", True)(schema["$defs"], meta)
    return str(write(tmp_path / "old", BASE, META)), str(write(tmp_path / "new", schema, meta))


def test_fail_on_breaking_exit_codes(breaking_pair: tuple[str, str]) -> None:
    old, new = breaking_pair
    assert invoke("diff", old, new).exit_code == 0
    assert invoke("diff", old, new, "--fail-on-breaking").exit_code == 1
    assert invoke("diff", old, new, "--fail-on-breaking", "--for", "client").exit_code == 1
    assert invoke("diff", old, new, "--fail-on-breaking", "--for", "agent").exit_code == 0
    assert invoke("diff", str(OLD), "v1", "--fail-on-breaking", "--for", "agent").exit_code == 0
    assert invoke("diff", str(OLD), "v1", "--fail-on-breaking").exit_code == 1


def test_json_format(breaking_pair: tuple[str, str]) -> None:
    old, new = breaking_pair
    result = invoke("diff", old, new, "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc == {
        "format": "acp-codegen-diff/1",
        "old": {"schema": old, "release": "protocol-v1", "unstable": False},
        "new": {"schema": new, "release": "protocol-v1", "unstable": False},
        "summary": {"changes": 1, "breaking": {"agent": 0, "client": 1}},
        "changes": [
            {
                "section": "types",
                "kind": "field-added",
                "target": "InitializeRequest",
                "member": "locale",
                "old": None,
                "new": "str, required",
                "breaking": {"agent": False, "client": True},
                "reason": "senders must supply it; new receivers reject messages without it",
                "message": "field locale added: str, required",
            }
        ],
    }


def test_json_format_of_the_release(release: DiffReport) -> None:
    doc = json.loads(render(release, "json"))
    assert doc["summary"] == {"changes": 38, "breaking": {"agent": 0, "client": 1}}
    assert [c["kind"] for c in doc["changes"]][:2] == ["method-added", "method-added"]
    assert all(c["kind"] in KINDS and c["section"] in ("methods", "types") for c in doc["changes"])
    assert render(release, "json") == render(release, "json")  # stable


def test_markdown_format(breaking_pair: tuple[str, str], release: DiffReport) -> None:
    old, new = breaking_pair
    result = invoke("diff", old, new, "-f", "markdown")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "### ACP schema changes: protocol-v1 → protocol-v1",
        "",
        "1 change · breaking for agents: **0** · breaking for clients: **1**",
        "",
        "#### Types",
        "",
        "| | Type | Change | Breaks agent | Breaks client |",
        "|---|---|---|---|---|",
        "| + | `InitializeRequest` | field locale added: str, required — _senders must supply it; new receivers "
        "reject messages without it_ |  | **yes** |",
    ]
    text = render(release, "markdown")
    assert "#### Methods" in text and "#### Types" in text
    assert "ElicitationCapabilities \\| None" in text  # pipes escaped inside table cells


def test_every_kind_has_a_template() -> None:
    assert set(TEMPLATES) == set(KINDS)


@pytest.mark.parametrize(
    "args",
    [
        ["diff", "no-such-schema", "v1"],
        ["diff", "v1", "tests/fixtures/schemas/nowhere/schema.json"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")


def test_broken_schema_is_reported_not_raised(tmp_path: Path) -> None:
    schema = copy.deepcopy(BASE)
    del schema["$defs"]["ImageContent"]  # ContentBlock now refers to nothing
    new = write(tmp_path / "new", schema, META)
    result = invoke("diff", "v1", str(new))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "ImageContent" in result.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "schema.json").write_text("{not json")
    (bad / "meta.json").write_text("{}")
    result = invoke("diff", str(bad), "v1")
    assert result.exit_code == 2 and "not valid JSON" in result.stderr


def test_unstable_needs_the_unstable_files(tmp_path: Path) -> None:
    old = write(tmp_path / "old", BASE, META)
    result = invoke("diff", str(old), "v1", "--unstable")
    assert result.exit_code == 2 and "schema.unstable.json" in result.stderr


def test_bad_format_is_a_usage_error() -> None:
    assert invoke("diff", "v1", "v1", "--format", "xml").exit_code == 2
    assert invoke("diff", "v1", "v1", "--fail-on-breaking", "--for", "editor").exit_code == 2
