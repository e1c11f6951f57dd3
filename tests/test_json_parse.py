"""The generated packages parse JSON text by calling the stdlib decoder's scanner directly
(`serde.parser`, a third faster than `json.loads` on a short message). These tests pin that the
shortcut changes nothing: `types.loads` behaves exactly as `json.loads` (errors wrapped in a
root `DecodeError`), and the connection's `jsonline.loads` exactly as its own decoder's
`decode` (which refuses NaN/Infinity and out-of-range numbers) -- same value, same error, same
message, on a corpus of edge cases and on random text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from agent import jsonline, serde, types
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

DEEP = 100_000  # nesting beyond any recursion limit: a RecursionError either way

TEXTS = [
    # whitespace around a value, and what JSON does not count as whitespace
    "{}",
    " {}",
    "{} ",
    "\n\t{}\r\n",
    "[1]\n",
    "",
    " ",
    "\n",
    "\u00a0{}",
    "{}\u00a0",
    "{}\x0c",
    "\x0c{}",
    # a BOM: json.loads refuses it in text, the decoder sees no value
    "\ufeff{}",
    "{}\ufeff",
    # extra data
    "{} x",
    "{}{}",
    "1 2",
    '"a" "b"',
    "[1]]",
    # truncated or malformed
    "[",
    "]",
    '{"a"}',
    '{"a":}',
    '{"a":1,}',
    "tru",
    "nul",
    '"\\x"',
    '"\x00"',
    '"abc',
    "01",
    "-",
    "1.",
    # plain values and numbers
    "true",
    "false",
    "null",
    '"a"',
    "0",
    "-0",
    "0.0",
    "1.0",
    "1e5",
    "-1.5e-3",
    "123456789012345678901234567890",
    "-123456789012345678901234567890",
    "1e400",
    "[1e400]",
    "-1e400",
    # constants JSON does not have
    "NaN",
    "[NaN]",
    '{"a": Infinity}',
    "-Infinity",
    # strings: escapes, lone surrogates (escaped and raw), non-ASCII
    '"\\ud800"',
    '"\\udc00\\ud800"',
    '"\ud800"',
    '"\\u00e9\\n\\t\\"\\\\"',
    '"é ✓ 𝄞"',
    # objects: duplicate keys (the last wins), a session/update line
    '{"a":1,"a":2}',
    '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
    '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}',
    # nesting
    "[" * 50 + "]" * 50,
    "[" * DEEP + "]" * DEEP,
    '{"a":' * DEEP + "1" + "}" * DEEP,
]

BYTES = [
    b"{}",
    b" {}\n",
    b"\xef\xbb\xbf{}",
    b"\xef\xbb\xbf\xef\xbb\xbf{}",
    b"\xff",
    b'"\xc3"',
    b'"\xed\xa0\x80"',  # a UTF-8 encoded lone surrogate
    '{"a":"é"}'.encode("utf-16"),
    '{"a":"é"}'.encode("utf-32-le"),
    b"{} x",
    b"",
]


def outcome(fn: Callable[[Any], Any], arg: Any) -> tuple[str, str]:
    """What a call returned (its repr: 1, 1.0 and True differ; NaN equals NaN) or raised."""
    try:
        return "value", repr(fn(arg))
    except Exception as exc:  # noqa: BLE001 - any difference matters
        return type(exc).__name__, str(exc)


def stdlib_loads(data: str | bytes) -> Any:
    """What `types.loads` was before the shortcut: json.loads, errors wrapped."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise types.DecodeError(None, f"invalid JSON: {exc}") from None


def line_decode(line: bytes) -> Any:
    """What `jsonline.loads` was before the shortcut: its decoder's `decode`."""
    return jsonline._DECODER.decode(line.decode("utf-8"))


ORJSON = serde._orjson  # None when orjson is not installed: both codecs are then the stdlib


@pytest.fixture(params=["orjson", "stdlib"], autouse=True)
def codec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with orjson importable (if installed) and without it."""
    if request.param == "stdlib" or ORJSON is None:
        monkeypatch.setattr(serde, "_orjson", None)
        monkeypatch.setattr(jsonline, "_orjson", None)
    return str(request.param)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_loads_is_json_loads(text: str) -> None:
    assert outcome(types.loads, text) == outcome(stdlib_loads, text)
    assert outcome(types.loads, text.encode("utf-8", "surrogatepass")) == outcome(
        stdlib_loads, text.encode("utf-8", "surrogatepass")
    )


@pytest.mark.parametrize("data", BYTES, ids=range(len(BYTES)))
def test_loads_bytes_is_json_loads(data: bytes) -> None:
    assert outcome(types.loads, data) == outcome(stdlib_loads, data)


@pytest.mark.parametrize("line", [t.encode("utf-8", "surrogatepass") for t in TEXTS] + BYTES)
def test_line_loads_is_its_decoder(line: bytes) -> None:
    assert outcome(jsonline.loads, line) == outcome(line_decode, line)


def test_only_the_unusual_reaches_the_fallback() -> None:
    """The shortcut answers a value spanning the text (trailing JSON whitespace aside) and
    hands everything else to the full decoder; its own errors are the scanner's."""
    seen: list[str] = []

    def fallback(text: str) -> Any:
        seen.append(text)
        return json.loads(text)

    parse = serde.parser(json.JSONDecoder(), fallback)
    for text in ["{}", "{} ", "[1]\r\n", '"a"', "1e5", "null"]:
        parse(text)
    assert seen == []
    unusual = [" {}", "\n[1]", "\ufeff{}", "", "{} x", "{}{}", "{}\x0c", "x"]
    for text in unusual:
        seen.clear()
        outcome(parse, text)
        assert seen == [text]
    seen.clear()
    with pytest.raises(json.JSONDecodeError, match="Unterminated string"):
        parse('{"a')  # an error inside the value is the scanner's own: no second parse
    assert seen == []


def test_the_scanner_memo_does_not_leak_between_calls() -> None:
    """Keys are interned per call (the scanner's memo is cleared): equal values, nothing kept."""
    first = types.loads('{"k": 1}')
    second = types.loads('{"k": 2}')
    assert first == {"k": 1} and second == {"k": 2}


JSON_TEXT_CHARS = ' \t\n\r\x0c\u00a0\ufeff{}[]",:0123456789.eE+-truefalsnNIaiy\\u\ud800é'


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    """Valid JSON with random whitespace (JSON's and not) around it, or random JSON-ish text."""
    if draw(st.booleans()):
        return draw(st.text(alphabet=JSON_TEXT_CHARS, max_size=30))
    value = draw(
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
            max_leaves=8,
        )
    )
    pad = st.text(alphabet=" \t\n\r\x0c\ufeffx", max_size=2)
    return draw(pad) + json.dumps(value) + draw(pad)


@settings(max_examples=examples(100), deadline=None, database=None)
@given(json_texts())
def test_loads_matches_the_stdlib_on_random_text(text: str) -> None:
    assert outcome(types.loads, text) == outcome(stdlib_loads, text)
    line = text.encode("utf-8", "surrogatepass")
    assert outcome(jsonline.loads, line) == outcome(line_decode, line)


# Numbers orjson would read otherwise (an integer beyond 64 bits) at every offset the sampled
# check can meet, and the longest runs it reads itself.
NUMBERS = [
    pad + number
    for pad in ("", " ", "  ", "   ", "    ", "     ", "      ", "       ", "        ")
    for number in (
        "1" * 19,
        "-" + "9" * 19,
        "18446744073709551616",
        "-9223372036854775809",
        "1" * 18,
        "-" + "9" * 18,
        "9" * 18 + ".5",
        "0." + "1" * 18,
        "1" * 40 + ".0",
        # fractions of 19 digits or more: floats, which orjson reads as float() does
        "0." + "1" * 19,
        "0.0023503710709915637",
        "-0.00012345678901234567",
        "0." + "9" * 400,
        "1." + "0" * 30 + "1e-5",
        "1" * 19 + "." + "1" * 19,
        "1e" + "0" * 19 + "5",
    )
]


@pytest.mark.parametrize("number", NUMBERS, ids=range(len(NUMBERS)))
def test_long_numbers_are_the_stdlib_reading(number: str) -> None:
    for text in (f"[{number}]", f'{{"id":{number},"method":"m","params":{{"n":[{number}]}}}}'):
        assert outcome(jsonline.loads, text.encode()) == outcome(line_decode, text.encode())
        assert outcome(types.loads, text) == outcome(stdlib_loads, text)
        assert outcome(types.loads, text.encode()) == outcome(stdlib_loads, text.encode())


def test_the_long_digits_check() -> None:
    for k in range(40):
        assert serde.long_digits(b"x" * k + b"1" * 19 + b"x" * k)
        assert not serde.long_digits(b"x" * k + b"1" * 18 + b"x" * k)
        assert not serde.long_digits(b"x" * k + b"1" * 18 + b"." + b"1" * 18)
        # A fraction is no integer, however long; an integer part or an exponent counts.
        assert not serde.long_digits(b"x" * k + b"0." + b"1" * (19 + k))
        assert serde.long_digits(b"x" * k + b"-" + b"1" * 19 + b".5")
        assert serde.long_digits(b"x" * k + b"1e" + b"1" * 19)
    assert serde.long_digits(b"1" * 19)  # at the very start
    assert serde.long_digits(b"1" * 19 + b".5")
    assert not serde.long_digits(b"." + b"1" * 19)


def float_line(floats: list[str]) -> bytes:
    return ('{"jsonrpc":"2.0","method":"_f","params":{"rawOutput":[' + ",".join(floats) + "]}}").encode()


LONG_FLOATS = [
    float_line([repr(i * 0.123456789) for i in range(2000)]),
    float_line([repr(i * 1.234e-5) for i in range(2000)]),  # 19 digits and more after the point
    float_line(["1.5"] * 2000 + ["1e400"]),  # out of range: refused, on every path
    float_line(["1.5"] * 2000 + ["-1E+0400"]),
    float_line(["1.5"] * 2000 + ["1" * 320 + ".0"]),
    float_line(["1.5"] * 2000 + ["1" * 199 + ".0e99"]),
    float_line(["1.5"] * 2000 + ["1e-400", "2.5e-308", "1.7976931348623157e308"]),
    float_line(["1.5"] * 2000 + ["NaN"]),
    float_line(["1.5"] * 2000 + ['"' + "\\ud800" + '"']),
    b" " + float_line(["0.5"] * 2000),
    # a run of 200 digits or more at every offset the sampled search can meet: never fast-read
    *[float_line(["1.5"] * 2000 + [" " * pad + "9" * 310]) for pad in range(10)],
    *[float_line(["1.5"] * 2000 + [" " * pad + "9" * 200 + "e99"]) for pad in range(10)],
    float_line(["1.5"] * 2000 + ["9" * 199 + ".9e99", "1.0e" + "0" * 20 + "99"]),
]


@pytest.mark.parametrize("line", LONG_FLOATS, ids=range(len(LONG_FLOATS)))
def test_long_lines_of_floats_are_read_as_before(line: bytes) -> None:
    """Long float-heavy lines skip the parse_float hook where no number can reach infinity."""
    assert outcome(jsonline.loads, line) == outcome(line_decode, line)


def _refuse(text: str) -> Any:
    raise AssertionError("the hook-checked parse was used")


def test_float_heavy_lines_skip_the_checked_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """A float-heavy line is read without the parse_float hook (orjson, or the fast decoder),
    also when its floats have 19 digits or more after the point (0.0012345678901234567)."""
    monkeypatch.setattr(jsonline, "_parse", _refuse)
    for line in (LONG_FLOATS[0], LONG_FLOATS[1]):
        assert jsonline.loads(line) == line_decode(line)


def text_line(text: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "_t", "params": {"text": text}}, ensure_ascii=False).encode()


@pytest.mark.parametrize(
    ("text", "stdlib"),
    [
        ("abcdefgh " * 300_000, True),  # 2.7 MB of ASCII without escapes: the standard library's
        ("àbcdéfgh " * 130_000, True),  # 1.4 MB of non-ASCII text
        ("abcdefgh " * 130_000, False),  # 1.2 MB of ASCII: orjson is faster there
        ("abc\n" * 700_000, False),  # escapes: orjson's
        ('àb,"' * 300_000, False),  # commas and escaped quotes, non-ASCII: orjson's
    ],
    ids=range(5),
)
def test_long_text_lines(monkeypatch: pytest.MonkeyPatch, text: str, stdlib: bool) -> None:
    """A megabyte line of plain text is the standard library's (orjson builds it slower); any
    other long line is orjson's, ASCII or not. Same value either way."""
    line = text_line(text)
    real = jsonline._orjson
    if real is None:  # the stdlib run: nothing to choose
        assert jsonline.loads(line) == line_decode(line)
        return
    seen: list[bytes] = []

    class Spy:
        def loads(self, data: bytes) -> Any:
            seen.append(data)
            return real.loads(data)

    monkeypatch.setattr(jsonline, "_orjson", Spy())
    assert jsonline.loads(line) == line_decode(line)
    assert (seen == []) is stdlib
