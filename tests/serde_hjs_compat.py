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

import json
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
    from hypothesis_jsonschema import _from_schema

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
