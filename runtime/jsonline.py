"""One JSON-RPC message per line: parsing a line, encoding a message, and skimming the top
level of a line too large to keep as it streams past (in constant memory).

Part of the connection runtime (`connection` imports from here); the names are public so that
module can import them, not part of the package's documented API. Nothing parsed is ever
evaluated: lines are only read as JSON.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from typing import Any, Final

from .gchold import gc_hold, gc_release
from .jsonvalue import json_default, locate
from .serde import (
    DIGIT_RUNS,
    ORJSON_OPTIONS,
    SAMPLE,
    SAMPLE_DIGITS,
    long_runs,
    parser,
)

_orjson: Any
try:  # an optional speed-up; never required
    _orjson = importlib.import_module("orjson")
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_decode: Final = _DECODER.decode
_parse: Final = parser(_DECODER, _decode)  # _decode, with its scanner called directly
# The same without the parse_float hook (a Python call per float: 1.5x json.loads on a line of
# floats): for long lines in which no number can reach infinity. That takes an exponent of 3
# digits or more, or a run of 200 digits or more (with a 2-digit exponent: < 1e299). Signs are
# deleted and digits, `e` and `E` mapped to "0", "e" and " " by one C pass over the line.
_FAST_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
_parse_fast: Final = parser(_FAST_DECODER, _FAST_DECODER.decode)
_NUMBER_SHAPE: Final = bytes(
    0x30 if 0x30 <= b <= 0x39 else 0x65 if b in (0x45, 0x65) else 0x20 for b in range(256)
)
_FAST_FLOATS_FROM: Final = 4096  # shorter lines: the pass costs more than the floats
_FLOAT_DENSITY: Final = 256  # a dot per 256 bytes or more: worth the pass (~5 ns a byte)
_DOT_SAMPLE: Final = 16  # the dots are counted among every 16th byte (an estimate is enough)
# The shape searched fast on a line of digits: rfind, not find, for "e000" (from the back, the
# search meets its rare "e" first: a third of find's time, which meets a "0" at every byte); a
# run of 200 leaves 20 digits in a row among every 10th byte, found far faster than itself.
_BIG_EXPONENT: Final = b"e000"
_LONG_RUN: Final = b"0" * 200
_RUN_SAMPLE: Final = slice(None, None, 10)
_SAMPLED_RUN: Final = b"0" * 20
# orjson builds a long string slower than the standard library does: 1.3-1.5x json.loads on
# text without escapes, non-ASCII from 1 MiB, ASCII from 2-3 MiB (below that it is 0.5x),
# against the standard library's decode + scan at 1.0x. A line that long and mostly such text
# (fewer than one comma or backslash per 32 bytes, counted among every 256th byte: a sparser
# sample reads fewer cache lines) skips orjson; any other (numbers, objects, escapes: orjson at
# 0.1-0.5x) is orjson's, ASCII or not. Such text has no float to speak of either (floats come
# with commas), so it skips the float pass as well.
_LONG_FROM: Final = 1 << 20
_LONG_ASCII_FROM: Final = 2 << 20
_TOKEN_STEP: Final = 256
_TOKEN_SAMPLE: Final = slice(None, None, _TOKEN_STEP)
_TOKEN_SPARSE: Final = 32  # bytes per comma or backslash, at least


def _long_text(line: bytes, size: int) -> bool:
    """Whether a line of `_LONG_FROM` bytes or more is text the standard library reads faster."""
    sample = line[_TOKEN_SAMPLE]
    if (sample.count(b"\\") + sample.count(b",")) * _TOKEN_STEP * _TOKEN_SPARSE >= size:
        return False
    return size >= _LONG_ASCII_FROM or not line.isascii()


def loads(line: bytes) -> Any:
    """Parse one line; ValueError (UnicodeDecodeError too) or RecursionError if it is not JSON.

    With orjson, the value is orjson's where it must equal the standard library's: a line with
    an integer of 19 digits or more (which orjson would read as a float) goes to the standard
    library, and so does every line orjson refuses (NaN, out-of-range numbers, lone surrogates,
    a BOM, deep nesting, bad UTF-8, not JSON), so every error is the standard library's own.
    A line of a megabyte or more that is mostly plain text is the standard library's too (faster).
    """
    size = len(line)
    if size >= _LONG_FROM and _long_text(line, size):
        return _parse(line.decode("utf-8"))
    if _orjson is not None and (  # serde.long_digits, inlined: this is every line's path
        not line[SAMPLE].translate(DIGIT_RUNS).partition(SAMPLE_DIGITS)[1] or not long_runs(line)
    ):
        try:
            return _orjson.loads(line)
        except ValueError:  # orjson.JSONDecodeError: the standard library decides
            pass
    if (
        size >= _FAST_FLOATS_FROM
        and line[::_DOT_SAMPLE].count(b".") * _DOT_SAMPLE * _FLOAT_DENSITY >= size
    ):
        shape = line.translate(_NUMBER_SHAPE, b"+-")
        if shape.rfind(_BIG_EXPONENT) < 0 and (
            shape[_RUN_SAMPLE].find(_SAMPLED_RUN) < 0 or shape.find(_LONG_RUN) < 0
        ):
            return _parse_fast(line.decode("utf-8"))
    return _parse(line.decode("utf-8"))


HELD_FROM: Final = 256 * 1024
"""A line this long is parsed by `loads_held`: its many objects would make the cyclic GC
scan the growing heap again and again (more than half the parse of a 7 MB line)."""


def loads_held(line: bytes) -> Any:
    """`loads`, with the cyclic GC held off while it parses (see gchold)."""
    gc_hold()
    try:
        return loads(line)
    finally:
        gc_release()


# The standard library's C encoder, made once and called directly (`JSONEncoder.encode` makes
# a new one per call: a third of a short message's time). Compact separators; text as UTF-8,
# not escaped (escaping writes 6 bytes per non-ASCII character: 1.7x json.dumps on 10 MB of it);
# allow_nan off: NaN/infinity fail here, not on the peer; no circular check (a cycle reaches
# the recursion limit, and `locate` names it). default=json_default: generated objects in open
# fields encode as their to_dict(), as in to_json.
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_fallback = json.JSONEncoder(  # an interpreter without the C accelerator
    ensure_ascii=False,
    separators=(",", ":"),
    allow_nan=False,
    check_circular=False,
    default=json_default,
).encode
_chunks: Callable[[Any, int], list[str]] = (
    _c_make_encoder(
        None, json_default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    if _c_make_encoder is not None
    else lambda value, _: [_fallback(value)]
)


def _encode(message: Any) -> str:
    return "".join(_chunks(message, 0))  # a short list: the C encoder joins as it goes


_encode_ascii = json.JSONEncoder(
    separators=(",", ":"), allow_nan=False, check_circular=False, default=json_default
).encode


def dumps(message: dict[str, Any]) -> bytes:
    """One line of JSON; TypeError or ValueError if `message` is not JSON."""
    if _orjson is not None:
        try:
            data: bytes = _orjson.dumps(message, default=json_default, option=ORJSON_OPTIONS)
        except TypeError:
            pass  # a big integer, a lone surrogate, deep nesting: the standard library decides
        else:
            # orjson writes NaN/infinity as null and UNSET as a string: such a line is
            # rechecked by the standard library (which refuses both). find, not `in`: bytes'
            # `in` first tries its operand as an int (a TypeError raised and cleared per test).
            if data.find(b"null") < 0 and data.find(b'"UNSET"') < 0:
                return data + b"\n"
    try:
        try:
            return _encode(message).encode() + b"\n"
        except UnicodeEncodeError:  # a lone surrogate: escaped, it is still valid JSON
            return _encode_ascii(message).encode("ascii") + b"\n"
    except RecursionError:  # too deep, or a cycle: `locate` says which, and where
        raise locate(message, ValueError("nested too deeply to encode")) from None
    except (TypeError, ValueError) as exc:
        raise locate(message, exc) from None  # the slow walk, only now: where is it?


# -- skimming an oversize line ------------------------------------------------------------------
_SKIM_MAX: Final = 64 * 1024  # the most top-level text kept (keys, punctuation, scalars)
_SKIM_STRING: Final = 1024  # a longer top-level string is replaced by a placeholder
_STRING_BODY: Final = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)  # up to a closing quote
_NESTED_MARK: Final = re.compile(rb'["{}\[\]]')  # what matters inside a nested value
_TOP_PLAIN: Final = re.compile(rb'[^"{}\[\]]*')  # separators and scalars at the top level
_QUOTE: Final = 0x22
_BACKSLASH: Final = 0x5C
_OPENERS: Final = (0x7B, 0x5B)


class Skim:
    """The top level of a line too large to keep, read as it streams past in constant memory.

    Nested values become `[]` and long strings `""` (keys) or `[]` (values), so `head()` is a
    small JSON object with the line's top-level `jsonrpc`, `id`, `method`, `result`/`error`
    keys, or None if the line is not one complete JSON object (or its top level is too big).
    Only the framing is checked, not every byte: it decides whom to answer, nothing more.
    """

    __slots__ = (
        "out",
        "depth",
        "in_str",
        "esc",
        "key_next",
        "is_key",
        "str_at",
        "overflow",
        "started",
        "ended",
        "bad",
    )

    def __init__(self) -> None:
        self.out = bytearray()
        self.depth = 0  # 1 inside the top-level object, more inside nested values
        self.in_str = False
        self.esc = False  # the previous chunk ended inside a string on a backslash
        self.key_next = False  # the next top-level string is a key
        self.is_key = False  # the current top-level string is a key
        self.str_at = 0  # where the current top-level string starts in `out`
        self.overflow = False  # the current top-level string is too long to keep
        self.started = False
        self.ended = False
        self.bad = False

    def feed(self, data: bytes | bytearray, pos: int, end: int) -> None:
        out = self.out
        while pos < end and not self.bad:
            if self.in_str:
                if self.esc:  # the byte after a backslash that ended the previous chunk
                    self.esc = False
                    if self.depth == 1 and not self.overflow:
                        out += data[pos : pos + 1]
                    pos += 1
                    continue
                stop = _STRING_BODY.match(data, pos, end).end()  # type: ignore[union-attr]
                if self.depth == 1 and not self.overflow:
                    out += data[pos:stop]
                    if len(out) - self.str_at > _SKIM_STRING:
                        del out[self.str_at :]
                        self.overflow = True
                pos = stop
                if pos == end:
                    break
                if (
                    data[pos] == _BACKSLASH
                ):  # only at the end: the escaped byte is in the next chunk
                    self.esc = True
                    if self.depth == 1 and not self.overflow:
                        out.append(_BACKSLASH)
                    pos += 1
                    continue
                pos += 1  # the closing quote
                self.in_str = False
                if self.depth == 1:
                    if self.overflow:
                        out += b'""' if self.is_key else b"[]"
                    else:
                        out.append(_QUOTE)
                continue
            if self.depth >= 2:
                found = _NESTED_MARK.search(data, pos, end)
                if found is None:
                    break
                pos = found.end()
                mark = data[pos - 1]
                if mark == _QUOTE:
                    self.in_str = True
                elif mark in _OPENERS:
                    self.depth += 1
                else:
                    self.depth -= 1
                    if self.depth == 1:
                        out += b"[]"  # the nested value's placeholder
                continue
            if self.depth == 1:
                stop = _TOP_PLAIN.match(data, pos, end).end()  # type: ignore[union-attr]
                if stop > pos:
                    plain = bytes(data[pos:stop]).translate(None, b" \t\r\n")
                    if plain:
                        colon, comma = plain.rfind(b":"), plain.rfind(b",")
                        if colon != comma:
                            self.key_next = comma > colon
                        out += plain
                    pos = stop
                    continue
                mark = data[pos]
                pos += 1
                if mark == _QUOTE:
                    self.in_str, self.is_key, self.overflow = True, self.key_next, False
                    self.str_at = len(out)
                    out.append(_QUOTE)
                elif mark in _OPENERS:
                    self.depth = 2
                elif mark == 0x7D:  # the top-level object's closing brace
                    out.append(mark)
                    self.depth, self.ended = 0, True
                else:
                    self.bad = True  # a stray closing bracket
                continue
            # depth 0: before the top-level object, or after it
            stop = _TOP_PLAIN.match(data, pos, end).end()  # type: ignore[union-attr]
            if bytes(data[pos:stop]).strip(b" \t\r\n"):
                self.bad = True  # not an object, or trailing data after it
                break
            pos = stop
            if pos == end:
                break
            if self.started or data[pos] != 0x7B:
                self.bad = True
                break
            self.started = self.key_next = True
            self.depth = 1
            out.append(0x7B)
            pos += 1
        if len(out) > _SKIM_MAX:
            self.bad = True
            out.clear()

    def head(self) -> dict[str, Any] | None:
        """The line's top level as a small object, or None."""
        if self.bad or not self.ended:
            return None
        try:
            value = _decode(self.out.decode("utf-8"))
        except (ValueError, RecursionError):
            return None
        return value if value.__class__ is dict else None
