"""Protocol conformance checks for any ACP agent: in-process, or any executable over stdio.

    from myagent.acp.conformance import assert_conforms, check_agent

    def test_my_agent_follows_the_protocol() -> None:
        assert_conforms(check_agent(MyAgent))            # in-process: no subprocess

    report = check_command(["node", "agent.js"])         # any agent, over stdio

Every check cites the page and section of the ACP docs it enforces and its level (MUST,
SHOULD, or INFO, which never fails a run). Each check drives a fresh agent (a new `Agent`
instance, or a new process) with a `ScriptedClient`, so one fault shows up in the check it
breaks and nowhere else; the message-level checks (framing, strict decoding) then read every
line the agents sent in all those runs. A check is `passed`, `failed` (with the offending
message), `skipped` (the agent does not advertise the feature) or `not testable` (with the
reason: a prompt that fails for want of credentials is not a pass). Every wait is bounded by
`Options.timeout`, and processes are started in their own process group, which is killed
when a run ends: a silent or stuck agent costs seconds and leaves nothing behind.

Standard library only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import os
import shutil
import tempfile
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Literal

from . import types
from .connection import Reader, Writer
from .dispatch import INVALID_PARAMS, METHOD_NOT_FOUND
from .methods import CLIENT_HANDLES, METHODS, PROTOCOL_VERSION
from .testing import (
    AgentRun,
    Answer,
    Line,
    Opener,
    Reply,
    ScriptedClient,
    Serve,
    as_list,
    as_object,
    in_process,
    over_stdio,
)

Level = Literal["MUST", "SHOULD", "INFO"]
Status = Literal["passed", "failed", "skipped", "not testable"]
STATUSES: Final[tuple[Status, ...]] = ("passed", "failed", "skipped", "not testable")

UNSUPPORTED_VERSION: Final = 65535  # the highest uint16: a protocol version no agent speaks
_AUTH_REQUIRED: Final = -32000


@dataclasses.dataclass(frozen=True)
class Check:
    """One protocol rule: what is checked, and where the docs say so."""

    id: str
    title: str
    level: Level
    doc: str
    """The page and section of the ACP docs (protocol v1) the rule comes from."""
    rule: str
    """The sentence enforced, as the docs put it."""


_STDIO = "transports.mdx § stdio"
CHECKS: Final[tuple[Check, ...]] = (
    Check(
        "stdio-framing",
        "every line the agent writes is one JSON-RPC 2.0 message",
        "MUST",
        _STDIO,
        "Messages are delimited by newlines (\\n), and MUST NOT contain embedded newlines. "
        "The agent MUST NOT write anything to its stdout that is not a valid ACP message.",
    ),
    Check(
        "schema-strict",
        "every message decodes in strict mode (unknown fields and variants are warnings)",
        "MUST",
        _STDIO,
        "The agent MUST NOT write anything to its stdout that is not a valid ACP message.",
    ),
    Check(
        "initialize",
        "initialize answers the chosen version and the agent's capabilities",
        "MUST",
        "initialization.mdx § Initialization",
        "The Agent MUST respond with the chosen protocol version and the capabilities it supports.",
    ),
    Check(
        "initialize-version",
        f"initialize asking for unsupported version {UNSUPPORTED_VERSION} gets the agent's latest",
        "MUST",
        "initialization.mdx § Version Negotiation",
        "If the Agent supports the requested version, it MUST respond with the same version. "
        "Otherwise, the Agent MUST respond with the latest version it supports.",
    ),
    Check(
        "session-new",
        "session/new answers a unique session id",
        "MUST",
        "session-setup.mdx § Creating a Session",
        "The Agent MUST respond with a unique Session ID that identifies this conversation.",
    ),
    Check(
        "session-modes",
        "advertised modes: currentModeId is one of availableModes, set_mode to another works",
        "MUST",
        "session-modes.mdx § SessionModeState, § From the Client",
        "The ID of the mode that is currently active. The ID of the mode to switch to. Must "
        "be one of the modes listed in availableModes.",
    ),
    Check(
        "session-modes-unknown",
        "session/set_mode to a mode that was not advertised gets an error",
        "SHOULD",
        "session-modes.mdx § From the Client",
        "The ID of the mode to switch to. Must be one of the modes listed in availableModes.",
    ),
    Check(
        "session-load",
        "session/load of a known session answers after its replay",
        "MUST",
        "session-setup.mdx § Loading a Session",
        "When all the conversation entries have been streamed to the Client, the Agent MUST "
        "respond to the original session/load request.",
    ),
    Check(
        "prompt-turn",
        "every session/update of a turn arrives before the session/prompt response",
        "MUST",
        "prompt-turn.mdx § 4. Check for Completion",
        "If there are no pending tool calls, the turn ends and the Agent MUST respond to the "
        "original session/prompt request with a StopReason.",
    ),
    Check(
        "cancel",
        "session/cancel ends the turn with stopReason cancelled, and no update follows",
        "MUST",
        "prompt-turn.mdx § Cancellation",
        "After all ongoing operations have been successfully aborted and pending updates have "
        "been sent, the Agent MUST respond to the original session/prompt request with the "
        "cancelled stop reason. The Agent MAY send session/update notifications with content "
        "or tool call updates after receiving the session/cancel notification, but it MUST "
        "ensure that it does so before responding to the session/prompt request.",
    ),
    Check(
        "unknown-method",
        "an unknown method gets -32601",
        "MUST",
        "overview.mdx § Communication Model",
        "The protocol follows the JSON-RPC 2.0 specification (JSON-RPC 2.0 § 5.1: -32601 "
        "Method not found, the method does not exist / is not available).",
    ),
    Check(
        "unknown-ext-method",
        "an unknown `_`-prefixed request gets -32601",
        "SHOULD",
        "extensibility.mdx § Custom Requests",
        "If the receiving end doesn't recognize the custom method name, it should respond "
        'with the standard "Method not found" error.',
    ),
    Check(
        "invalid-params",
        "params that do not fit get an error (-32602), and the agent keeps serving",
        "MUST",
        "overview.mdx § Communication Model",
        "The protocol follows the JSON-RPC 2.0 specification (JSON-RPC 2.0 § 5: when a rpc "
        "call is made, the Server MUST reply with a Response; § 5.1: -32602 Invalid params).",
    ),
    Check(
        "unknown-notification",
        "unknown notifications are ignored (no answer), and the agent keeps serving",
        "SHOULD",
        "extensibility.mdx § Custom Notifications",
        "Unlike with custom requests, implementations SHOULD ignore unrecognized notifications.",
    ),
    Check(
        "exit-on-eof",
        "the agent exits by itself once its stdin is closed (information only)",
        "INFO",
        _STDIO,
        "Client->>Agent Process: Close stdin, terminate subprocess (the sequence diagram: the "
        "client ends the agent; exiting on EOF is good manners, not a requirement).",
    ),
)
CHECKS_BY_ID: Final = {check.id: check for check in CHECKS}


@dataclasses.dataclass
class CheckResult:
    check: Check
    status: Status
    detail: str = ""
    offending: str | None = None
    """The offending message (a line the agent sent), when there is one."""
    warnings: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.check.id,
            "title": self.check.title,
            "level": self.check.level,
            "doc": self.check.doc,
            "rule": self.check.rule,
            "status": self.status,
            "detail": self.detail,
            "offending": self.offending,
            "warnings": list(self.warnings),
        }


@dataclasses.dataclass
class Report:
    """The result of every check, in the order of `CHECKS`."""

    target: str
    results: list[CheckResult]

    def result(self, check_id: str) -> CheckResult:
        for result in self.results:
            if result.check.id == check_id:
                return result
        raise KeyError(check_id)

    def failures(self, strict: bool = False) -> list[CheckResult]:
        """The failed checks that fail the run: MUST ones (and SHOULD ones if `strict`)."""
        levels = ("MUST", "SHOULD") if strict else ("MUST",)
        return [r for r in self.results if r.status == "failed" and r.check.level in levels]

    def ok(self, strict: bool = False) -> bool:
        return not self.failures(strict)

    def counts(self) -> dict[Status, int]:
        return {status: sum(r.status == status for r in self.results) for status in STATUSES}

    def summary(self) -> str:
        counts = self.counts()
        return (
            f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} "
            f"skipped, {counts['not testable']} not testable"
        )

    def lines(self) -> list[str]:
        out: list[str] = []
        for r in self.results:
            text = f"{r.status.upper():<12} [{r.check.level}] {r.check.id}: {r.check.title}"
            out.append(text + (f" -- {r.detail}" if r.detail else ""))
            if r.status == "failed":
                out.append(f"    rule ({r.check.doc}): {r.check.rule}")
            if r.offending:
                out.append(f"    offending: {r.offending}")
            out += [f"    warning: {warning}" for warning in r.warnings]
        out.append(self.summary())
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "results": [r.to_dict() for r in self.results],
            "counts": dict(self.counts()),
            "ok": self.ok(),
            "ok_strict": self.ok(strict=True),
        }


def _reject_option(params: Any) -> dict[str, Any]:
    """The default answer to session/request_permission: a reject option if there is one."""
    options: list[Any] = getattr(params, "options", None) or []
    for option in options:
        if getattr(option, "kind", None) in ("reject_once", "reject_always"):
            option_id: Any = getattr(option, "option_id", None)
            return {"outcome": {"outcome": "selected", "optionId": option_id}}
    return {"outcome": {"outcome": "cancelled"}}


DEFAULT_SCRIPT: Final[Mapping[str, Answer]] = {"session/request_permission": _reject_option}


@dataclasses.dataclass(frozen=True)
class Options:
    timeout: float = 5.0
    """Seconds to wait for any one answer (initialize includes the agent's start-up)."""
    prompt: str = "Hello"
    """The text of the prompt the turn checks send."""
    cancel_prompt: str | None = None
    """The prompt the cancel check sends, then cancels (default: `prompt`): one that runs long."""
    script: Mapping[str, Answer] | None = None
    """How the client answers the agent's requests (default: `DEFAULT_SCRIPT`)."""
    settle: float = 0.3
    """Seconds to watch for late messages after a response (updates after the turn ended)."""
    eof_timeout: float = 2.0
    """Seconds the exit-on-EOF check waits for the agent to end after EOF."""
    concurrency: int = 4
    """How many agents run at once (each check drives its own)."""


def _script(options: Options | None) -> Mapping[str, Answer]:
    return DEFAULT_SCRIPT if options is None or options.script is None else options.script


class _NotTestable(Exception):
    pass


class _Skip(Exception):
    pass


class _Fail(Exception):
    def __init__(self, detail: str, offending: Line | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.offending = offending


Outcome = tuple[Status, str, Line | None, list[str]]


def _well_formed_error(value: Any) -> bool:
    error = as_object(value)
    return (
        error is not None
        and isinstance(error.get("code"), int)
        and not isinstance(error.get("code"), bool)
        and isinstance(error.get("message"), str)
    )


def _error_text(reply: Reply) -> str:
    error = as_object(reply.error)
    if error is not None:
        return f"error {error.get('code')} {error.get('message')!r}"
    return reply.describe()


class _Runner:
    def __init__(self, opener: Opener, options: Options, cwd: str) -> None:
        self.opener = opener
        self.options = options
        self.cwd = cwd
        self.script = _script(options)
        self.runs: list[AgentRun] = []
        self.eof_run: AgentRun | None = None  # the initialize check's run, which waits for EOF
        self.limit = asyncio.Semaphore(max(1, options.concurrency))
        self.done: dict[str, asyncio.Future[Outcome]] = {}
        for check in CHECKS:
            self.done[check.id] = asyncio.get_running_loop().create_future()

    # -- plumbing --------------------------------------------------------------------
    @asynccontextmanager
    async def agent(self, eof_wait: float = 0.2) -> AsyncGenerator[AgentRun, None]:
        async with self.limit, self.opener(eof_wait) as run:
            self.runs.append(run)
            yield run

    def initialize_params(self, version: int) -> dict[str, Any]:
        script = self.script
        return {
            "protocolVersion": version,
            "clientCapabilities": {
                "fs": {
                    "readTextFile": "fs/read_text_file" in script,
                    "writeTextFile": "fs/write_text_file" in script,
                },
                "terminal": any(name.startswith("terminal/") for name in script),
            },
            "clientInfo": {
                "name": "acp-conformance",
                "title": "ACP conformance kit",
                "version": "1",
            },
        }

    async def call(self, run: AgentRun, method: str, params: Any, timeout: float = 0.0) -> Reply:
        return await run.client.call(method, params, timeout or self.options.timeout)

    async def setup(self, run: AgentRun, session: bool = True) -> tuple[dict[str, Any], str]:
        """initialize (and session/new) at the start of a run; _NotTestable if they fail."""
        reply = await self.call(run, "initialize", self.initialize_params(PROTOCOL_VERSION))
        init = as_object(reply.result)
        if not reply.ok or init is None:
            raise _NotTestable(f"initialize failed: {self.why(run, reply)}")
        if not session:
            return init, ""
        new = await self.call(run, "session/new", {"cwd": self.cwd, "mcpServers": []})
        session_id = new.get("sessionId")
        if not new.ok or not isinstance(session_id, str):
            if new.error_code == _AUTH_REQUIRED:
                raise _NotTestable(f"session/new needs authentication ({_error_text(new)})")
            raise _NotTestable(f"session/new failed: {self.why(run, new)}")
        return init, session_id

    def why(self, run: AgentRun, reply: Reply) -> str:
        if reply.timed_out:
            return f"no answer within {self.options.timeout:g} s"
        if reply.closed:
            tail = " | ".join(run.stderr)
            return "the agent closed the connection" + (f" (stderr: {tail[-300:]})" if tail else "")
        return _error_text(reply)

    async def settle(self, run: AgentRun, after: Line, session_id: str) -> Line | None:
        """A session/update for `session_id` sent after `after` (within the settle time)."""

        def late(line: Line) -> bool:
            return (
                line.index > after.index
                and line.method == "session/update"
                and line.session_id() == session_id
            )

        return await run.client.wait_for(late, self.options.settle)

    async def run_check(self, check_id: str, probe: Callable[[], Awaitable[Outcome]]) -> None:
        async def single() -> tuple[Outcome, ...]:
            return (await probe(),)

        await self.run_checks((check_id,), single)

    async def run_checks(
        self, check_ids: tuple[str, ...], probe: Callable[[], Awaitable[tuple[Outcome, ...]]]
    ) -> None:
        """Run a probe and settle its checks, whatever happens (others may wait on them)."""
        shared: Outcome | None = None  # one outcome for all of them, when the probe stopped
        outcomes: tuple[Outcome, ...] = ()
        try:
            outcomes = await probe()
        except _Skip as exc:
            shared = ("skipped", str(exc), None, [])
        except _NotTestable as exc:
            shared = ("not testable", str(exc), None, [])
        except _Fail as exc:
            shared = ("failed", exc.detail, exc.offending, [])
        except OSError as exc:  # the agent could not even be started
            shared = ("failed", f"cannot start the agent: {exc}", None, [])
        except Exception as exc:  # noqa: BLE001 - a bug here must not hang the checks waiting
            shared = ("not testable", f"the check stopped: {type(exc).__name__}: {exc}", None, [])
        if shared is not None:
            outcomes = (shared,) * len(check_ids)
        for check_id, outcome in zip(check_ids, outcomes, strict=True):
            self.done[check_id].set_result(outcome)

    async def needs(self, check_id: str) -> Outcome:
        """Wait for another check; _NotTestable if it did not pass (what this one builds on)."""
        outcome = await self.done[check_id]
        if outcome[0] != "passed":
            raise _NotTestable(f"{check_id} did not pass")
        return outcome

    # -- the checks ------------------------------------------------------------------
    async def initialize(self) -> Outcome:
        async with self.agent(self.options.eof_timeout) as run:
            self.eof_run = run
            reply = await self.call(run, "initialize", self.initialize_params(PROTOCOL_VERSION))
        if not reply.ok:
            raise _Fail(f"initialize failed: {self.why(run, reply)}", reply.response)
        result = reply.result
        try:
            decoded = types.InitializeResponse.from_dict(result)
        except types.DecodeError as exc:
            detail = f"the response does not fit InitializeResponse: {exc}"
            raise _Fail(detail, reply.response) from None
        warnings: list[str] = []
        if decoded.protocol_version != PROTOCOL_VERSION:
            warnings.append(
                f"asked for version {PROTOCOL_VERSION}, the agent chose "
                f"{decoded.protocol_version}: the other checks assume {PROTOCOL_VERSION}"
            )
        if "agentInfo" not in (as_object(result) or {}):
            warnings.append(
                "no agentInfo (SHOULD, initialization.mdx § Implementation Information)"
            )
        return ("passed", f"protocolVersion {decoded.protocol_version}", None, warnings)

    async def initialize_version(self) -> Outcome:
        await self.needs("initialize")
        accepted = self.accepted_version
        async with self.agent() as run:
            reply = await self.call(run, "initialize", self.initialize_params(UNSUPPORTED_VERSION))
        if not reply.ok:
            raise _Fail(f"initialize failed: {self.why(run, reply)}", reply.response)
        answered = reply.get("protocolVersion")
        if not isinstance(answered, int) or isinstance(answered, bool):
            raise _Fail("protocolVersion is not an integer", reply.response)
        if answered == UNSUPPORTED_VERSION:
            raise _Fail(
                f"answered version {answered}, which does not exist: an agent that does not "
                "support the requested version must answer the latest one it supports",
                reply.response,
            )
        if answered < accepted:
            raise _Fail(
                f"answered version {answered}, but it accepted version {accepted}: its latest "
                "version cannot be lower",
                reply.response,
            )
        return ("passed", f"answered {answered}", None, [])

    @property
    def accepted_version(self) -> int:
        run = self.eof_run
        for line in [] if run is None else run.client.received:
            result = as_object(line.get("result"))
            if line.is_response and result is not None:
                version = result.get("protocolVersion")
                if isinstance(version, int):
                    return version
        return PROTOCOL_VERSION

    async def session_new(self) -> Outcome:
        await self.needs("initialize")
        async with self.agent() as run:
            await self.setup(run, session=False)
            first = await self.call(run, "session/new", {"cwd": self.cwd, "mcpServers": []})
            second = await self.call(run, "session/new", {"cwd": self.cwd, "mcpServers": []})
        ids: list[str] = []
        for reply in (first, second):
            if not reply.ok:
                if reply.error_code == _AUTH_REQUIRED:
                    raise _NotTestable(f"session/new needs authentication ({_error_text(reply)})")
                raise _Fail(f"session/new failed: {self.why(run, reply)}", reply.response)
            session_id = reply.get("sessionId")
            if not isinstance(session_id, str) or not session_id:
                raise _Fail("no sessionId in the response", reply.response)
            ids.append(session_id)
        if ids[0] == ids[1]:
            raise _Fail(f"two session/new calls answered the same id {ids[0]!r}", second.response)
        return ("passed", "", None, [])

    async def modes(self) -> tuple[Outcome, Outcome]:
        """session-modes and session-modes-unknown, from one run."""
        await self.needs("session-new")
        async with self.agent() as run:
            await self.setup(run, session=False)
            new = await self.call(run, "session/new", {"cwd": self.cwd, "mcpServers": []})
            if not new.ok:
                raise _NotTestable(f"session/new failed: {self.why(run, new)}")
            session_id = new.get("sessionId")
            modes = new.get("modes")
            if not modes:
                raise _Skip("the agent advertises no modes")
            main = await self._check_modes(run, session_id, modes, new)
            unknown = await self.call(
                run,
                "session/set_mode",
                {"sessionId": session_id, "modeId": "acp-conformance-no-such-mode"},
            )
        if unknown.ok:
            detail = "switching to a mode that was not advertised succeeded"
            return main, ("failed", detail, unknown.response, [])
        if unknown.response is None:
            return main, ("failed", self.why(run, unknown), None, [])
        return main, ("passed", _error_text(unknown), None, [])

    async def _check_modes(self, run: AgentRun, session_id: Any, modes: Any, new: Reply) -> Outcome:
        state = as_object(modes)
        available: Any = None if state is None else state.get("availableModes")
        if state is None or not isinstance(available, list):
            return ("failed", "modes has no availableModes list", new.response, [])
        listed = [as_object(mode) for mode in as_list(available) or []]
        ids: list[Any] = [mode.get("id") for mode in listed if mode is not None]
        current = state.get("currentModeId")
        if current not in ids:
            return ("failed", f"currentModeId {current!r} is not one of {ids}", new.response, [])
        target = next((mode for mode in ids if mode != current), current)
        reply = await self.call(
            run, "session/set_mode", {"sessionId": session_id, "modeId": target}
        )
        if not reply.ok:
            detail = (
                f"session/set_mode to advertised mode {target!r} failed: {self.why(run, reply)}"
            )
            return ("failed", detail, reply.response, [])
        return ("passed", f"{len(ids)} modes, switched to {target!r}", None, [])

    async def prompt(self, run: AgentRun, session_id: str, text: str) -> Reply:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return await self.call(run, "session/prompt", params)

    def prompt_failed(self, run: AgentRun, reply: Reply) -> Outcome | None:
        """The outcome when a prompt did not end with a result."""
        if reply.ok:
            return None
        if reply.timed_out:
            reason = f"no answer within {self.options.timeout:g} s (a slow model? raise --timeout)"
            return ("not testable", reason, None, [])
        if reply.response is None:
            return ("failed", self.why(run, reply), None, [])
        if not _well_formed_error(reply.error):
            return ("failed", "the error response is not a JSON-RPC error", reply.response, [])
        return ("not testable", f"the prompt failed: {_error_text(reply)}", None, [])

    async def prompt_turn(self) -> Outcome:
        await self.needs("session-new")
        async with self.agent() as run:
            _, session_id = await self.setup(run)
            reply = await self.prompt(run, session_id, self.options.prompt)
            failed = self.prompt_failed(run, reply)
            if failed is not None:
                return failed
            assert reply.response is not None
            stop = reply.get("stopReason")
            if not isinstance(stop, str):
                raise _Fail("the response has no stopReason", reply.response)
            late = await self.settle(run, reply.response, session_id)
        if late is not None:
            raise _Fail("a session/update of the turn came after the session/prompt response", late)
        return ("passed", f"stopReason {stop}", None, [])

    async def cancel(self) -> Outcome:
        await self.needs("prompt-turn")
        async with self.agent() as run:
            _, session_id = await self.setup(run)
            text = self.options.cancel_prompt or self.options.prompt
            mark = len(run.client.lines)
            pending = asyncio.ensure_future(self.prompt(run, session_id, text))
            # Cancel mid-turn: once the turn shows signs of life (an update, a request, the
            # answer), or after a short while.
            await run.client.wait_for(lambda line: line.index > mark, 0.2)
            ended_before = pending.done()
            if not ended_before:
                await run.client.notify("session/cancel", {"sessionId": session_id})
            reply = await pending
            failed = self.prompt_failed(run, reply)
            if failed is not None:
                if failed[0] == "not testable" and reply.response is not None and not ended_before:
                    return (
                        "failed",
                        f"the cancelled prompt answered {_error_text(reply)}, "
                        "not stopReason cancelled",
                        reply.response,
                        [],
                    )
                return failed
            assert reply.response is not None
            stop = reply.get("stopReason")
            late = await self.settle(run, reply.response, session_id)
        if late is not None:
            raise _Fail("a session/update came after the cancelled turn's response", late)
        if ended_before:
            return ("passed", f"the turn had already ended ({stop}) before the cancel", None, [])
        if stop != "cancelled":
            return (
                "passed",
                f"stopReason {stop!r}",
                None,
                [
                    f"the turn ended with {stop!r} after the cancel was sent: it had ended before "
                    "the agent read it, or the agent ignored it (use a longer --cancel-prompt)"
                ],
            )
        return ("passed", "stopReason cancelled", None, [])

    async def session_load(self) -> Outcome:
        await self.needs("session-new")
        async with self.agent() as run:
            init, session_id = await self.setup(run)
            capabilities = as_object(init.get("agentCapabilities"))
            if capabilities is None or capabilities.get("loadSession") is not True:
                return ("skipped", "loadSession is not advertised", None, [])
            turn = await self.prompt(run, session_id, self.options.prompt)
            before = len(run.client.lines)
            reply = await self.call(
                run, "session/load", {"sessionId": session_id, "cwd": self.cwd, "mcpServers": []}
            )
            if not reply.ok or reply.response is None:
                raise _Fail(f"session/load failed: {self.why(run, reply)}", reply.response)
            replayed = [
                line
                for line in run.client.received[:]
                if before <= line.index < reply.response.index
                and line.method == "session/update"
                and line.session_id() == session_id
            ]
            late = await self.settle(run, reply.response, session_id)
        if late is not None:
            raise _Fail("a session/update of the replay came after the session/load response", late)
        warnings: list[str] = []
        if turn.ok and not replayed:
            warnings.append("the session had a prompt turn, but nothing was replayed")
        return ("passed", f"{len(replayed)} updates replayed", None, warnings)

    async def unknown_method(self, method: str) -> Outcome:
        await self.needs("initialize")
        async with self.agent() as run:
            await self.setup(run, session=False)
            reply = await self.call(run, method, {})
        if reply.ok:
            raise _Fail(f"{method} was answered with a result", reply.response)
        if reply.response is None:
            raise _Fail(self.why(run, reply))
        code = reply.error_code
        if code != METHOD_NOT_FOUND:
            raise _Fail(f"{method} got error {code}, not {METHOD_NOT_FOUND}", reply.response)
        return ("passed", "", None, [])

    async def invalid_params(self) -> Outcome:
        await self.needs("initialize")
        warnings: list[str] = []
        async with self.agent() as run:
            await self.setup(run, session=False)
            bad: list[tuple[str, dict[str, Any]]] = [
                ("session/new", {"mcpServers": []}),  # no cwd
                ("session/prompt", {"sessionId": 42, "prompt": "not a list"}),
            ]
            for method, params in bad:
                reply = await self.call(run, method, params)
                if reply.ok:
                    raise _Fail(f"{method} with invalid params succeeded", reply.response)
                if reply.response is None:
                    raise _Fail(f"{method} with invalid params: {self.why(run, reply)}")
                code = reply.error_code
                if code != INVALID_PARAMS:
                    warnings.append(f"{method} with invalid params got {code}, not -32602")
            after = await self.call(run, "session/new", {"cwd": self.cwd, "mcpServers": []})
        if after.response is None:
            raise _Fail(f"the agent stopped serving after invalid params: {self.why(run, after)}")
        return ("passed", "", None, warnings)

    async def unknown_notification(self) -> Outcome:
        await self.needs("initialize")
        async with self.agent() as run:
            await self.setup(run, session=False)
            mark = len(run.client.lines)
            await run.client.notify("_acp_conformance/unknown_notification", {"probe": True})
            await run.client.notify("acp_conformance/unknown_notification", {"probe": True})
            after = await self.call(run, "session/new", {"cwd": self.cwd, "mcpServers": []})
            if after.response is not None:
                await run.client.wait_for(lambda line: False, self.options.settle)
        if after.response is None:
            raise _Fail(f"the agent stopped serving: {self.why(run, after)}")
        for line in run.client.received:
            if (
                line.index > mark
                and line.is_response
                and run.client.sent_method(line.get("id")) is None
            ):
                raise _Fail("a notification was answered", line)
        return ("passed", "", None, [])

    # -- message-level checks, over every line of every run -------------------------
    def framing(self) -> Outcome:
        warnings: list[str] = []
        for run in self.runs:
            for line in run.client.received:
                if not line.raw.strip():
                    warnings.append("an empty line on stdout")
                    continue
                problem = _framing_problem(line)
                if problem is not None:
                    return ("failed", problem, line, warnings)
        count = sum(len(run.client.received) for run in self.runs)
        if not count:
            return ("not testable", "the agent sent nothing", None, warnings)
        return ("passed", f"{count} lines", None, warnings)

    def strict(self) -> Outcome:
        warnings: list[str] = []
        seen: set[str] = set()
        failure: Outcome | None = None
        for run in self.runs:
            for line in run.client.received:
                if line.object is None:
                    continue  # stdio-framing's business
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
        if not any(run.client.received for run in self.runs):
            return ("not testable", "the agent sent nothing", None, warnings)
        return ("passed", "", None, warnings)

    def exit_on_eof(self) -> Outcome:
        run = self.eof_run
        if run is None or run.exited_on_eof is None:
            return ("not testable", "no run", None, [])
        if run.exited_on_eof:
            return ("passed", "", None, [])
        wait = self.options.eof_timeout
        return ("failed", f"still running {wait:g} s after EOF (it was terminated)", None, [])


def _framing_problem(line: Line) -> str | None:
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
    if "error" in message and not _well_formed_error(message["error"]):
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
    ctx = types.DecodeContext(strict=True)
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
        return unknown_warnings(decode(raw, ctx), raw, "params", method)
    if "result" not in message:
        return []  # an error response: framing checks its shape
    sent = client.sent_method(message.get("id"))
    spec = None if sent is None else METHODS.get(sent)
    if spec is None or spec.decode_result is None:
        return []  # an answer to a method the schema does not have (the unknown-method probes)
    raw = message["result"]
    return unknown_warnings(spec.decode_result(raw, ctx), raw, "result", f"{sent} result")


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


async def run_checks(opener: Opener, target: str, options: Options | None = None) -> Report:
    """Run every check, each on a fresh agent from `opener`; the report."""
    options = options or Options()
    cwd = tempfile.mkdtemp(prefix="acp-conformance-")
    try:
        runner = _Runner(opener, options, os.path.realpath(cwd))
        probes: list[Awaitable[None]] = [
            runner.run_check("initialize", runner.initialize),
            runner.run_check("initialize-version", runner.initialize_version),
            runner.run_check("session-new", runner.session_new),
            runner.run_checks(("session-modes", "session-modes-unknown"), runner.modes),
            runner.run_check("session-load", runner.session_load),
            runner.run_check("prompt-turn", runner.prompt_turn),
            runner.run_check("cancel", runner.cancel),
            runner.run_check(
                "unknown-method", lambda: runner.unknown_method("acp_conformance/no_such_method")
            ),
            runner.run_check(
                "unknown-ext-method",
                lambda: runner.unknown_method("_acp_conformance/no_such_method"),
            ),
            runner.run_check("invalid-params", runner.invalid_params),
            runner.run_check("unknown-notification", runner.unknown_notification),
        ]
        await asyncio.gather(*probes)
        runner.done["stdio-framing"].set_result(runner.framing())
        runner.done["schema-strict"].set_result(runner.strict())
        runner.done["exit-on-eof"].set_result(runner.exit_on_eof())
        results: list[CheckResult] = []
        for check in CHECKS:
            status, detail, offending, warnings = runner.done[check.id].result()
            results.append(
                CheckResult(
                    check, status, detail, None if offending is None else offending.text(), warnings
                )
            )
        return Report(target, results)
    finally:
        shutil.rmtree(cwd, ignore_errors=True)


def check_command(
    argv: Sequence[str],
    options: Options | None = None,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Report:
    """Run every check against an agent executable (any language) over its stdio."""
    if not argv:
        raise ValueError("no agent command given")
    opener = over_stdio(argv, _script(options), cwd=cwd, env=env)
    return asyncio.run(run_checks(opener, " ".join(argv), options))


def check_agent(make_agent: Callable[[], Any], options: Options | None = None) -> Report:
    """Run every check against an `Agent` of this package, in-process (no subprocess).

    `make_agent()` returns a fresh agent (the class itself will do); it is called once per
    check. Only in the agent-role package, which has `run_agent`. Inside a running event
    loop (an async test), await `check_agent_async` instead."""
    return asyncio.run(check_agent_async(make_agent, options))


async def check_agent_async(
    make_agent: Callable[[], Any], options: Options | None = None
) -> Report:
    """`check_agent`, for a caller already in an event loop."""
    try:
        role = importlib.import_module(f"{__package__}.agent")
    except ImportError:
        raise TypeError(
            "check_agent needs the agent-role package; use check_command for an executable"
        ) from None

    def serve() -> Serve:
        agent = make_agent()

        async def run(reader: Reader, writer: Writer) -> None:
            await role.run_agent(agent, reader, writer, shutdown_grace=0.2)

        return run

    name = getattr(make_agent, "__qualname__", type(make_agent).__name__)
    return await run_checks(in_process(serve, _script(options)), name, options)


def assert_conforms(report: Report, strict: bool = False) -> None:
    """Raise AssertionError (the whole report as its message) unless every MUST check passed
    (every SHOULD one too if `strict`): one line for pytest."""
    if not report.ok(strict):
        failed = ", ".join(r.check.id for r in report.failures(strict))
        raise AssertionError(f"{report.target} fails {failed}\n{report}")
