"""Property tests over every schema type: schema-valid values round-trip exactly, and anything
else decodes or raises `DecodeError` -- never another exception.

Values come from hypothesis-jsonschema, one strategy per `$defs` entry, built from a standalone
schema (all `$defs` copied, root `$ref` to the def; tests/serde_schema.py), adapted for speed and
for keywords hypothesis-jsonschema does not support -- every rewrite is listed and justified in
that module's docstring. Each generated value is re-validated against the *literal* standalone
schema (jsonschema, draft 2020-12), so the rewrites cannot drift into generating invalid values.
hypothesis-jsonschema 0.23.1 needs a small compatibility shim with current Hypothesis
(tests/serde_hjs_compat.py), which also draws its "any JSON value" (unknown fields, `_meta`
entries) and the random JSON below with tests/flat_json.py: the same values, fewer draws.

Properties, for every def (classes via `from_dict`/`to_dict`, unions and aliases via
`decode_<Name>`/`encode_<Name>`):

1. schema-valid `j`: decoding reports no tolerated value and `encode(decode(j)) == j`
   (also through JSON text);
2. the decode contract on invalid inputs -- random JSON values, and mutations of valid values
   (a subvalue replaced by an odd value, a key or item deleted, a key or item inserted):
   - decoding either returns a value or raises `DecodeError` (with a `str` path), nothing else;
   - a returned value encodes to JSON; if nothing was tolerated it re-encodes to the input;
   - strict mode agrees: it raises exactly when lenient mode raised or reported a warning,
     and otherwise decodes to the same value.

Bounded to stay well under a minute: MAX_EXAMPLES per def (>= 10), no deadline, health checks
that only complain about slow or filtered generation suppressed, no example database.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import flat_json
import jsonschema
import pytest
import serde_hjs_compat
import serde_schema as S
from agent import types
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serde_support import codec

serde_hjs_compat.install()
serde_hjs_compat.memoize_strategies()
serde_hjs_compat.faster_json_values()

from hypothesis_jsonschema import from_schema  # noqa: E402  (after the shim)

# 10 per type under the `ci` hypothesis profile, 40 under `slow` (tests/budget.py); raise it
# locally to hunt harder, e.g. ACP_PROPERTY_EXAMPLES=200 (never below 10).
MAX_EXAMPLES = max(10, int(os.environ.get("ACP_PROPERTY_EXAMPLES", examples(40))))
SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)

# Defs hypothesis-jsonschema cannot generate at all, with the reason. Kept explicit and small;
# with the shim and the rewrites in serde_schema, there are none.
UNSUPPORTED: dict[str, str] = {}

NAMES = [n for n in S.DEFS if n not in UNSUPPORTED]
CALLS: Counter[str] = Counter()


@functools.cache
def hypothesis_schema(name: str) -> dict[str, Any]:
    """The rewritten standalone schema of `name` (serde_schema), built once; read-only."""
    return S.for_hypothesis(S.standalone(name))


def _is_finite(name: str) -> bool:
    """Enums and consts: fewer than MAX_EXAMPLES distinct values exist."""
    schema = hypothesis_schema(name)
    branches = schema.get("anyOf", schema.get("oneOf", [schema]))
    return all("const" in b or "enum" in b for b in branches)


@functools.cache
def valid_values(name: str) -> st.SearchStrategy[Any]:
    schema = S.with_tag(hypothesis_schema(name), S.class_tag(types, name))
    return from_schema(schema)


@functools.cache
def literal_validator(name: str) -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator({"$defs": S.DEFS, "$ref": f"#/$defs/{name}"})


# -- invalid inputs ----------------------------------------------------------------------------

# What st.recursive(none | booleans | integers | floats | text(max_size=6), lists(max_size=3) |
# dictionaries(text(max_size=6), max_size=3), max_leaves=8) draws, in half the time (flat_json).
JSON_SCALARS = [flat_json.NULL, st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False)]
JSON_VALUES = flat_json.json_values(
    [*JSON_SCALARS, st.text(max_size=6)],
    st.text(max_size=6),
    max_size=3,
    max_leaves=8,
)
# Values of the wrong JSON type for almost any field, plus near-misses for tags and `_meta`.
ODD_VALUES = st.sampled_from(
    [None, True, False, 0, -1, 2**70, 1.5, -0.0, "", "x", "text", [], [None], {}, {"type": 1}, {"_meta": 1}]
)
# One_of branches, drawn with flat_json.pick (the same choice as st.one_of, fewer draws around it).
KEY_NAMES = [
    st.sampled_from(["type", "_meta", "sessionId", "content", "sessionUpdate", "extra", "", "ü"]),
    st.text(max_size=6),
]
# Built once, not in every draw of mutated(): building a strategy costs more than drawing from it.
NEW_VALUES = [ODD_VALUES, JSON_VALUES]
OPERATIONS = st.sampled_from(["replace", "delete", "insert"])


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated(draw: Callable[..., Any], value: Any) -> Any:
    """`value` with one change somewhere: a subvalue replaced, a key/item deleted or inserted."""
    paths = list(_paths(value))
    path = paths[draw(flat_json.index(len(paths)))]  # st.sampled_from(paths), without building it
    op = draw(OPERATIONS)
    root = copy.deepcopy(value)
    new = flat_json.pick(draw, NEW_VALUES)
    if not path:
        if op == "insert" and isinstance(root, dict):
            root[flat_json.pick(draw, KEY_NAMES)] = new
            return root
        if op == "insert" and isinstance(root, list):
            return [*root, new]
        return new
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "insert" and isinstance(parent[last], dict):
        parent[last][flat_json.pick(draw, KEY_NAMES)] = new
    elif op == "insert" and isinstance(parent[last], list):
        parent[last].insert(draw(st.integers(0, len(parent[last]))), new)
    else:
        parent[last] = new
    return root


def _fits_64_bits(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | list | dict):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**64
    return all(_fits_64_bits(v) for v in (value.values() if isinstance(value, dict) else value))


def _with_class_tag(name: str, wire: Any) -> Any:
    """A variant class (TextContent, ...) accepts its body without the union tag and always
    writes the tag back: the one accepted difference between input and output."""
    tag = S.class_tag(types, name)
    if tag is not None and isinstance(wire, dict) and tag[0] not in wire:
        return {tag[0]: tag[1], **wire}
    return wire


def check_decode_contract(name: str, wire: Any) -> None:
    """Decode `wire` as `name`: a value or DecodeError, never another exception; strict agrees."""
    decode, encode = codec(types, name)
    # report_unknown: unknown fields and variants are reported too (kept, never dropped), each
    # saying whether strict mode rejects it (an unknown tag of a closed union does).
    ctx = types.DecodeContext(report_unknown=True)
    try:
        value = decode(wire, ctx)
    except types.DecodeError as exc:
        assert isinstance(exc.path, str) and exc.message
        with pytest.raises(types.DecodeError):
            decode(wire, types.DecodeContext(strict=True))
        return
    out = encode(value)
    json.dumps(out, allow_nan=False)  # encodes to JSON
    if not any(w.kind == "tolerated" for w in ctx.warnings):
        assert out == _with_class_tag(name, wire), "accepted without a tolerated value, but re-encoded differently"
    rejected = [w for w in ctx.warnings if w.strict_rejects]
    try:
        strict_value = decode(wire, types.DecodeContext(strict=True))
    except types.DecodeError:
        assert rejected, "strict mode raised where lenient mode accepted without a warning"
    else:
        assert not rejected, f"strict mode accepted what lenient mode tolerated: {rejected}"
        assert encode(strict_value) == out


# -- the properties ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_valid_values_round_trip_and_mutations_decode_or_raise(name: str) -> None:
    decode, encode = codec(types, name)
    strategy = valid_values(name)
    validator = literal_validator(name)

    @SETTINGS
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        CALLS[name] += 1
        wire = data.draw(strategy, label="valid")
        errors = [e.message for e in validator.iter_errors(wire)]
        assert errors == [], f"generator produced a schema-invalid value (fix serde_schema): {errors}"
        ctx = types.DecodeContext()
        value = decode(wire, ctx)
        assert ctx.warnings == [], "a schema-valid value was tolerated, not decoded"
        assert encode(value) == wire
        assert json.loads(json.dumps(encode(value))) == wire
        check_decode_contract(name, data.draw(mutated(wire), label="mutated"))
        # to_json too -- except with integers beyond 64 bits, a known generator bug with its own
        # test (test_serde_regressions.py::test_to_json_handles_what_to_dict_handles): skipping them here
        # keeps this property checking everything else.
        if hasattr(value, "to_json") and _fits_64_bits(wire):
            assert json.loads(value.to_json()) == wire

    CALLS[name] = 0
    run()
    if not _is_finite(name):
        assert CALLS[name] >= MAX_EXAMPLES, f"only {CALLS[name]} examples ran for {name}"


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(wire=JSON_VALUES)
def test_arbitrary_json_decodes_or_raises_decode_error(name: str, wire: Any) -> None:
    check_decode_contract(name, wire)


# -- the harness itself ------------------------------------------------------------------------


def test_every_def_is_covered() -> None:
    assert len(S.DEFS) == 170
    assert set(NAMES) | set(UNSUPPORTED) == set(S.DEFS)
    assert len(UNSUPPORTED) <= 3, "hypothesis-jsonschema should handle (almost) every type"
    classes = [n for n in S.DEFS if isinstance(getattr(types, n), type)]
    assert len(classes) > 120


def test_schema_rewrites_are_the_documented_ones() -> None:
    # Keywords left in the rewritten schemas: only ones hypothesis-jsonschema supports.
    seen: set[str] = set()

    def walk(node: Any, in_properties: bool = False) -> None:
        if isinstance(node, list):
            for x in node:
                walk(x)
        elif isinstance(node, dict):
            for key, value in node.items():
                if not in_properties:
                    seen.add(key)
                walk(value, in_properties=(key == "properties" and not in_properties))

    for name in S.DEFS:
        walk(hypothesis_schema(name))
    supported = {
        "type", "properties", "required", "items", "additionalProperties", "const", "anyOf", "oneOf",
        "allOf", "not", "minimum", "maximum", "format", "enum", "maxProperties",
    }  # fmt: skip
    assert seen <= supported, seen - supported
    assert "$ref" not in seen and "unevaluatedProperties" not in seen


def test_fallback_variants_exclude_the_tag() -> None:
    mcp = hypothesis_schema("McpServer")
    stdio = [b for b in mcp["anyOf"] if "type" not in b.get("properties", {})]
    assert len(stdio) == 1 and stdio[0]["not"] == {"required": ["type"]}
    auth = hypothesis_schema("AuthMethod")
    assert sum(b.get("not") == {"required": ["type"]} for b in auth["anyOf"]) == 1


def test_the_contract_checker_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """check_decode_contract catches a decoder that raises the wrong exception or loses data."""

    def crash(obj: Any, ctx: Any = None) -> Any:
        raise KeyError("boom")

    with monkeypatch.context() as m:
        m.setattr(types.TextContent, "from_dict", crash)
        with pytest.raises(KeyError):
            check_decode_contract("TextContent", {"type": "text", "text": "x"})
    with monkeypatch.context() as m:
        m.setattr(types.TextContent, "to_dict", lambda self: {"type": "text", "text": self.text})
        with pytest.raises(AssertionError, match="re-encoded differently"):
            check_decode_contract("TextContent", {"type": "text", "text": "x", "unknown": 1})
