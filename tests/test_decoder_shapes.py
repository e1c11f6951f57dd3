"""Decoder behaviour on small hand-made schemas (issue 9 kinds 2 and 4, issue 11.5).

All shape schemas of this module are generated once (the `decoder_shapes` fixture) into one
folder, so the static checks run over all of them at once: mypy --strict here, both pyrights in the
suite's one run (`pyright_run`).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from budget import MYPY_CORE
from typecheck import PyrightRun, mypy_strict, packages

from codegen.generate import Target, generate_files
from codegen.write import write_tree

ROOT = Path(__file__).resolve().parent.parent
META = {"version": 1, "agentMethods": {"session_new": "session/new"}, "clientMethods": {}, "protocolMethods": {}}


def with_session(**defs: Any) -> dict[str, Any]:
    """A schema with one request/response pair (session/new) whose response holds `fields`."""
    out: dict[str, Any] = {
        "NewSessionRequest": {
            "type": "object",
            "properties": {"cwd": {"type": "string"}},
            "required": ["cwd"],
            "x-side": "agent",
            "x-method": "session/new",
        },
        "NewSessionResponse": {
            "type": "object",
            "properties": {"sessionId": {"type": "string"}},
            "required": ["sessionId"],
            "x-side": "agent",
            "x-method": "session/new",
        },
    }
    out.update(defs)
    return out


def tag_variant(value: str, ref: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"type": {"type": "string", "const": value}},
        "required": ["type"],
        "allOf": [{"$ref": f"#/$defs/{ref}"}],
    }


TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
DIFF = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
STDIO = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}

# A single-valued enum property (issue 9 kind 2): the outgoing-message envelope of v0.5-v0.7.
ENVELOPE = with_session(
    Envelope={
        "type": "object",
        "properties": {
            "jsonrpc": {"type": "string", "enum": ["2.0"]},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "fixed": {"type": "string", "const": "x"},
            "id": {"type": "integer"},
        },
        "required": ["jsonrpc", "id"],
    }
)

# Tagged unions (issue 9 kind 4): closed (no open variant), with a catch-all, with a fallback.
UNIONS = with_session(
    Text=TEXT,
    Diff=DIFF,
    Stdio=STDIO,
    Closed={
        "oneOf": [tag_variant("text", "Text"), tag_variant("diff", "Diff")],
        "discriminator": {"propertyName": "type"},
    },
    CatchAll={
        "oneOf": [
            tag_variant("text", "Text"),
            {"type": "object", "properties": {"type": {"type": "string"}}, "required": ["type"]},
        ]
    },
    WithFallback={"anyOf": [tag_variant("diff", "Diff"), {"title": "stdio", "allOf": [{"$ref": "#/$defs/Stdio"}]}]},
    Holder={
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/Closed"}},
            "one": {"$ref": "#/$defs/Closed"},
        },
    },
)

SCHEMAS = {"dec_envelope": ENVELOPE, "dec_unions": UNIONS}


def write_shapes(base: Path) -> Path:
    """Every shape schema of this module, generated as an agent package under one folder."""
    for name, defs in SCHEMAS.items():
        schema_dir = base / "schemas" / name
        schema_dir.mkdir(parents=True)
        (schema_dir / "schema.json").write_text(json.dumps({"$defs": defs}))
        (schema_dir / "meta.json").write_text(json.dumps(META))
        target = Target("agent", base / "out" / name, str(schema_dir))
        write_tree(target.out, generate_files(target))
    return base / "out"


def load(shapes: Path, name: str) -> ModuleType:
    sys.path.insert(0, str(shapes))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(shapes))


# -- issue 9 kind 2: a single-valued enum property ------------------------------------------------


def test_single_value_enum_property_decodes_to_its_literal(decoder_shapes: Path) -> None:
    types = load(decoder_shapes, "dec_envelope").types
    wire = {"jsonrpc": "2.0", "id": 1, "mode": "b", "fixed": "x"}
    value = types.Envelope.from_dict(wire)
    assert value.jsonrpc == "2.0" and value.mode == "b" and value.fixed == "x"
    assert value.to_dict() == wire
    for bad in ({"jsonrpc": "1.0", "id": 1}, {"jsonrpc": 2.0, "id": 1}, {"jsonrpc": "2.0", "id": 1, "mode": "c"}):
        with pytest.raises(types.DecodeError):
            types.Envelope.from_dict(bad)


@pytest.mark.slow
def test_mypy_strict_on_shape_outputs(decoder_shapes: Path, mypy_cache: Path) -> None:
    """Kind 2 was a mypy error (`str` assigned to `Literal['2.0']`): the output must check clean."""
    result = mypy_strict(decoder_shapes, *MYPY_CORE, *packages(SCHEMAS), cache=mypy_cache)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert errors == [], result.stdout + result.stderr


@pytest.mark.slow
def test_pyright_strict_on_shape_outputs(decoder_shapes: Path, pyright_run: PyrightRun) -> None:
    result = pyright_run.part([decoder_shapes])
    assert {path.relative_to(decoder_shapes.resolve()).parts[0] for path in result.stands_for} == set(SCHEMAS)
    errors = result.all_problems()
    assert errors == [], result.output


# -- issue 9 kind 4: strict mode rejects an unknown tag of a closed union --------------------------


def test_closed_union_unknown_tag_lenient_keeps_strict_rejects(decoder_shapes: Path) -> None:
    types = load(decoder_shapes, "dec_unions").types
    wire = {"type": "video", "url": "u"}
    kept = types.decode_Closed(wire)
    assert type(kept).__name__ == "UnknownClosed" and kept.to_dict() == wire
    with pytest.raises(types.DecodeError, match="video") as info:
        types.decode_Closed(wire, types.DecodeContext(strict=True))
    assert info.value.path == "type"
    nested = {"items": [{"type": "text", "text": "t"}, wire]}
    assert types.Holder.from_dict(nested).to_dict() == nested
    with pytest.raises(types.DecodeError) as info:
        types.Holder.from_dict(nested, types.DecodeContext(strict=True))
    assert info.value.path == "items[1].type"
    # Known tags still decode strictly.
    known = {"type": "diff", "path": "p"}
    assert types.decode_Closed(known, types.DecodeContext(strict=True)).to_dict() == known


def test_open_unions_keep_unknown_tags_in_strict_mode(decoder_shapes: Path) -> None:
    types = load(decoder_shapes, "dec_unions").types
    strict = types.DecodeContext(strict=True)
    # A catch-all variant (`"type": {"type": "string"}`) admits any tag: the schema allows it.
    assert types.decode_CatchAll({"type": "new", "x": 1}, strict).to_dict() == {"type": "new", "x": 1}
    # An untagged fallback variant leaves the tag open, so the union is not closed either.
    assert types.decode_WithFallback({"type": "ws", "command": "c"}, strict).to_dict() == {"type": "ws", "command": "c"}


def test_strict_rejects_unknown_tool_call_content_of_bundled_schema() -> None:
    from agent import types

    wire = {"type": "text", "text": "not a ToolCallContent tag"}
    assert isinstance(types.decode_ToolCallContent(wire), types.UnknownToolCallContent)
    with pytest.raises(types.DecodeError, match="text"):
        types.decode_ToolCallContent(wire, types.DecodeContext(strict=True))
    update = {
        "sessionId": "s",
        "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [wire]},
    }
    with pytest.raises(types.DecodeError) as info:
        types.SessionNotification.from_dict(update, types.DecodeContext(strict=True))
    assert info.value.path == "update.content[0].type"
    # An open union of the same schema (AuthMethod has an untagged fallback) keeps its unknowns.
    method = {"type": "env_var", "id": "e", "name": "n"}
    assert types.decode_AuthMethod(method, types.DecodeContext(strict=True)).to_dict() == method


# -- issue 11.5: report every unknown field and union variant, with its JSON path ----------------


def test_report_unknown_lists_unknown_fields_and_variants_with_paths() -> None:
    from agent import types

    wire = {
        "sessionId": "s",
        "future": 1,
        "update": {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "newField": {"a": 1},
            "content": [{"type": "content", "content": {"type": "video", "uri": "u"}, "x": True}],
        },
    }
    quiet = types.DecodeContext()
    assert types.SessionNotification.from_dict(wire, quiet).to_dict() == wire
    assert quiet.warnings == []  # the default stays silent

    seen: list[types.LenientWarning] = []
    ctx = types.DecodeContext(report_unknown=True, on_warning=seen.append)
    value = types.SessionNotification.from_dict(wire, ctx)
    assert value.to_dict() == wire  # nothing dropped
    assert seen == ctx.warnings
    got = sorted((w.path, w.kind, w.strict_rejects) for w in ctx.warnings)
    assert got == [
        ("future", "unknown_field", False),
        ("update.content[0].content", "unknown_variant", True),  # ContentBlock is closed
        ("update.content[0].x", "unknown_field", False),
        ("update.newField", "unknown_field", False),
    ]
    variant = next(w for w in ctx.warnings if w.kind == "unknown_variant")
    assert "ContentBlock" in variant.message and "'video'" in variant.message


def test_report_unknown_in_strict_mode_reports_what_strict_accepts(decoder_shapes: Path) -> None:
    types = load(decoder_shapes, "dec_unions").types
    ctx = types.DecodeContext(strict=True, report_unknown=True)
    wire = {"type": "new", "x": 1}
    assert types.decode_CatchAll(wire, ctx).to_dict() == wire
    wire = {"type": "ws", "command": "c"}
    assert types.decode_WithFallback(wire, ctx).to_dict() == wire
    assert [(w.path, w.kind, w.strict_rejects) for w in ctx.warnings] == [
        ("", "unknown_variant", False),
        ("", "unknown_variant", False),
    ]
    # Known variants with unknown fields: reported, kept.
    holder = {"one": {"type": "text", "text": "t", "lang": "en"}}
    ctx = types.DecodeContext(strict=True, report_unknown=True)
    assert types.Holder.from_dict(holder, ctx).to_dict() == holder
    assert [(w.path, w.kind) for w in ctx.warnings] == [("one.lang", "unknown_field")]
