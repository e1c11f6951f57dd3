"""The message-level conformance checks, over every line the agents sent in a run: framing
(each line one JSON-RPC 2.0 message) and strict decoding (with unknown fields and variants as
warnings). (`conformance` is the public façade.)"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import types
from ..methods import CLIENT_HANDLES, METHODS
from .conformance_checks import Outcome
from .runners import AgentRun, Line, ScriptedClient, as_list, as_object


def framing(runs: list[AgentRun]) -> Outcome:
    """stdio-framing: every line of every run is one JSON-RPC 2.0 message."""
    warnings: list[str] = []
    for run in runs:
        for line in run.client.received:
            if not line.raw.strip():
                warnings.append("an empty line on stdout")
                continue
            if _notification_answer(line):
                # The answer to a notification (no id to echo): one well-framed message whose
                # fault, answering at all, is the notification checks' to judge, not framing's.
                warnings.append("an error response without an id (a notification answered)")
                continue
            problem = framing_problem(line)
            if problem is not None:
                return ("failed", problem, line, warnings)
    count = sum(len(run.client.received) for run in runs)
    if not count:
        return ("not testable", "the agent sent nothing", None, warnings)
    return ("passed", f"{count} lines", None, warnings)


def _notification_answer(line: Line) -> bool:
    message = line.object
    return (
        message is not None
        and message.get("jsonrpc") == "2.0"
        and "id" not in message
        and "method" not in message
        and "result" not in message
        and well_formed_error(message.get("error"))
    )


def strict(runs: list[AgentRun], exclude: frozenset[int] = frozenset()) -> Outcome:
    """schema-strict: every message decodes in strict mode; unknown fields and variants warn.
    The lines in `exclude` (ids: info probes' answers) are their info checks' to judge."""
    warnings: list[str] = []
    seen: set[str] = set()
    failure: Outcome | None = None
    for run in runs:
        for line in run.client.received:
            if line.object is None or id(line) in exclude:
                continue  # stdio-framing's business, or an info check's
            try:
                found = _decode_strict(line, run.client)
            except types.DecodeError as exc:
                if failure is None:
                    where, path = _what(line, run.client)
                    at = f"{path}.{exc.path}" if exc.path else path
                    failure = ("failed", f"{where}: {at}: {exc.message}", line, [])
                continue
            for warning in found:
                if warning not in seen:
                    seen.add(warning)
                    warnings.append(warning)
    if failure is not None:
        return (failure[0], failure[1], failure[2], warnings)
    if not any(run.client.received for run in runs):
        return ("not testable", "the agent sent nothing", None, warnings)
    return ("passed", "", None, warnings)


def well_formed_error(value: Any) -> bool:
    error = as_object(value)
    return (
        error is not None
        and isinstance(error.get("code"), int)
        and not isinstance(error.get("code"), bool)
        and isinstance(error.get("message"), str)
    )


def framing_problem(line: Line) -> str | None:
    if line.error is not None:
        return f"not JSON ({line.error})"
    message = line.object
    if message is None:
        return "not a JSON object"
    if message.get("jsonrpc") != "2.0":
        return '"jsonrpc" is not "2.0"'
    if "method" in message:
        if not isinstance(message["method"], str):
            return '"method" is not a string'
        if "params" in message and not isinstance(message["params"], (dict, list)):
            return '"params" is not an object or an array'
        if "id" in message and not _valid_id(message["id"]):
            return '"id" is not a string, an integer or null'
        return None
    if ("result" in message) == ("error" in message):
        return "neither a request, a notification nor a response (one of result/error)"
    if "id" not in message or not _valid_id(message["id"]):
        return "a response without a valid id"
    if "error" in message and not well_formed_error(message["error"]):
        return "the error is not an object with an integer code and a string message"
    return None


def _valid_id(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, str)
        or (isinstance(value, int) and not isinstance(value, bool))
    )


def _what(line: Line, client: ScriptedClient) -> tuple[str, str]:
    """What a message is, and the JSON path of the part decoded."""
    if line.method is not None:
        return line.method, "params"
    return f"the response to {client.sent_method(line.get('id'))}", "result"


def _decode_strict(line: Line, client: ScriptedClient) -> list[str]:
    """Decode one message in strict mode (DecodeError if it does not fit); its warnings."""
    message = line.object
    if message is None:
        return []
    # The decoder reports unknown fields and variants itself: the walk that names them by
    # their wire paths runs only for a message that has some (a flood decodes at full speed).
    ctx = types.DecodeContext(strict=True, report_unknown=True)
    method = line.method
    if method is not None:
        spec = METHODS.get(method)
        if spec is None or method not in CLIENT_HANDLES:
            if method.startswith("_"):
                return []
            return [f"the agent sent {method!r}, a method clients do not handle"]
        decode = spec.decode_params
        if spec.kind == "request" and "id" not in message:
            if spec.decode_notification_params is None:
                return [f"{method} is a request, sent without an id"]
            decode = spec.decode_notification_params
        raw: Any = message.get("params")
        raw = {} if raw is None else raw
        decoded = decode(raw, ctx)
        return [] if not ctx.warnings else unknown_warnings(decoded, raw, "params", method)
    if "result" not in message:
        return []  # an error response: framing checks its shape
    sent = client.sent_method(message.get("id"))
    spec = None if sent is None else METHODS.get(sent)
    if spec is None or spec.decode_result is None:
        return []  # an answer to a method the schema does not have (the unknown-method probes)
    raw = message["result"]
    decoded = spec.decode_result(raw, ctx)
    if not ctx.warnings:
        return []
    return unknown_warnings(decoded, raw, "result", f"{sent} result")


def unknown_warnings(decoded: Any, raw: Any, path: str, where: str) -> list[str]:
    """Every unknown field (kept in `extra`) and unknown union variant in a decoded value,
    with its JSON path. (The one place to switch to DecodeContext's own reporting.)"""
    found: list[str] = []
    _walk(decoded, raw, path, found)
    return [f"{where}: {item}" for item in found]


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


def _walk(value: Any, raw: Any, path: str, found: list[str]) -> None:
    """Walk a decoded value beside the JSON it came from (attribute names are matched to
    wire names ignoring case and underscores: `session_id` is `sessionId`, `meta` `_meta`)."""
    items, raw_items = as_list(value), as_list(raw)
    if items is not None and raw_items is not None:
        for i, (item, raw_item) in enumerate(zip(items, raw_items, strict=False)):
            _walk(item, raw_item, f"{path}[{i}]", found)
        return
    raw_object = as_object(raw)
    decoded_map = as_object(value)
    if decoded_map is not None and raw_object is not None:  # a map of objects
        for key, item in decoded_map.items():
            if dataclasses.is_dataclass(item) and key in raw_object:
                _walk(item, raw_object[key], f"{path}.{key}", found)
        return
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return
    name = type(value).__name__
    if name.startswith("Unknown") and hasattr(value, "raw"):
        found.append(f"{path}: unknown {name[7:]} variant {getattr(value, 'tag', None)!r}")
        return
    if raw_object is None:
        return
    extra = as_object(getattr(value, "extra", None)) or {}
    found += [f"{path}.{key}: unknown field" for key in extra]
    wire = {_norm(key): key for key in raw_object if key not in extra}
    for f in dataclasses.fields(value):
        wire_key = None if f.name == "extra" else wire.get(_norm(f.name))
        if wire_key is not None:
            _walk(getattr(value, f.name), raw_object[wire_key], f"{path}.{wire_key}", found)
