"""What an open field may hold, and how it becomes JSON, the same with orjson and without it.

Open fields (`rawInput`, `rawOutput`, `_meta`, the unknown fields in `extra`, extension params
and results) hold any JSON value. A generated `to_dict()` passes each through `open_json`:
plain JSON comes back as it is (checked by a quick walk, nothing copied); anything else is
converted once (`json_default`) or refused with the path of the value in the message
(`rawInput.content.when: a set is not JSON ...`). `locate` finds that path for a message an
encoder refused: the slow walk runs only after a failure. The names are public so `serde` and
`jsonline` can import them; users see them through `types` and the generated classes.
"""

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Callable
from typing import Any, Final, Literal, TypeAlias, TypeVar

_INF: Final = float("inf")

_MAX_DEPTH: Final = 500  # the slow walk's own bound (it recurses once per level)


class Unset(enum.Enum):
    """The type of `UNSET`: a field absent from the wire (JSON `null` is `None`)."""

    UNSET = "UNSET"

    def __bool__(self) -> Literal[False]:
        return False

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET
_T = TypeVar("_T")


def or_none(value: _T | None | Unset) -> _T | None:
    """An optional field's value, absent (`UNSET`) read as None: `or_none(update.title)`.

    One call where absent and null mean the same to you; where they differ (`title: null`
    clears a title, absent leaves it), compare with `UNSET` instead."""
    return None if value is UNSET else value


def json_default(value: object) -> Any:
    """The one conversion of a non-JSON value in an open field, the same with orjson and without
    it: a generated object becomes its `to_dict()` (its wire form, never its attributes), an
    Enum its value, a UUID its string, a datetime/date/time its `isoformat()`; anything else is
    a TypeError naming its type (`locate` then adds where it is)."""
    to_dict: Callable[[], Any] | None = getattr(value, "to_dict", None)
    if to_dict is not None and not isinstance(value, type):
        return to_dict()
    if isinstance(value, enum.Enum):
        if isinstance(value, Unset):
            raise TypeError("UNSET is not JSON: leave the key out instead")
        return value.value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    raise TypeError(
        f"a {type(value).__name__} is not JSON: convert it to a dict, list, str, int, float,"
        " bool or None first"
    )


def _plain(value: Any) -> bool:
    """True if `value` is JSON as it stands: nothing to convert, nothing to refuse.

    Exact classes only (a subclass, a tuple, an Enum goes the slow way); one call per container.
    """
    cls = value.__class__
    if cls is dict:
        for k, x in value.items():
            if k.__class__ is not str:
                return False
            c = x.__class__
            if c is str or c is int or c is bool or x is None:
                continue
            if c is float:
                if not -_INF < x < _INF:  # NaN and infinity fail this
                    return False
            elif not ((c is dict or c is list) and _plain(x)):
                return False
        return True
    if cls is list:
        for x in value:
            c = x.__class__
            if c is str or c is int or c is bool or x is None:
                continue
            if c is float:
                if not -_INF < x < _INF:
                    return False
            elif not ((c is dict or c is list) and _plain(x)):
                return False
        return True
    if cls is str or cls is int or cls is bool or value is None:
        return True
    return cls is float and -_INF < value < _INF


def open_json(value: Any, where: str) -> Any:
    """An open field's value as plain JSON: `value` itself when it already is (the usual case),
    else a converted copy; TypeError/ValueError naming the path (from field `where`)."""
    try:
        if _plain(value):
            return value
    except RecursionError:
        return value  # deeper than a walk can go: the encoder decides (as for any message)
    return convert(value, (where,) if where else ())


def merge_open(d: dict[str, Any], extra: dict[str, Any]) -> None:
    """A generated class's unknown fields (`extra`) into its `to_dict()`, each as plain JSON."""
    for k, x in extra.items():
        if k not in d:
            d[k] = open_json(x, k)


Keys: TypeAlias = "tuple[str | int, ...]"
"""Where a value sits: the keys and indexes from the field (or message) down to it."""


def format_keys(keys: Keys) -> str:
    """`("rawInput", "content", 0)` -> `rawInput.content[0]`."""
    out = ""
    for key in keys:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out or "<root>"


class NotJsonType(TypeError):
    """A value of a type JSON cannot hold (a set, a Decimal, UNSET...); `keys` is where."""

    def __init__(self, keys: Keys, problem: str) -> None:
        self.keys, self.problem = keys, problem
        super().__init__(f"{format_keys(keys)}: {problem}")


class NotJsonValue(ValueError):
    """A value JSON cannot hold (NaN, infinity, a cycle, too deep); `keys` is where."""

    def __init__(self, keys: Keys, problem: str) -> None:
        self.keys, self.problem = keys, problem
        super().__init__(f"{format_keys(keys)}: {problem}")


def _key(key: object, where: Keys) -> str:
    """A dict key as the standard library writes it (int, float, bool and None keys become
    strings); any other key is refused."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is True or key is False:
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        if not -_INF < key < _INF:
            raise NotJsonValue(where, f"a key {key!r} is not JSON")
        return float.__repr__(key)
    raise NotJsonType(
        where, f"a {type(key).__name__} key is not JSON: JSON object keys are strings"
    )


def _is_container(value: object) -> bool:
    """A dict, list or tuple, told by a plain bool: `value` stays Any where this is tested (an
    isinstance there would narrow it to containers of unknown items)."""
    return isinstance(value, (dict, list, tuple))


def _is_dict(value: object) -> bool:
    return isinstance(value, dict)


def convert(value: Any, where: Keys = (), active: set[int] | None = None) -> Any:
    """`value` as plain JSON, converting what `json_default` converts; NotJsonType/NotJsonValue
    naming where the first value that is not JSON sits. The slow, careful walk."""
    if active is None:
        active = set()
    if value is None or value is True or value is False:
        return value
    if isinstance(value, enum.Enum):  # before str/int: an IntEnum or StrEnum is its value
        if isinstance(value, Unset):
            raise NotJsonType(where, "UNSET is not JSON: leave the key out instead")
        return convert(value.value, where, active)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not -_INF < value < _INF:
            raise NotJsonValue(where, f"{value!r} is not JSON (NaN and infinity are refused)")
        return float(value)
    if _is_container(value):
        if id(value) in active:
            raise NotJsonValue(where, "a circular reference is not JSON")
        if len(where) > _MAX_DEPTH:
            raise NotJsonValue(where, "nested too deeply to encode")
        active.add(id(value))
        try:
            if _is_dict(value):
                mapping: dict[Any, Any] = value
                out: dict[str, Any] = {}
                for k, x in mapping.items():
                    key = _key(k, where)
                    out[key] = convert(x, (*where, key), active)
                return out
            items: list[Any] | tuple[Any, ...] = value
            return [convert(x, (*where, i), active) for i, x in enumerate(items)]
        finally:
            active.discard(id(value))
    try:
        converted = json_default(value)
    except NotJsonType as exc:  # a generated object's own to_dict() refused one of its fields
        raise NotJsonType((*where, *exc.keys), exc.problem) from None
    except NotJsonValue as exc:
        raise NotJsonValue((*where, *exc.keys), exc.problem) from None
    except TypeError as exc:
        raise NotJsonType(where, str(exc)) from None
    return convert(converted, where, active)


def locate(message: Any, exc: Exception) -> Exception:
    """The error to raise for a message an encoder refused with `exc`: the first value that is
    not JSON, with its path; `exc` itself if the walk finds nothing (a lone surrogate, say)."""
    try:
        convert(message)
    except (TypeError, ValueError) as found:
        return found
    except RecursionError:
        return ValueError("nested too deeply to encode")
    return exc
