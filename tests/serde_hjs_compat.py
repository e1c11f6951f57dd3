"""Make hypothesis-jsonschema 0.23.1 (the latest release) work with current Hypothesis.

hypothesis-jsonschema's object strategy drives a private Hypothesis helper,
`hypothesis.internal.conjecture.utils.many`, through its old interface
(`while elements.more(): ... elements.reject()`). Newer Hypothesis releases replaced that
interface with a context manager iterated by `for _ in elements:`, so every object schema fails
with `AttributeError: 'many' object has no attribute 'more'`.

`install()` gives hypothesis-jsonschema (and only it: its own module reference `cu` is rebound,
Hypothesis itself is untouched) an adapter that offers the old `more()`/`reject()` on top of
the new `many`. When hypothesis-jsonschema or Hypothesis fix this, `install()` does nothing.
"""

from __future__ import annotations

import functools
import json
import math
import re
import types
from typing import Any

from hypothesis.internal.conjecture import utils as _cu

_STOP = object()


class _LegacyMany:
    """`many(...)` with the pre-context-manager `more()` / `reject()` interface."""

    def __init__(self, data: Any, **kwargs: Any) -> None:
        self._many = _cu.many(data, **kwargs)
        self._many.__enter__()
        self._items = iter(self._many)
        self._finished = False

    def more(self) -> bool:
        if self._finished:
            return False
        if next(self._items, _STOP) is _STOP:
            self._finished = True
            self._many.__exit__(None, None, None)
            return False
        return True

    def reject(self, why: str | None = None) -> None:
        self._many.reject(why)


def install() -> bool:
    """Patch hypothesis-jsonschema if it needs it; True if the adapter was installed."""
    from hypothesis_jsonschema import _from_schema

    if hasattr(_cu.many, "more"):  # the old interface still exists: nothing to do
        return False
    if isinstance(_from_schema.cu, types.SimpleNamespace):  # already installed
        return True
    namespace = types.SimpleNamespace(**{k: getattr(_cu, k) for k in dir(_cu) if not k.startswith("__")})
    namespace.many = _LegacyMany
    _from_schema.cu = namespace  # type: ignore[assignment]
    return True


def memoize_strategies() -> None:
    """Cache hypothesis-jsonschema's schema -> strategy conversion.

    Its object strategy converts each property's schema afresh on every draw (canonicalising
    the whole nested schema each time), which made one example of a deeply nested ACP type
    take seconds. The conversion is a pure function of the schema, so caching it changes no
    generated value, only the time taken.
    """
    from hypothesis_jsonschema import _canonicalise, _from_schema

    # The validator class of a schema (found by checking the schema against the metaschemas)
    # is cached in 128 entries; the ACP schemas have ~350 distinct subschemas, so most checks
    # ran again and again. Same function, unbounded cache.
    validator_class = _canonicalise.__dict__["__get_validator_class"]
    if hasattr(validator_class, "__wrapped__") and validator_class.cache_info().maxsize is not None:
        _canonicalise.__dict__["__get_validator_class"] = functools.cache(validator_class.__wrapped__)

    _memoize_canonicalish()
    _objects_filter_names_once()

    original = _from_schema.__dict__["__from_schema"]
    if getattr(original, "_acp_memoized", False):
        return
    by_json: dict[tuple[str, int, int], Any] = {}
    by_id: dict[tuple[int, int, int], tuple[Any, Any, Any, Any]] = {}

    def cached(schema: Any, *, alphabet: Any, custom_formats: Any) -> Any:
        # Fast path: the same schema object again (object strategies pass the same property
        # schema on every draw). The entry keeps the objects alive, so their ids stay unique.
        fast = (id(schema), id(alphabet), id(custom_formats))
        hit = by_id.get(fast)
        if hit is not None and hit[0] is schema and hit[1] is alphabet and hit[2] is custom_formats:
            return hit[3]
        try:
            key = (json.dumps(schema, sort_keys=True), id(alphabet), id(custom_formats))
        except (TypeError, ValueError):  # not plain JSON: do not cache
            return original(schema, alphabet=alphabet, custom_formats=custom_formats)
        strategy = by_json.get(key)
        if strategy is None:
            strategy = original(schema, alphabet=alphabet, custom_formats=custom_formats)
            by_json[key] = strategy
        by_id[fast] = (schema, alphabet, custom_formats, strategy)
        return strategy

    cached._acp_memoized = True  # type: ignore[attr-defined]
    _from_schema.__dict__["__from_schema"] = cached


def faster_json_values() -> None:
    """Draw hypothesis-jsonschema's "any JSON value" (what `{}` allows: every unknown field's
    value and every `_meta` entry, about half of drawing an ACP object) with tests/flat_json.py
    instead of its `st.recursive`: the same scalars (floats with -0.0 made 0.0, as it does), lists
    and objects of up to 3 items with any text keys, at most 100 leaves (st.recursive's default),
    in about half the time.
    """
    import flat_json
    from hypothesis import strategies as st
    from hypothesis_jsonschema import _from_schema

    if getattr(_from_schema.JSON_STRATEGY, "_acp", False):
        return
    strategy = flat_json.json_values(
        [
            flat_json.NULL,
            st.booleans(),
            st.integers(),
            st.floats(allow_nan=False, allow_infinity=False).map(lambda x: x or 0.0),
            st.text(),
        ],
        st.text(),
        max_size=3,
        max_leaves=100,
    )
    strategy._acp = True  # type: ignore[attr-defined]
    _from_schema.JSON_STRATEGY = strategy  # __from_schema returns it by name


def _memoize_canonicalish() -> None:
    """Cache hypothesis-jsonschema's `canonicalish` (schema -> canonical schema).

    It re-encodes its whole input to canonical JSON, then recurses into every subschema, which
    does the same: strategy conversion spent most of its time there, on the same subschemas
    over and over (the ACP types share most of theirs). It is a pure function of the schema;
    each call still gets a fresh copy of the result (callers change it in place).
    """
    from hypothesis_jsonschema import _canonicalise, _from_schema, _resolve

    original = _canonicalise.canonicalish
    if getattr(original, "_acp_memoized", False):
        return
    results: dict[str, str] = {}

    def cached(schema: Any) -> Any:
        try:
            key = json.dumps(schema, sort_keys=True)  # the C encoder: equal keys, equal schemas
        except (TypeError, ValueError):  # not plain JSON: do not cache
            return original(schema)
        text = results.get(key)
        if text is None:
            text = results[key] = json.dumps(original(schema))
        return json.loads(text)

    cached._acp_memoized = True  # type: ignore[attr-defined]
    for module in (_canonicalise, _from_schema, _resolve):  # each imported the name
        module.canonicalish = cached  # type: ignore[attr-defined]


class _ObjectSpec:
    """What `object_schema` computed for one object schema; its repr stays short (Hypothesis
    writes the repr of the strategy into the note of an exception raised while drawing)."""

    def __init__(self, *values: Any) -> None:
        self.values = values

    def __repr__(self) -> str:
        return f"<object schema with properties {sorted(self.values[5])}>"


def _objects_filter_names_once() -> None:
    """hypothesis-jsonschema 0.23.1's `object_schema`, except for how a new key (one not in the
    object yet) is drawn, and that its composite strategy is defined once.

    The original draws `all_names_strategy.filter(lambda s: s not in out)`: a new strategy per
    key, which Hypothesis validates and whose filter it tries to analyse (reading the lambda's
    source) every time: about a fifth of drawing an ACP object. Worse, current Hypothesis pushes
    a filter on a `one_of` down into each branch, so once `_meta` is in the object, picking the
    `just("_meta")` branch (half the time) failed the whole example after three tries: about one
    example in ten was thrown away. Here `new_name` draws from the names strategy, built once, up
    to three times (the filter's number of tries) until the name is new, so a text name can still
    be drawn; the same strategies are drawn from in the same order. `st.composite` reads the
    source of the function it decorates, so that is done once here, not once per object schema.
    Everything else is the original code (the release is the latest, and final).
    """
    import hypothesis_jsonschema
    from hypothesis import assume, reject
    from hypothesis import strategies as st
    from hypothesis_jsonschema import _from_schema
    from hypothesis_jsonschema._canonicalise import FALSEY, make_validator

    if hypothesis_jsonschema.__version__ != "0.23.1" or getattr(_from_schema.object_schema, "_acp", False):
        return

    def new_name(draw: Any, names: st.SearchStrategy[str], out: dict[str, Any]) -> str:
        for _ in range(3):
            key = draw(names)
            if key not in out:
                return key
        reject()

    @st.composite
    def from_object_schema(draw: Any, spec: _ObjectSpec) -> Any:
        (
            custom_formats, alphabet, required, min_size, max_size, properties, patterns, additional,
            dep_names, dep_schemas, all_names_strategy,
        ) = spec.values  # fmt: skip
        from_schema = _from_schema.__dict__["__from_schema"]
        elements = _from_schema.__dict__["cu"].many(  # install()'s adapter, as the original uses
            draw(st.data()).conjecture_data,
            min_size=min_size,
            max_size=max_size,
            average_size=min(min_size + 5, (min_size + max_size) / 2),
        )
        out: dict[str, Any] = {}
        while elements.more():
            for key in required:
                if key not in out:
                    break
            else:
                for k in set(dep_names).intersection(out):
                    key = next((n for n in dep_names[k] if n not in out), None)
                    if key is not None:
                        break
                else:
                    key = new_name(draw, all_names_strategy, out)

            pattern_schemas = [patterns[rgx] for rgx in sorted(patterns) if re.search(rgx, string=key) is not None]
            if key in properties:
                pattern_schemas.insert(0, properties[key])

            if pattern_schemas:
                out[key] = draw(
                    _from_schema.merged_as_strategies(pattern_schemas, alphabet=alphabet, custom_formats=custom_formats)
                )
            else:
                out[key] = draw(from_schema(additional, custom_formats=custom_formats, alphabet=alphabet))

            for k, v in dep_schemas.items():
                if k in out and not make_validator(v).is_valid(out):
                    out.pop(key)
                    elements.reject()

        for k in set(dep_names).intersection(out):
            assume(set(out).issuperset(dep_names[k]))
        return out

    def object_schema(custom_formats: Any, alphabet: Any, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
        required = schema.get("required", [])  # required keys
        min_size = max(len(required), schema.get("minProperties", 0))
        max_size = schema.get("maxProperties", math.inf)
        assert min_size <= max_size, (min_size, max_size)

        names = schema.get("propertyNames", {})  # schema for optional keys
        if names == FALSEY:
            assert min_size == 0, schema
            return st.builds(dict)
        names["type"] = "string"

        properties = schema.get("properties", {})  # exact name: value schema
        patterns = schema.get("patternProperties", {})  # regex for names: value schema
        # schema for other values; handled specially if nothing matches
        additional = schema.get("additionalProperties", {})
        additional_allowed = additional != FALSEY

        for key in list(patterns):
            try:
                re.compile(key)
            except re.error as err:
                _from_schema._warn_invalid_regex(key, err, "patternProperties entry")
                if min_size == 0 and not required:
                    return st.builds(dict)
                return st.nothing()

        dependencies = schema.get("dependencies", {})
        dep_names = {k: v for k, v in dependencies.items() if isinstance(v, list)}
        dep_schemas = {k: v for k, v in dependencies.items() if k not in dep_names}
        del dependencies

        from_schema = _from_schema.__dict__["__from_schema"]
        valid_name = make_validator(names).is_valid
        known: set[str] = set(filter(valid_name, set(dep_names).union(dep_schemas, properties)))
        for name in sorted(known.union(required)):
            alphabet.check_name_allowed(name)
        known_optional_names: list[str] = sorted(known - set(required))
        name_strats = (
            from_schema(names, custom_formats=custom_formats, alphabet=alphabet)
            if additional_allowed
            else st.nothing(),
            st.sampled_from(known_optional_names) if known_optional_names else st.nothing(),
            st.one_of([_from_schema.from_js_regex(p, alphabet=alphabet).filter(valid_name) for p in sorted(patterns)]),
        )
        all_names_strategy = st.one_of([s for s in name_strats if not s.is_empty])
        return from_object_schema(
            _ObjectSpec(
                custom_formats, alphabet, required, min_size, max_size, properties, patterns, additional,
                dep_names, dep_schemas, all_names_strategy,
            )
        )  # fmt: skip

    object_schema._acp = True  # type: ignore[attr-defined]
    _from_schema.object_schema = object_schema  # __from_schema calls it by name
