"""The message-level checks over every line all the agents of a run sent, beside framing and
strict decoding (`conformance_messages`): the shape of responses and errors, notifications
never answered, client methods the client did not advertise, boolean config options, stderr
volume and exit on EOF. (`conformance` is the public façade.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .conformance_checks import Outcome
from .runners import AgentRun, Line, as_list, as_object

CONFIG_RESULTS = ("session/new", "session/load", "session/resume", "session/set_config_option")


def _lines(runs: list[AgentRun]) -> Iterator[tuple[AgentRun, Line]]:
    for run in runs:
        for line in run.client.received:
            if line.object is not None:
                yield run, line


def _is_reply(line: Line) -> bool:
    """A response: no method, and an id or a result or an error (a reply without an `id` key,
    as codex-acp answers notifications, is still a reply)."""
    message = line.object
    return (
        message is not None
        and "method" not in message
        and ("id" in message or "result" in message or "error" in message)
    )


def _nothing_sent(runs: list[AgentRun]) -> Outcome | None:
    if not any(run.client.received for run in runs):
        return ("not testable", "the agent sent nothing", None, [])
    return None


def response_shape(runs: list[AgentRun]) -> Outcome:
    """jsonrpc-response: exactly one of result and error; an integer code, a string message."""
    count = 0
    for _, line in _lines(runs):
        if not _is_reply(line):
            continue
        count += 1
        message = line.object or {}
        if ("result" in message) == ("error" in message):
            return ("failed", "a response with both or neither of result and error", line, [])
        if "error" in message:
            error = as_object(message["error"])
            code = None if error is None else error.get("code")
            if error is None or not isinstance(code, int) or isinstance(code, bool):
                return ("failed", "an error without an integer code", line, [])
            if not isinstance(error.get("message"), str):
                return ("failed", "an error without a string message", line, [])
    return _nothing_sent(runs) or ("passed", f"{count} responses", None, [])


def error_messages(runs: list[AgentRun]) -> Outcome:
    """error-message: every error message is non-empty and one line."""
    count = 0
    for _, line in _lines(runs):
        error = as_object(line.get("error")) if _is_reply(line) else None
        message = None if error is None else error.get("message")
        if not isinstance(message, str):
            continue
        count += 1
        if not message.strip():
            return ("failed", "an error with an empty message", line, [])
        if "\n" in message:
            return ("failed", "an error message of several lines", line, [])
    return ("passed", f"{count} errors", None, [])


def unanswered_notifications(runs: list[AgentRun], raw_runs: list[AgentRun]) -> Outcome:
    """notification-no-response: every response answers a request we sent, whether it has an
    `id` key or not. (In the runs fed malformed input on purpose, a reply with id null is what
    JSON-RPC prescribes there.)"""
    for run, line in _lines(runs):
        if not _is_reply(line):
            continue
        msg_id = line.get("id")
        if run.client.sent_method(msg_id) is not None:
            continue
        if msg_id is None and any(run is raw for raw in raw_runs):
            continue
        if "id" not in (line.object or {}):
            return ("failed", "a response without an id: a notification was answered", line, [])
        return ("failed", f"a response with id {msg_id!r}, which no request of ours had", line, [])
    return _nothing_sent(runs) or ("passed", "", None, [])


def client_calls(
    runs: list[AgentRun], allowed: Callable[[str], bool], prefix: str, turns: int
) -> Outcome:
    """no-*-without-capability: no call to a `prefix` method the client did not advertise,
    in any run; not testable if no prompt turn ever ran (the calls come from turns)."""
    for _, line in _lines(runs):
        method = line.method
        if method is not None and method.startswith(prefix) and not allowed(method):
            return (
                "failed",
                f"the agent called {method}, which the client did not advertise",
                line,
                [],
            )
    if not turns:
        return ("not testable", "no prompt turn ended with a result to watch", None, [])
    return ("passed", f"none in {turns} prompt turns", None, [])


def config_booleans(runs: list[AgentRun]) -> Outcome:
    """config-no-boolean: no `type: "boolean"` config option, in any answer or update."""
    sessions = 0
    for run, line in _lines(runs):
        options: Any = None
        if line.method == "session/update":
            update = as_object((as_object(line.get("params")) or {}).get("update")) or {}
            if update.get("sessionUpdate") == "config_option_update":
                options = update.get("configOptions")
        elif _is_reply(line) and run.client.sent_method(line.get("id")) in CONFIG_RESULTS:
            result = as_object(line.get("result"))
            if result is not None:
                sessions += 1
                options = result.get("configOptions")
        for option in map(as_object, as_list(options) or []):
            if option is not None and option.get("type") == "boolean":
                name = option.get("id")
                detail = f"boolean config option {name!r}, but the client did not advertise support"
                return ("failed", detail, line, [])
    if not sessions:
        return ("not testable", "no session was made", None, [])
    return ("passed", "", None, [])


def stderr_volume(runs: list[AgentRun]) -> Outcome:
    """info-stderr: how much the agents wrote to stderr (recorded)."""
    total = sum(run.stderr.total_bytes for run in runs)
    lines = sum(run.stderr.total_lines for run in runs)
    return ("passed", f"{total} bytes in {lines} lines from {len(runs)} agents", None, [])


def exit_on_eof(eof_runs: list[tuple[str, AgentRun]], wait: float) -> Outcome:
    """exit-on-eof: each agent left with EOF (after initialize; with a live session) exited."""
    ended = [run.exited_on_eof for _, run in eof_runs]
    if not ended or any(e is None for e in ended):
        return ("not testable", "no run", None, [])
    if all(ended):
        return ("passed", f"{len(ended)} agents exited", None, [])
    which = [label for label, run in eof_runs if not run.exited_on_eof]
    detail = f"still running {wait:g} s after EOF ({', '.join(which)}; it was terminated)"
    return ("failed", detail, None, [])
