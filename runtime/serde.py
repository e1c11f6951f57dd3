"""What every generated `types.py` shares: the decode context, errors, JSON helpers and the
small checks its generated decoders call.

This module is the same for every schema; `types` re-exports what users need (`UNSET`,
`Unset`, `or_none`, `DecodeContext`, `DecodeError`, `LenientWarning`, `JsonObject`, `loads`,
`dumps`, `format_path`). The other names are the generated decoders' building blocks: public here so
`types` can import them, but not part of the package's documented API.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, NoReturn, TypeAlias, TypeVar, cast

# Re-exported (`as` names): types.py imports them from here, users from types.
from .gchold import HOLD_FROM as HOLD_FROM
from .gchold import gc_hold as gc_hold
from .gchold import gc_release as gc_release
from .jsonvalue import UNSET as UNSET
from .jsonvalue import Unset as Unset
from .jsonvalue import json_default as json_default
from .jsonvalue import locate, merge_open
from .jsonvalue import open_json as open_json
from .jsonvalue import or_none as or_none

_orjson: Any
try:  # an optional speed-up; never required
    _orjson = importlib.import_module("orjson")
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

_log = logging.getLogger(__name__)

JsonObject: TypeAlias = dict[str, Any]
"""A JSON object as decoded by `json.loads`."""
PathT: TypeAlias = "tuple[PathT, str | int] | None"
"""A JSON path as a linked list, innermost key last: `((None, "params"), "prompt")`."""
Decoder: TypeAlias = "Callable[[Any, PathT, DecodeContext], Any]"
"""A generated decoder: `(value, path, ctx)` -> the decoded value, or raises DecodeError."""

_T = TypeVar("_T")
Decodes: TypeAlias = "Callable[[Any, PathT, DecodeContext], _T]"
"""A decoder of a `_T` (the variant decoders of a union's tag table)."""


MISSING: Final[Any] = object()
"""What `dict.get` returns for an absent key in the decoders (never seen by users)."""
new: Final = object.__new__
"""Builds an instance without calling `__init__`; the decoder then sets every field."""


def format_path(path: PathT) -> str:
    """`((None, "params"), "prompt"), 0)` -> `params.prompt[0]`."""
    keys: list[str | int] = []
    while path is not None:
        path, key = path
        keys.append(key)
    out = ""
    for key in reversed(keys):
        if isinstance(key, int):
            out += f"[{key}]"
        else:
            out += f".{key}" if out else key
    return out


class DecodeError(ValueError):
    """Input that does not fit the schema; `path` is the JSON path (`prompt[0].type`)."""

    def __init__(self, path: PathT, message: str) -> None:
        self.path = format_path(path)
        self.message = message
        super().__init__(f"{self.path or '<root>'}: {message}")


WarningKind: TypeAlias = Literal["tolerated", "unknown_field", "unknown_variant"]


@dataclass(frozen=True)
class LenientWarning:
    """Something decoding accepted that a context reports.

    `kind` is "tolerated" for a malformed value the schema says to tolerate (replaced by its
    default or dropped), and, with `DecodeContext(report_unknown=True)`, "unknown_field" for a
    wire field the schema does not know (kept in `extra`) or "unknown_variant" for a union tag
    it does not know (kept as `Unknown<Union>`). `strict_rejects`: strict mode raises instead.
    """

    path: str
    message: str
    kind: WarningKind = "tolerated"
    strict_rejects: bool = True


class DecodeContext:
    """How to decode: `strict=True` turns tolerated values (and unknown tags of closed unions)
    into errors; `report_unknown=True` also reports every unknown field and union variant.
    Warnings are collected in `warnings` (the latest `max_kept`) and passed to `on_warning`."""

    __slots__ = ("strict", "warnings", "on_warning", "max_kept", "report_unknown")

    def __init__(
        self,
        *,
        strict: bool = False,
        on_warning: Callable[[LenientWarning], None] | None = None,
        max_kept: int = 1000,
        report_unknown: bool = False,
    ) -> None:
        self.strict = strict
        self.warnings: list[LenientWarning] = []
        self.on_warning = on_warning
        # A context can live as long as a connection: keep only the latest warnings.
        self.max_kept = max_kept
        self.report_unknown = report_unknown

    def lenient(self, path: PathT, problem: str, action: str = "using the default") -> None:
        """Report a tolerated value; in strict mode it is an error instead."""
        if self.strict:
            raise DecodeError(path, problem)
        self.warn(LenientWarning(format_path(path), f"{problem}; {action}"))

    def tolerated(self, path: PathT, exc: DecodeError, action: str = "using the default") -> None:
        """Report a tolerated nested failure; strict mode raises `exc` (with its inner path)."""
        if self.strict:
            raise exc
        self.warn(
            LenientWarning(
                format_path(path), f"{exc.message} (at {exc.path or '<root>'}); {action}"
            )
        )

    def unknown_fields(self, path: PathT, extra: JsonObject) -> None:
        """Report wire fields kept in `extra` (with `report_unknown`)."""
        if self.report_unknown:
            for key in extra:
                where = format_path((path, key))
                self.warn(
                    LenientWarning(where, "unknown field, kept in extra", "unknown_field", False)
                )

    def unknown_variant(self, path: PathT, union: str, wire: str, tag: str, closed: bool) -> None:
        """An unknown tag of `union`: an error in strict mode where the schema closes the union,
        else kept raw and (with `report_unknown`) reported."""
        if closed and self.strict:
            raise DecodeError((path, wire), f"{tag!r} is not a known {union} variant")
        if self.report_unknown:
            message = f"unknown {union} variant {wire}={tag!r}, kept as Unknown{union}"
            self.warn(LenientWarning(format_path(path), message, "unknown_variant", closed))

    def warn(self, warning: LenientWarning) -> None:
        self.warnings.append(warning)
        if len(self.warnings) > self.max_kept:
            del self.warnings[: len(self.warnings) - self.max_kept]
        if self.on_warning is not None:
            self.on_warning(warning)


class _LoggingContext(DecodeContext):
    """The default context: tolerated values are logged, never kept (no unbounded growth)."""

    __slots__ = ()

    def warn(self, warning: LenientWarning) -> None:
        _log.warning("tolerated invalid value at %s: %s", warning.path or "<root>", warning.message)


DEFAULT_CTX: Final[DecodeContext] = _LoggingContext()


def describe(value: object) -> str:
    """The JSON type of a decoded value, for error messages."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def fail(path: PathT, expected: str, value: object) -> NoReturn:
    raise DecodeError(path, f"expected {expected}, got {describe(value)}")


def enum_fail(path: PathT, name: str, value: object) -> NoReturn:
    if isinstance(value, str):
        raise DecodeError(path, f"{value!r} is not a known {name}")
    fail(path, name, value)


def is_object(value: object) -> bool:
    """A JSON object: a dict (or a dict subclass a caller built)."""
    return isinstance(value, dict)


def plain_object(value: Any, path: PathT) -> JsonObject:
    """What an object decoder reads for a value that is not exactly a dict: a dict subclass
    a caller built, as a plain dict of its items (so the decoder may subscript it: no
    `__missing__` or `__getitem__` of a subclass runs); anything else is not an object."""
    if isinstance(value, dict):
        return dict(cast(JsonObject, value))
    fail(path, "object", value)


def as_int(value: Any, path: PathT) -> int:
    """A non-int JSON number that is an integer (`2.0`)."""
    if value.__class__ is float and value.is_integer():
        return int(value)
    fail(path, "integer", value)


def as_float(value: Any, path: PathT) -> float:
    """A non-float JSON number: an int is a number too."""
    if value.__class__ is int:
        return value
    fail(path, "number", value)


def skip_invalid(value: Any, path: PathT, ctx: DecodeContext, item: Decoder) -> list[Any]:
    """x-deserialize-skip-invalid-items: invalid items are dropped (and reported)."""
    if value.__class__ is not list:
        fail(path, "array", value)
    out: list[Any] = []
    i = 0
    for x in value:
        try:
            out.append(item(x, (path, i), ctx))
        except DecodeError as exc:
            ctx.tolerated((path, i), exc, "item dropped")
        i += 1
    return out


def missing(path: PathT, wire: str) -> NoReturn:
    raise DecodeError((path, wire), "missing required field")


def tolerate(ctx: DecodeContext, path: PathT, expected: str, value: object, fallback: _T) -> _T:
    """x-deserialize-default-on-error: report the malformed value, use the default."""
    ctx.lenient(path, f"expected {expected}, got {describe(value)}")
    return fallback


def tolerated(ctx: DecodeContext, path: PathT, exc: DecodeError, fallback: _T) -> _T:
    """x-deserialize-default-on-error for a nested value: report where it broke, use the default."""
    ctx.tolerated(path, exc)
    return fallback


# Plain loops, not comprehensions: a comprehension is a function call of its own (Python 3.11).
def list_of(value: Any, path: PathT, ctx: DecodeContext, item: Decoder) -> list[Any]:
    if value.__class__ is not list:
        fail(path, "array", value)
    out: list[Any] = []
    i = 0
    for x in value:
        out.append(item(x, (path, i), ctx))
        i += 1
    return out


def map_of(value: Any, path: PathT, ctx: DecodeContext, item: Decoder) -> dict[str, Any]:
    if value.__class__ is not dict:
        fail(path, "object", value)
    out: dict[str, Any] = {}
    for k, x in cast(JsonObject, value).items():
        out[k] = item(x, (path, k), ctx)
    return out


def d_str(value: Any, path: PathT, ctx: DecodeContext) -> str:
    return value if value.__class__ is str else fail(path, "string", value)


def d_bool(value: Any, path: PathT, ctx: DecodeContext) -> bool:
    return value if value.__class__ is bool else fail(path, "boolean", value)


def d_int(value: Any, path: PathT, ctx: DecodeContext) -> int:
    return value if value.__class__ is int else as_int(value, path)


def d_float(value: Any, path: PathT, ctx: DecodeContext) -> float:
    return value if value.__class__ is float else as_float(value, path)


def d_object(value: Any, path: PathT, ctx: DecodeContext) -> JsonObject:
    return cast(JsonObject, value) if value.__class__ is dict else fail(path, "object", value)


def d_null(value: Any, path: PathT, ctx: DecodeContext) -> None:
    return None if value is None else fail(path, "null", value)


def d_json(value: Any, path: PathT, ctx: DecodeContext) -> Any:
    return value


def extra_fields(
    obj: JsonObject, known: frozenset[str], path: PathT, ctx: DecodeContext
) -> JsonObject:
    """The wire fields a class does not know (kept in its `extra`); reported if asked."""
    extra = {k: x for k, x in obj.items() if k not in known}
    if ctx.report_unknown:
        ctx.unknown_fields(path, extra)
    return extra


def extra_field() -> JsonObject:
    """A generated class's `extra` field: a new empty dict for each instance.

    `dataclasses.field(default_factory=dict)` typed as the value it stands for, as typeshed
    types `field()` itself: a type checker then need not match `field()`'s overloads against
    `dict`'s constructors once per class (about a fifth of basedpyright's time on a types.py).
    """
    # Cast: pyright solves `dict` alone as dict[Unknown, Unknown]; the factory is still `dict`.
    return dataclasses.field(default_factory=cast("Callable[[], JsonObject]", dict))


class _NoExtra(dict[str, Any]):
    """The type of `NO_EXTRA`: an empty dict that refuses to change (what would leave it
    empty anyway, such as `pop(key, default)` or `clear()`, behaves as on any empty dict)."""

    __slots__ = ()

    def __setitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        _read_only()

    def setdefault(self, *args: Any, **kwargs: Any) -> NoReturn:
        _read_only()

    def update(self, *args: Any, **kwargs: Any) -> None:
        if dict(*args, **kwargs):
            _read_only()

    def __ior__(self, other: Any) -> _NoExtra:  # type: ignore[override,misc]
        if dict(other):
            _read_only()
        return self


def _read_only() -> NoReturn:
    raise TypeError(
        "this object's extra is the shared empty one of decoded objects: assign a dict"
        " of your own first (obj.extra = {...})"
    )


NO_EXTRA: Final[JsonObject] = _NoExtra()
"""The `extra` of a decoded object without unknown fields, shared by all of them: a fresh
empty dict per object was a third of the objects a large message allocates (and of the cyclic
GC's work on it). Equal to `{}`; read-only (assign a new dict to add fields). Objects built by
their constructor get a fresh dict, as before."""


merge_extra: Final = merge_open  # unknown fields back into to_dict(), each as plain JSON


def check_tag(obj: Any, wire: str, value: str) -> None:
    """A variant class decoded on its own: a tag, if present, must be its own."""
    if obj.__class__ is dict and wire in obj and obj[wire] != value:
        raise DecodeError((None, wire), f"expected {value!r}, got {obj[wire]!r}")


def _tag_checked(decoder: Decoder, wire: str, value: str) -> Decoder:
    """`decoder`, for a variant class decoded on its own (`from_dict`): checks the tag first."""

    def decode(obj: Any, path: PathT, ctx: DecodeContext) -> Any:
        check_tag(obj, wire, value)
        return decoder(obj, path, ctx)

    return decode


def encode_any(value: object) -> Any:
    """Encode a union value: a generated class, a list of them, or a JSON scalar."""
    to_dict: Callable[[], Any] | None = getattr(value, "to_dict", None)
    if to_dict is not None:
        return to_dict()
    if isinstance(value, list):
        return [encode_any(x) for x in cast("list[object]", value)]
    return value


_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")  # what json.decoder skips around a value


def parser(decoder: json.JSONDecoder, fallback: Callable[[str], Any]) -> Callable[[str], Any]:
    """What `fallback` (`decoder.decode`, or `json.loads` for the default decoder) returns for
    a text, faster: the decoder's scanner is called directly, without the Python layers around
    it (a third of `json.loads`' time on a short message). A value that spans the text (trailing
    whitespace aside) is the result; anything else (leading whitespace, a BOM, empty text, extra
    data) is handed to `fallback`, so every error and edge case is exactly the decoder's own.
    """
    # The decoder's own scanner (built from its hooks: parse_float, parse_constant, ...), the one
    # `decode` calls; the C scanner clears its key memo after every call.
    scan: Callable[[str, int], tuple[Any, int]] = cast(Any, decoder).scan_once
    space = _WHITESPACE.match

    def parse(text: str) -> Any:
        try:
            value, end = scan(text, 0)
        except StopIteration:  # no value at 0: leading whitespace, a BOM, empty, not JSON
            return fallback(text)
        if end == len(text) or space(text, end).end() == len(text):  # type: ignore[union-attr]
            return value
        return fallback(text)  # extra data: the fallback raises its own error

    return parse


_parse: Final = parser(json.JSONDecoder(), json.loads)

# orjson reads an integer beyond 64 bits as a float (losing digits): such a number is a run of
# 19 digits or more, found by C loops over the bytes (far cheaper than a second parse).
# `translate` maps every digit to "0", "." to itself and every other byte to " "; a run of 19
# leaves at least two digits in a row among every 9th byte, so that sample is searched first,
# the whole text only if the sample has two (most lines have not: a tenth of the work). A run
# right after a "." is a fraction, not an integer (orjson reads every float as float() does):
# those do not count, or every line holding a float below 0.01 (`0.0012345678901234567`, 19
# digits after the point) would be parsed by the standard library, at 5x orjson's time.
DIGIT_RUNS: Final = bytes(
    0x30 if 0x30 <= b <= 0x39 else 0x2E if b == 0x2E else 0x20 for b in range(256)
)
LONG_DIGITS: Final = b" " + b"0" * 19  # an integer's run: after anything but a "."
LEADING_DIGITS: Final = b"0" * 19  # or at the very start
SAMPLE_STEP: Final = 9
SAMPLE: Final = slice(None, None, SAMPLE_STEP)  # made once: `[::9]` builds a slice per call
SAMPLE_DIGITS: Final = b"00"


def long_digits(data: bytes) -> bool:
    """Whether `data` holds an integer of 19 digits or more (which orjson may read otherwise)."""
    # partition()[1], not find(): a one-argument call (find parses an argument tuple, a fifth
    # of this check's time on a short line); it copies nothing unless it finds the run.
    return bool(data[SAMPLE].translate(DIGIT_RUNS).partition(SAMPLE_DIGITS)[1]) and long_runs(data)


def long_runs(data: bytes) -> bool:
    """`long_digits` past its sample: the whole text searched (the sample says it may hold one)."""
    runs = data.translate(DIGIT_RUNS)
    return bool(runs.partition(LONG_DIGITS)[1]) or runs.startswith(LEADING_DIGITS)


def loads(data: str | bytes) -> Any:
    """Parse JSON text (exactly as `json.loads`); a syntax error is a `DecodeError` at the root.

    With orjson, its value where it equals json.loads' (UTF-8 text without an integer of 19
    digits or more); whatever orjson refuses (NaN, 1e400, lone surrogates, a BOM, UTF-16, deep
    nesting, not JSON) goes to json.loads, which decides, errors included.
    """
    if _orjson is not None:
        try:
            if isinstance(data, str):
                # orjson reads a str as is (a tenth faster than its bytes): only the sample the
                # check reads is encoded, the whole text only if the sample may hold a run.
                sample = data[SAMPLE].encode()
                if not sample.translate(DIGIT_RUNS).partition(SAMPLE_DIGITS)[1] or not long_runs(
                    data.encode()
                ):
                    return _orjson.loads(data)
            elif not long_digits(data):
                return _orjson.loads(data)
        except ValueError:  # UnicodeEncodeError (a lone surrogate), orjson.JSONDecodeError
            pass
    try:
        return _parse(data) if isinstance(data, str) else json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(None, f"invalid JSON: {exc}") from None


# orjson would write dataclasses by their attributes (snake_case, "UNSET") and datetimes in its
# own format: those go through `json_default`, as on the standard library path.
ORJSON_OPTIONS: Final = (
    0
    if _orjson is None
    else _orjson.OPT_PASSTHROUGH_DATACLASS
    | _orjson.OPT_PASSTHROUGH_DATETIME
    | _orjson.OPT_PASSTHROUGH_SUBCLASS
)
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=json_default)


def dumps(value: Any) -> str:
    """Compact JSON text (orjson writes UTF-8 as is; the stdlib path escapes non-ASCII).

    A value that is not JSON raises TypeError or ValueError naming where it sits
    (`params.rawInput.when: a set is not JSON ...`), the same with orjson and without it."""
    if _orjson is not None:
        try:
            text: str = _orjson.dumps(value, default=json_default, option=ORJSON_OPTIONS).decode()
        except TypeError:
            pass  # a big integer, a lone surrogate, a non-JSON value: the standard library decides
        else:
            if not has_nonfinite(text):
                return text
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise locate(value, exc) from None  # the slow walk, only now: where is it?
    except RecursionError:
        raise ValueError("nested too deeply to encode") from None


def has_nonfinite(text: str) -> bool:
    """orjson writes NaN and infinity as `null`: a `null` in its output needs the standard
    library's check (which refuses them); so does `"UNSET"` (orjson writes enums natively,
    UNSET among them). Rare in ACP messages, so the recheck is cheap."""
    return "null" in text or '"UNSET"' in text


_W = TypeVar("_W", bound="Wire")


def _from_dict(decoder: Decoder) -> Callable[[Any, DecodeContext | None], Any]:
    """A class's `from_dict`: `decoder` at the root, with the default context if none is given."""

    def from_dict(obj: Any, ctx: DecodeContext | None = None) -> Any:
        """Decode from a JSON value (a dict); raises `DecodeError` with the JSON path."""
        return decoder(obj, None, ctx or DEFAULT_CTX)

    return from_dict


class Wire:
    """What every generated class shares: JSON helpers around its generated codec.

    A generated class names its decoder (and its union tag) in its class statement:
    `class TextContent(Wire, decoder=_d_TextContent, tag=("type", "text"))`.
    """

    __slots__ = ()
    _from: ClassVar[Decoder]
    """What `from_dict` calls: the class's decoder, behind the tag check for a variant class."""
    _tag: ClassVar[tuple[str, str] | None] = None

    def __init_subclass__(
        cls, *, decoder: Decoder | None = None, tag: tuple[str, str] | None = None
    ) -> None:
        super().__init_subclass__()
        # dataclass(slots=True) rebuilds the class without these arguments: keep what is set.
        if decoder is not None:
            cls._from = decoder if tag is None else _tag_checked(decoder, *tag)
            cls._tag = tag
            # Each class's own from_dict, a plain function (a static method) calling its decoder:
            # the classmethod below binds a method and looks `_from` up per call (a twelfth of
            # a short message's decode); the classmethod stays for type checkers.
            cls.from_dict = staticmethod(_from_dict(cls._from))  # type: ignore[method-assign,assignment]

    @classmethod
    def from_dict(cls: type[_W], obj: Any, ctx: DecodeContext | None = None) -> _W:
        """Decode from a JSON value (a dict); raises `DecodeError` with the JSON path."""
        value: _W = cls._from(obj, None, ctx or DEFAULT_CTX)  # typed local: no cast call
        return value

    @classmethod
    def from_json(cls: type[_W], data: str | bytes, ctx: DecodeContext | None = None) -> _W:
        return cls.from_dict(loads(data), ctx)

    def to_dict(self) -> JsonObject:
        raise NotImplementedError

    def to_json(self) -> str:
        return dumps(self.to_dict())

    # repr and == are shared here instead of generated per class by @dataclass: that keeps
    # importing the package fast (one exec'd method less per class).
    def __repr__(self) -> str:
        fields = dataclasses.fields(cast(Any, self))
        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields if f.repr)
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        fields = dataclasses.fields(cast(Any, self))
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields if f.compare)

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq
