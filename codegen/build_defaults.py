"""Schema defaults as typed IR values (`Default`): objects become constructor calls.

Reads the definitions the type builder has made through the small `Resolver` interface, so
this module sits below build_types and never imports it.
"""

from __future__ import annotations

from typing import Any, Protocol

from .ir import (
    AliasDef,
    Default,
    DefaultList,
    DefaultMap,
    DefaultObject,
    DefaultScalar,
    Definition,
    EnumDef,
    ListOf,
    LiteralOf,
    MapOf,
    Named,
    ObjectDef,
    Scalar,
    TypeExpr,
)
from .shapes import ptr_escape


class Resolver(Protocol):
    """What reading a default needs from the type builder."""

    def resolve(self, py: str) -> Definition | None:
        """The definition with Python name `py`, building it first if need be."""
        ...

    def problem(self, what: str, pointer: str, fix: str = "") -> None: ...


def build_default(builder: Resolver, texpr: TypeExpr, value: Any, pointer: str) -> Default | None:
    """A schema default as a typed value: objects become constructor calls, not dict literals."""
    if isinstance(texpr, Named):
        target = builder.resolve(texpr.name)
        if isinstance(target, ObjectDef) and isinstance(value, dict):
            args: list[tuple[str, Default]] = []
            for key, item in value.items():
                field = next((f for f in target.fields if f.wire == key), None)
                if field is None:
                    builder.problem(f"default names unknown field {key!r} of {target.name}", pointer)
                    return None
                sub = build_default(builder, field.type, item, f"{pointer}/{ptr_escape(key)}")
                if sub is None:
                    return None
                args.append((field.py, sub))
            return DefaultObject(target.name, tuple(args))
        if isinstance(target, EnumDef):
            if value not in [v.value for v in target.values] and not target.open:
                builder.problem(f"default {value!r} is not a value of {target.name}", pointer)
                return None
            return DefaultScalar(value)
        if isinstance(target, AliasDef):
            return build_default(builder, target.target, value, pointer)
        if _is_scalar(value):
            return DefaultScalar(value)
    elif isinstance(texpr, ListOf) and isinstance(value, list):
        items = [build_default(builder, texpr.item, v, f"{pointer}/{i}") for i, v in enumerate(value)]
        if any(i is None for i in items):
            return None
        return DefaultList(tuple(i for i in items if i is not None))
    elif isinstance(texpr, MapOf) and isinstance(value, dict):
        entries = [(k, build_default(builder, texpr.value, v, f"{pointer}/{ptr_escape(k)}")) for k, v in value.items()]
        if any(v is None for _, v in entries):
            return None
        return DefaultMap(tuple((k, v) for k, v in entries if v is not None))
    elif isinstance(texpr, (Scalar, LiteralOf)):
        if _is_scalar(value):
            return DefaultScalar(value)
        if isinstance(value, dict) and isinstance(texpr, Scalar) and texpr.kind in ("object", "json"):
            return _raw_default(value)
    builder.problem(f"default {value!r} does not fit the field's type", pointer, "fix the default")
    return None


def _raw_default(value: Any) -> Default:
    if isinstance(value, dict):
        return DefaultMap(tuple((k, _raw_default(v)) for k, v in value.items()))
    if isinstance(value, list):
        return DefaultList(tuple(_raw_default(v) for v in value))
    return DefaultScalar(value)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))
