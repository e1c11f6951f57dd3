"""The client checks settled from the record of every probe connection, after the run: framing,
strict decoding, initialize first, session order and capabilities, prompt content, modes,
notifications left unanswered, the unknown update tolerated; then one `CheckResult` per check.
(`client_conformance` is the public façade.)"""

from __future__ import annotations

import re
from typing import Any, Final

from .. import types
from ..methods import AGENT_HANDLES, METHODS
from .client_checks import CLIENT_CHECKS
from .conformance_messages import framing_problem, unknown_warnings
from .conformance_report import Check, CheckResult
from .probe import MODES, Findings, ProbeSession
from .scripted import Line, as_list, as_object

_WINDOWS_ABSOLUTE: Final = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")
_GATED: Final = {
    "session/resume": "sessionCapabilities.resume",
    "session/close": "sessionCapabilities.close",
    "session/list": "sessionCapabilities.list",
}
_BASE_CONTENT: Final = ("text", "resource_link")

NOT_EXERCISED: Final = {
    "client-cancel-permission": "the client sent no session/cancel while a permission request "
    "was pending",
    "client-permission-option": "the client chose no option (it answered cancelled, or not at all)",
    "client-session-mode": "the client sent no session/set_mode",
    "client-prompt-content": "the client sent no session/prompt",
}
_NEEDS_TURN: Final = "the client sent no session/prompt, so the probe could not ask it anything"


def absolute(path: Any) -> bool:
    return isinstance(path, str) and (path.startswith("/") or bool(_WINDOWS_ABSOLUTE.match(path)))


def evaluate(sessions: list[ProbeSession], found: Findings) -> None:
    """Settle the record-based checks into `found`."""
    for probe in sessions:
        _framing(probe, found)
        _strict(probe, found)
        _initialize(probe, found)
        _session_rules(probe, found)
        _notifications(probe, found)
    if any(probe.init is not None for probe in sessions):
        found.ok("client-session-load")
        found.ok("client-session-gated")


def _framing(probe: ProbeSession, found: Findings) -> None:
    for line in probe.received:
        if not line.raw.strip():
            found.warn("client-stdio-framing", "an empty line on the agent's stdin")
            continue
        problem = framing_problem(line)
        if problem is not None:
            found.fail("client-stdio-framing", problem, line)
    if probe.received:
        found.ok("client-stdio-framing", f"{len(probe.received)} lines")


def _strict(probe: ProbeSession, found: Findings) -> None:
    check = "client-schema-strict"
    for line in probe.received:
        message = line.object
        if message is None or framing_problem(line) is not None:
            continue  # the framing check's business
        try:
            warnings = _decode_strict(probe, line, message)
        except types.DecodeError as exc:
            where = line.method or f"the response to {probe.sent_method(line.get('id'))}"
            part = "params" if line.method else "result"
            at = f"{part}.{exc.path}" if exc.path else part
            found.fail(check, f"{where}: {at}: {exc.message}", line)
            continue
        for warning in warnings:
            found.warn(check, warning)
    if probe.received:
        found.ok(check)


def _decode_strict(probe: ProbeSession, line: Line, message: dict[str, Any]) -> list[str]:
    # The decoder reports unknown fields and variants itself: the walk that names them by
    # their wire paths runs only for a message that has some (a flood decodes at full speed).
    ctx = types.DecodeContext(strict=True, report_unknown=True)
    method = line.method
    if method is not None:
        spec = METHODS.get(method)
        if spec is None or method not in AGENT_HANDLES:
            if method.startswith("_"):
                return []
            return [f"the client sent {method!r}, a method agents do not handle"]
        raw: Any = message.get("params")
        raw = {} if raw is None else raw
        decoded = spec.decode_params(raw, ctx)
        return [] if not ctx.warnings else unknown_warnings(decoded, raw, "params", method)
    if "result" not in message:
        return []
    sent = probe.sent_method(message.get("id"))
    spec = None if sent is None else METHODS.get(sent)
    if spec is None or spec.decode_result is None:
        return []  # the answer to the probe's unknown `_` request
    raw = message["result"]
    decoded = spec.decode_result(raw, ctx)
    if not ctx.warnings:
        return []
    return unknown_warnings(decoded, raw, "result", f"{sent} result")


def _initialize(probe: ProbeSession, found: Findings) -> None:
    first = next((line for line in probe.received if line.object is not None), None)
    if first is None:
        return
    if first.method != "initialize" or "id" not in (first.object or {}):
        found.fail("client-initialize-first", f"the first message is {first.method!r}", first)
        return
    params = as_object(first.get("params")) or {}
    version = params.get("protocolVersion")
    if not isinstance(version, int) or isinstance(version, bool):
        found.fail("client-initialize-first", "protocolVersion is not an integer", first)
        return
    found.ok("client-initialize-first", f"protocolVersion {version}")
    info = as_object(params.get("clientInfo"))
    if (
        info is None
        or not isinstance(info.get("name"), str)
        or not isinstance(info.get("version"), str)
    ):
        found.fail("client-info", "no clientInfo with a name and a version", first)
    else:
        found.ok("client-info", f"{info['name']} {info['version']}")


def _session_rules(probe: ProbeSession, found: Findings) -> None:
    answered_init = next(
        (line.index for line in probe.sent if line.is_response and _is_init_answer(probe, line)),
        None,
    )
    for line in probe.received:
        method, params = line.method, as_object(line.get("params")) or {}
        if method is None or not method.startswith("session/"):
            continue
        if answered_init is None or line.index < answered_init:
            found.fail("client-session-order", f"{method} before initialize was answered", line)
        elif (
            method in ("session/prompt", "session/set_mode")
            and line.session_id() not in probe.sessions
        ):
            found.fail("client-session-order", f"{method} for a session it was not given", line)
        else:
            found.ok("client-session-order")
        if method in ("session/new", "session/load", "session/resume"):
            if absolute(params.get("cwd")):
                found.ok("client-session-cwd", f"{method} cwd {params.get('cwd')}")
            else:
                found.fail(
                    "client-session-cwd",
                    f"{method} cwd {params.get('cwd')!r} is not absolute",
                    line,
                )
            _mcp_and_roots(params, method, line, found)
        if method == "session/load":
            found.fail("client-session-load", "session/load, without loadSession advertised", line)
        if method in _GATED:
            found.fail(
                "client-session-gated", f"{method}, without {_GATED[method]} advertised", line
            )
        if method == "session/prompt":
            _prompt_content(params, line, found)
        if method == "session/set_mode":
            mode = params.get("modeId")
            if mode in MODES:
                found.ok("client-session-mode", f"mode {mode}")
            else:
                found.fail(
                    "client-session-mode", f"mode {mode!r}, not one of {', '.join(MODES)}", line
                )


def _is_init_answer(probe: ProbeSession, line: Line) -> bool:
    request = next(
        (r for r in probe.received if r.method == "initialize" and r.get("id") == line.get("id")),
        None,
    )
    return request is not None and request.index < line.index


def _mcp_and_roots(params: dict[str, Any], method: str, line: Line, found: Findings) -> None:
    if "additionalDirectories" in params:
        detail = f"{method} with additionalDirectories, not advertised"
        found.fail("client-session-gated", detail, line)
    for server in as_list(params.get("mcpServers")) or []:
        kind = (as_object(server) or {}).get("type")
        if kind in ("http", "sse"):
            found.fail(
                "client-session-gated",
                f"an {kind} MCP server, without mcpCapabilities.{kind}",
                line,
            )


def _prompt_content(params: dict[str, Any], line: Line, found: Findings) -> None:
    kinds = [(as_object(block) or {}).get("type") for block in as_list(params.get("prompt")) or []]
    other = [kind for kind in kinds if kind not in _BASE_CONTENT]
    if other:
        detail = f"a {other[0]!r} block, but the agent advertises no such prompt capability"
        found.fail("client-prompt-content", detail, line)
    else:
        found.ok("client-prompt-content", " + ".join(str(kind) for kind in kinds))


def _notifications(probe: ProbeSession, found: Findings) -> None:
    for line in probe.received:
        if line.is_response and probe.sent_method(line.get("id")) is None:
            found.fail("client-notifications", "a response to no request of the agent's", line)
    update = probe.unknown_update
    if any(line.method == "session/update" for line in probe.lines):
        found.ok("client-notifications")
    if update is None:
        return
    later = [line for line in probe.received if line.index > update.index]
    if later:
        found.ok("client-unknown-update", "the client kept talking")
        return
    unanswered = [a for a in probe.asked if a.sent_at > update.index and a.timed_out]
    if unanswered:  # FF-2: silence is the first unanswered request's fault, not the update's
        first = unanswered[0].silenced_by or unanswered[0]
        detail = "the client fell silent after the unknown update"
        found.silent_at("client-unknown-update", detail, first)
    elif any(asked.closed for asked in probe.asked):
        found.fail(
            "client-unknown-update", "the client fell silent after the unknown update", update
        )


def _transcript(sessions: list[ProbeSession], line: Line | None) -> list[str]:
    """The wire lines of a failure: those of the offending line's connection up to just
    after it, else the last of the run."""
    for probe in sessions:
        lines = probe.transcript()
        for i, recorded in enumerate(probe.lines):
            if recorded is line:
                return lines[max(0, i - 60) : i + 10]
    return [text for probe in sessions for text in probe.transcript()][-80:]


def _advertised(sessions: list[ProbeSession], capability: str) -> bool | None:
    """Whether any connection's client advertised `capability` (None: no initialize seen)."""
    inits = [probe for probe in sessions if probe.init is not None]
    if not inits:
        return None
    return any(probe.capability(*capability.split(".")) for probe in inits)


def _silenced(
    check: Check,
    found: Findings,
    sessions: list[ProbeSession],
    warnings: list[str],
    duration: float,
) -> CheckResult:
    """A check that saw only the client's silence: blocked by the check that failed for the
    first request it left unanswered; a failure of its own if no check did."""
    detail, first = found.silenced[check.id]
    root = found.blame.get(id(first))
    if root is None or root not in found.failures or root == check.id:
        transcript = _transcript(sessions, None)
        return CheckResult(check, "failed", detail, None, warnings, duration, transcript=transcript)
    why = f"the client fell silent at {first.method}, which it never answered"
    return CheckResult(
        check,
        "not testable",
        f"blocked by {root}: {detail} ({why})",
        None,
        warnings,
        duration,
        blocked=f"blocked by {root}: {why}",
        blocked_by=root,
    )


def results(
    found: Findings, sessions: list[ProbeSession], start: float, end: float
) -> list[CheckResult]:
    """One result per check. A check's duration: from the start of the run to when its
    verdict was first settled (the record-based ones: the whole run)."""
    prompted = any(probe.prompts for probe in sessions)
    talked = any(probe.received for probe in sessions)
    for check in CLIENT_CHECKS:
        if check.capability and _advertised(sessions, check.capability) is False:
            found.skip(check.id, f"the client does not advertise {check.capability}")
    out: list[CheckResult] = []
    for check in CLIENT_CHECKS:
        warnings = found.warnings.get(check.id, [])
        duration = found.settled.get(check.id, end) - start
        if check.id in found.failures:
            detail, line = found.failures[check.id]
            offending = None if line is None else line.text()
            out.append(
                CheckResult(
                    check,
                    "failed",
                    detail,
                    offending,
                    warnings,
                    duration,
                    transcript=_transcript(sessions, line),
                )
            )
        elif check.id in found.silenced:
            out.append(_silenced(check, found, sessions, warnings, duration))
        elif check.id in found.passes:
            details = [d for d in found.passes[check.id] if d]
            detail = details[0] if details else ""
            if len(found.passes[check.id]) > 1:
                detail += f" ({len(found.passes[check.id])} times)" if detail else ""
            out.append(CheckResult(check, "passed", detail, None, warnings, duration))
        elif check.id in found.skips:
            out.append(
                CheckResult(check, "skipped", found.skips[check.id], None, warnings, duration)
            )
        else:
            why = found.unexercised.get(check.id)
            if why is None:
                why = (
                    NOT_EXERCISED.get(check.id)
                    if talked
                    else "the client never talked to the probe agent"
                )
            if why is None:
                why = _NEEDS_TURN if not prompted else "the client never did what it is about"
            out.append(CheckResult(check, "not exercised", why, None, warnings, duration))
    return out
