"""Shared helpers for the serde tests (doc examples, regressions, properties).

Not a test module: pytest collects `test_*.py` only.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from types import ModuleType
from typing import Any

Codec = tuple[Callable[..., Any], Callable[[Any], Any]]


def codec(types: ModuleType, name: str) -> Codec:
    """(decode, encode) for the schema type `name`: a class's `from_dict`/`to_dict`, or the
    module's `decode_<name>`/`encode_<name>` for unions and aliases."""
    obj = getattr(types, name)
    if isinstance(obj, type) and hasattr(obj, "from_dict"):
        return obj.from_dict, lambda value: value.to_dict()
    return getattr(types, f"decode_{name}"), getattr(types, f"encode_{name}")


def members(types: ModuleType, name: str) -> tuple[type, ...]:
    """The Python classes a value of schema type `name` may decode to (a union's members, minus
    its `Unknown<Name>` catch-all; or the class itself)."""
    obj = getattr(types, name)
    if isinstance(obj, type):
        return (obj,)
    args = typing.get_args(obj)
    return tuple(a for a in args if isinstance(a, type) and not a.__name__.startswith("Unknown"))


def unknowns(value: Any, path: str = "") -> list[str]:
    """Everything a decoded value did not understand: non-empty `.extra` on any object, and any
    `Unknown<Union>` variant. A doc example that decodes "into the right type" has none."""
    found: list[str] = []
    cls = type(value)
    if cls.__name__.startswith("Unknown") and hasattr(value, "raw"):
        found.append(f"{path or '<root>'}: unknown {cls.__name__[7:]} variant {value.raw!r}")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        extra = getattr(value, "extra", None)
        if extra:
            found.append(f"{path or '<root>'}: unknown fields {sorted(extra)} on {cls.__name__}")
        for f in dataclasses.fields(value):
            if f.name in ("extra", "meta"):
                continue
            found += unknowns(getattr(value, f.name), f"{path}.{f.name}" if path else f.name)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += unknowns(item, f"{path}[{i}]")
    return found
