"""The probe agent's scenario for a prompt turn, and the checks its steps settle. The first turn
runs every step: every kind of session/update (and one unknown variant), a permission request,
then what the client's capabilities allow (fs read and write inside the cwd, a terminal), an
unknown `_` request, and a request for a capability the client did not advertise. A turn cut
short by session/cancel leaves its remaining steps to the next turn; later turns stream a few
chunks, slowly enough to be cancelled. (`probe` holds the session; `client_conformance` is
the public façade.)"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Final

from .. import types
from ..connection import ConnectionClosed
from ..methods import METHODS
from .probe import PERMISSION_OPTIONS, Asked, ProbeSession
from .scripted import as_object

UNKNOWN_UPDATE: Final = "acp_probe_unknown_update"
EXT_METHOD: Final = "_acp_probe/no_such_method"
EXT_NOTIFICATION: Final = "_acp_probe/notice"
READ_CONTENT: Final = "probe line 1\nprobe line 2: héllo wörld\nprobe line 3\n"
TERMINAL_MARKER: Final = "acp-probe-terminal-output"


def every_update(cwd: str) -> list[dict[str, Any]]:
    """One session/update of every kind the schema has (those it lacks are left out)."""
    path = os.path.join(cwd, "probe.txt")
    text = {"type": "text", "text": "(probe) "}
    updates: list[dict[str, Any]] = [
        {"sessionUpdate": "user_message_chunk", "content": {**text, "text": "(probe) the prompt"}},
        {"sessionUpdate": "agent_thought_chunk", "content": {**text, "text": "(probe) thinking"}},
        {"sessionUpdate": "agent_message_chunk", "content": {**text, "text": "(probe) hello"}},
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Probe the client", "priority": "high", "status": "in_progress"},
                {"content": "Report", "priority": "low", "status": "pending"},
            ],
        },
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "probe-call-1",
            "title": "Edit probe.txt",
            "kind": "edit",
            "status": "pending",
            "content": [{"type": "diff", "path": path, "oldText": "old\n", "newText": "new\n"}],
            "locations": [{"path": path, "line": 1}],
            "rawInput": {"path": path},
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "probe-call-1",
            "status": "in_progress",
            "content": [{"type": "content", "content": {**text, "text": "(probe) editing"}}],
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "probe-call-1",
            "status": "completed",
            "rawOutput": {"ok": True},
        },
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [
                {"name": "probe", "description": "A probe command", "input": {"hint": "text"}}
            ],
        },
        {"sessionUpdate": "current_mode_update", "currentModeId": "ask"},
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {
                    "id": "model",
                    "name": "Model",
                    "type": "select",
                    "currentValue": "probe-1",
                    "options": [{"value": "probe-1", "name": "Probe 1"}],
                }
            ],
        },
        {"sessionUpdate": "session_info_update", "title": "Probe session"},
        {"sessionUpdate": "usage_update", "used": 100, "size": 1000},
    ]
    spec = METHODS.get("session/update")
    if spec is None:
        return []
    fits: list[dict[str, Any]] = []
    for update in updates:
        try:
            decoded = spec.decode_params(
                {"sessionId": "s", "update": update}, types.DecodeContext(strict=True)
            )
        except types.DecodeError:
            continue
        if not type(getattr(decoded, "update", None)).__name__.startswith("Unknown"):
            fits.append(update)
    return fits


async def run_turn(probe: ProbeSession, session_id: str, cwd: str, cancel: asyncio.Event) -> None:
    steps: dict[str, Callable[[ProbeSession, str, str, asyncio.Event], Awaitable[None]]] = {
        "updates": _updates,
        "permission": _permission,
        "fs-read": _fs_read,
        "fs-write": _fs_write,
        "terminal": _terminal,
        "ext": _ext,
        "unadvertised": _unadvertised,
    }
    while probe.pending_steps and not cancel.is_set():
        step = probe.pending_steps.pop(0)
        await steps[step](probe, session_id, cwd, cancel)
    chunks = 1 if probe.prompts == 1 else 5
    for i in range(chunks):
        if cancel.is_set():
            return
        text = {"type": "text", "text": f"(probe) turn {probe.prompts}, chunk {i + 1}\n"}
        await probe.update(session_id, {"sessionUpdate": "agent_message_chunk", "content": text})
        if i + 1 < chunks:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(cancel.wait(), probe.options.chunk_delay)


async def _updates(probe: ProbeSession, session_id: str, cwd: str, cancel: asyncio.Event) -> None:
    for update in every_update(cwd):
        await probe.update(session_id, update)
    probe.unknown_update = await probe.update(
        session_id, {"sessionUpdate": UNKNOWN_UPDATE, "probe": "a variant from a future schema"}
    )
    with contextlib.suppress(ConnectionClosed):  # an extension notification: to be ignored
        await probe.connection.notify(EXT_NOTIFICATION, {"sessionId": session_id})


async def _permission(
    probe: ProbeSession, session_id: str, cwd: str, cancel: asyncio.Event
) -> None:
    kinds = ("allow_once", "reject_once")
    params = {
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": "probe-call-2",
            "title": "Run the probe's command",
            "kind": "execute",
            "status": "pending",
        },
        "options": [
            {"optionId": option, "name": option.replace("-", " "), "kind": kind}
            for option, kind in zip(PERMISSION_OPTIONS, kinds, strict=True)
        ],
    }
    asked = await probe.ask("session/request_permission", params, cancel)
    judge_permission(probe, asked)


def _outcome(asked: Asked) -> dict[str, Any] | None:
    return as_object((as_object(asked.result) or {}).get("outcome"))


def judge_permission(probe: ProbeSession, asked: Asked) -> None:
    found, timeout = probe.findings, probe.options.timeout
    outcome = _outcome(asked)
    if asked.cancel is not None:  # judged by the cancellation rule alone
        check = "client-cancel-permission"
        if outcome is not None and outcome.get("outcome") == "cancelled":
            found.ok(check, "answered cancelled after session/cancel")
        elif outcome is not None:
            found.fail(check, f"answered {outcome!r} after session/cancel", asked.response)
        else:
            found.fail(
                check,
                asked.why(timeout) + " (sent session/cancel meanwhile)",
                asked.response,
                asked,
            )
        return
    if outcome is None:
        found.fail("client-permission-answered", asked.why(timeout), asked.response, asked)
        return
    found.ok("client-permission-answered", f"outcome {outcome.get('outcome')}")
    if outcome.get("outcome") == "selected":
        option = outcome.get("optionId")
        if option in PERMISSION_OPTIONS:
            found.ok("client-permission-option", f"selected {option}")
        else:
            detail = f"selected {option!r}, not one of {', '.join(PERMISSION_OPTIONS)}"
            found.fail("client-permission-option", detail, asked.response)


def refused(probe: ProbeSession, check_id: str, asked: Asked, capability: str) -> bool:
    """An error answer to a request the client's capabilities allow. -32601 (method not
    found) contradicts the capability: a failure. Any other error is the client declining
    this once (a permission policy, the user): the rule about doing it is not exercised."""
    if asked.error is None:
        return False
    code = asked.error.get("code")
    if code == -32601:
        detail = (
            f"{asked.method} answered -32601 (method not found), yet it advertises {capability}"
        )
        probe.findings.fail(check_id, detail, asked.response)
    else:
        why = f"the client declined {asked.method}: {asked.why(probe.options.timeout)}"
        probe.findings.not_exercised(check_id, f"{why} {_brief(asked.error.get('data'))}".rstrip())
    return True


def _brief(data: Any) -> str:
    text = "" if data is None else str(data)
    return text if len(text) <= 160 else text[:160] + "..."


def _fs_testable(probe: ProbeSession, check_id: str, capability: str, cwd: str) -> bool:
    """Whether the client advertises `fs.<capability>` (else the check is skipped) and the
    session's cwd is a directory here to put the probe's file in (else not exercised)."""
    if not probe.capability("fs", capability):
        probe.findings.skip(check_id, f"the client does not advertise fs.{capability}")
        return False
    if os.path.isabs(cwd) and os.path.isdir(cwd):
        return True
    probe.findings.not_exercised(check_id, f"the session's cwd {cwd!r} is not a directory here")
    return False


async def _fs_read(probe: ProbeSession, session_id: str, cwd: str, cancel: asyncio.Event) -> None:
    check = "client-fs-read"
    if not _fs_testable(probe, check, "readTextFile", cwd):
        return
    path = os.path.join(cwd, f".acp-probe-{secrets.token_hex(4)}.txt")
    with open(path, "w", encoding="utf-8", newline="") as file:
        file.write(READ_CONTENT)
    try:
        whole = await probe.ask(
            "fs/read_text_file", {"sessionId": session_id, "path": path}, cancel
        )
        part = await probe.ask(
            "fs/read_text_file", {"sessionId": session_id, "path": path, "line": 2, "limit": 1}
        )
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)
    second = READ_CONTENT.splitlines(keepends=True)[1]
    for asked, want in ((whole, READ_CONTENT), (part, second)):
        content = (as_object(asked.result) or {}).get("content")
        if refused(probe, check, asked, "fs.readTextFile"):
            continue
        if content is None:
            probe.findings.fail(check, asked.why(probe.options.timeout), asked.response, asked)
        elif content != want and content != want.rstrip("\n"):
            detail = f"read {asked.params} gave {content!r}, the file holds {want!r}"
            probe.findings.fail(check, detail, asked.response)
        else:
            probe.findings.ok(check, "whole file and line 2, limit 1")


async def _fs_write(probe: ProbeSession, session_id: str, cwd: str, cancel: asyncio.Event) -> None:
    check = "client-fs-write"
    if not _fs_testable(probe, check, "writeTextFile", cwd):
        return
    path = os.path.join(cwd, f".acp-probe-{secrets.token_hex(4)}-written.txt")
    content = "written by the probe agent\nsecond line é\n"
    params = {"sessionId": session_id, "path": path, "content": content}
    try:
        asked = await probe.ask("fs/write_text_file", params, cancel)
        try:
            with open(path, encoding="utf-8", newline="") as file:
                on_disk: str | None = file.read()
        except OSError:
            on_disk = None
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)
    if refused(probe, check, asked, "fs.writeTextFile"):
        return
    if asked.response is None:
        probe.findings.fail(check, asked.why(probe.options.timeout), asked.response, asked)
    elif on_disk != content:
        detail = "the file was not created" if on_disk is None else f"the file holds {on_disk!r}"
        probe.findings.fail(check, f"answered, but {detail}", asked.response)
    else:
        probe.findings.ok(check, "a new file created with the content")


async def _terminal(probe: ProbeSession, session_id: str, cwd: str, cancel: asyncio.Event) -> None:
    check = "client-terminal"
    if not probe.capability("terminal"):
        probe.findings.skip(check, "the client does not advertise terminal")
        return
    fail, timeout = probe.findings.fail, probe.options.timeout
    params: dict[str, Any] = {
        "sessionId": session_id,
        "command": sys.executable,
        "args": ["-c", f"print('{TERMINAL_MARKER}')"],
        "outputByteLimit": 100_000,
    }
    if os.path.isabs(cwd):
        params["cwd"] = cwd
    created = await probe.ask("terminal/create", params, cancel)
    terminal_id = (as_object(created.result) or {}).get("terminalId")
    if refused(probe, check, created, "terminal"):
        return
    if not isinstance(terminal_id, str):
        fail(check, "terminal/create: " + created.why(timeout), created.response, created)
        return
    ref = {"sessionId": session_id, "terminalId": terminal_id}
    try:
        waited = await probe.ask("terminal/wait_for_exit", ref)
        exit_code = (as_object(waited.result) or {}).get("exitCode")
        if waited.result is None:
            fail(check, "terminal/wait_for_exit: " + waited.why(timeout), waited.response)
        elif exit_code != 0:
            fail(
                check,
                f"terminal/wait_for_exit: exitCode {exit_code!r}, expected 0",
                waited.response,
            )
        output = await probe.ask("terminal/output", ref)
        text = (as_object(output.result) or {}).get("output")
        if not isinstance(text, str):
            fail(check, "terminal/output: " + output.why(timeout), output.response)
        elif TERMINAL_MARKER not in text:
            fail(check, f"terminal/output: {text!r} lacks {TERMINAL_MARKER!r}", output.response)
    finally:
        released = await probe.ask("terminal/release", ref)
    if released.response is None or released.error is not None:
        fail(check, "terminal/release: " + released.why(timeout), released.response)
    probe.findings.ok(check, "create, wait_for_exit, output, release")


async def _ext(probe: ProbeSession, session_id: str, cwd: str, cancel: asyncio.Event) -> None:
    check = "client-unknown-ext-method"
    asked = await probe.ask(EXT_METHOD, {"sessionId": session_id}, cancel)
    code = None if asked.error is None else asked.error.get("code")
    if code == -32601:
        probe.findings.ok(check, "-32601")
    elif asked.response is not None and asked.error is None:
        probe.findings.fail(check, "answered with a result, not -32601", asked.response)
    else:
        probe.findings.fail(check, asked.why(probe.options.timeout), asked.response, asked)


async def _unadvertised(
    probe: ProbeSession, session_id: str, cwd: str, cancel: asyncio.Event
) -> None:
    check = "client-unadvertised"
    missing = os.path.join(cwd, f".acp-probe-{secrets.token_hex(4)}-absent.txt")
    params: dict[str, Any]
    if not probe.capability("fs", "readTextFile"):
        method, params = "fs/read_text_file", {"sessionId": session_id, "path": missing}
    elif not probe.capability("terminal"):
        args = ["-c", "pass"]
        method = "terminal/create"
        params = {"sessionId": session_id, "command": sys.executable, "args": args}
    elif not probe.capability("fs", "writeTextFile"):
        method = "fs/write_text_file"
        params = {"sessionId": session_id, "path": missing, "content": ""}
    else:
        probe.findings.not_exercised(check, "the client advertises every fs and terminal method")
        return
    asked = await probe.ask(method, params, cancel)
    if asked.response is None:
        probe.findings.fail(
            check, asked.why(probe.options.timeout) + " (not advertised)", None, asked
        )
    else:
        what = "an error" if asked.error is not None else "a result"
        probe.findings.ok(check, f"{method} (not advertised) answered with {what}")
    if method == "fs/write_text_file":
        with contextlib.suppress(OSError):
            os.remove(missing)
    terminal_id = (as_object(asked.result) or {}).get("terminalId")
    if isinstance(terminal_id, str):  # it ran it anyway: free the terminal
        await probe.ask("terminal/release", {"sessionId": session_id, "terminalId": terminal_id})
