"""The conformance harness: what every probe builds on. Fresh agents from the opener (each
probe sets up what it needs itself: initialize, authenticate, its own session), bounded calls
(a start-up timeout apart from the per-answer one), the settle window that tells a late
conversation entry from a state update, settling a check's outcome, and the exceptions a
probe stops with. (`conformance` is the public façade.)"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

from .. import types
from ..methods import METHODS, PROTOCOL_VERSION
from .conformance_checks import CHECKS, Options, Outcome, script_of
from .conformance_messages import well_formed_error
from .runners import AgentRun, Line, Opener, Reply, as_list, as_object

AUTH_REQUIRED: Final = -32000
SESSION_REFUSED: Final = (
    "blocked by session/new: the agent refuses sessions (its backend or credentials? give it its "
    "env with --env KEY=VALUE, or --auth-method ID)"
)

STARTS_SESSION: Final = frozenset({"session/new", "session/load", "session/resume"})
"""The methods that open a session: they wait as long as an agent's start-up."""

CONVERSATION_UPDATES: Final = frozenset(
    {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
    }
)
"""The session/update kinds that are conversation entries (replayed by session/load, sent by a
turn before its answer). The others (available_commands_update, current_mode_update,
config_option_update, session_info_update, usage_update) are session state, which an agent
may send at any time: after a session/load or session/prompt answer, they fail nothing."""

ROOT_OF: Final = {
    check_id: "prompt-turn"
    for check_id in (
        "prompt-image",
        "prompt-audio",
        "prompt-resource",
        "prompt-resource-link",
        "prompt-meta",
        "cancel",
        "session-close-prompt",
    )
}
"""The checks that need a working prompt turn: the same failure as prompt-turn's (a malformed
answer to every prompt, say) is prompt-turn's fault, reported once."""

# The checks the running probe settles (a probe's agents are attributed to them).
_checks: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "acp_conformance_checks", default=()
)


class NotTestable(Exception):
    """The check cannot be run; `blocked` says by what, and the fix, for the summary."""

    def __init__(self, detail: str, blocked: str = "", by: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.blocked = blocked
        self.by = by
        """The check whose fault blocks this one (`session-new`), when it is a check's."""


class Skip(Exception):
    """The agent does not advertise the feature the check is about."""


class Fail(Exception):
    """The check failed, with the offending line when there is one."""

    def __init__(self, detail: str, offending: Line | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.offending = offending


def error_text(reply: Reply) -> str:
    error = as_object(reply.error)
    if error is not None:
        return f"error {error.get('code')} {error.get('message')!r}"
    return reply.describe()


def update_kind(line: Line) -> Any:
    """The `sessionUpdate` of a session/update line (None for anything else)."""
    params = as_object(line.get("params")) or {}
    return (as_object(params.get("update")) or {}).get("sessionUpdate")


def is_conversation(line: Line, session_id: Any) -> bool:
    return (
        line.method == "session/update"
        and line.session_id() == session_id
        and update_kind(line) in CONVERSATION_UPDATES
    )


class Harness:
    """One conformance run: its agents (every line they sent stays in `runs`) and, per check,
    the future its outcome settles."""

    def __init__(self, opener: Opener, options: Options, cwd: str, files: str = "") -> None:
        self.opener = opener
        self.options = options
        self.cwd = cwd
        self.files = files or cwd  # the kit's own directory (files the prompts name)
        self.scheduled: set[str] = set()  # the checks whose probes run
        self.script = script_of(options)
        self.runs: list[AgentRun] = []
        self.raw_runs: list[AgentRun] = []  # runs fed malformed input on purpose
        self.eof_runs: list[tuple[str, AgentRun]] = []  # runs that wait for an exit after EOF
        self.turns = 0  # prompt turns that ended with a result, in all runs
        self.prompts_refused = False  # prompt-turn's plain prompt was answered with an error
        self.plain_stop = ""  # the stopReason prompt-turn's plain prompt ended with
        self.cannot_run = ""  # set when the agent cannot be checked at all (exit 2)
        self.gate_blocked = ""  # set when no check can run: initialize fails
        self.accepted_version = PROTOCOL_VERSION  # what the agent answered to initialize
        self.init_answer: dict[str, Any] = {}  # the gate's initialize result (capabilities)
        self.init_line: Line | None = None  # the gate's initialize answer
        self.limit = asyncio.Semaphore(max(1, options.concurrency))
        self.started_up = asyncio.get_running_loop().create_future()  # the first initialize
        self.done: dict[str, asyncio.Future[Outcome]] = {}
        self.blocked: dict[str, str] = {}
        self.blocked_by: dict[str, str] = {}  # check -> the check whose fault blocked it
        self.info_lines: set[int] = set()  # answers info checks judge (ids of their Lines)
        self.check_runs: dict[str, list[AgentRun]] = {check.id: [] for check in CHECKS}
        self.started: dict[str, float] = {}
        self.session_calls: set[tuple[int, Any]] = set()  # (run, session id) already called
        self.finished: dict[str, float] = {}
        for check in CHECKS:
            self.done[check.id] = asyncio.get_running_loop().create_future()

    # -- plumbing --------------------------------------------------------------------
    @asynccontextmanager
    async def agent(
        self, eof_wait: float = 0.2, gate: bool = True
    ) -> AsyncGenerator[AgentRun, None]:
        """A fresh agent for the running probe. Unless `gate` is off (the initialize check
        itself), it waits until one agent has answered initialize: an agent that cannot start
        is started once, not once per check."""
        if gate:
            await asyncio.shield(self.started_up)
            if self.gate_blocked:
                detail = (
                    f"the agent cannot be checked: {self.cannot_run}"
                    if self.cannot_run
                    else "initialize did not pass"
                )
                raise NotTestable(detail, self.gate_blocked, "initialize")
        async with self.limit:
            for check_id in _checks.get():
                self.started.setdefault(check_id, time.monotonic())
            async with self.opener(eof_wait) as run:
                self.runs.append(run)
                for check_id in _checks.get():
                    self.check_runs[check_id].append(run)
                yield run

    def open_gate(self, cannot_run: str = "", blocked: str = "") -> None:
        """Let the probes waiting for the first initialize answer go on (blocked, if it failed)."""
        if not self.started_up.done():
            self.cannot_run = cannot_run
            self.gate_blocked = blocked or (
                "blocked: the agent cannot be checked" if cannot_run else ""
            )
            self.started_up.set_result(None)

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
        wait = timeout or self.timeout_for(method)
        session = as_object(params) or {}
        key = (id(run), session.get("sessionId"))
        if key[1] is not None and key not in self.session_calls:
            # A session's first call (set_mode, the first prompt) may start a backend that
            # starts lazily: the start-up budget too.
            self.session_calls.add(key)
            wait = max(wait, self.options.startup_timeout)
        return await run.client.call(method, params, wait)

    def timeout_for(self, method: str) -> float:
        """Opening a session may start the agent's machinery (a backend process per session,
        for some): as much time as its start-up, so a loaded machine changes no verdict."""
        if method in STARTS_SESSION:
            return max(self.options.startup_timeout, self.options.timeout)
        return self.options.timeout

    async def initialized(self, run: AgentRun, version: int = PROTOCOL_VERSION) -> Reply:
        """initialize (within the start-up timeout); NotTestable if it fails."""
        reply = await self.call(
            run, "initialize", self.initialize_params(version), self.options.startup_timeout
        )
        if not reply.ok or as_object(reply.result) is None:
            raise NotTestable(
                f"initialize failed: {self.why(run, reply)}", "blocked by initialize", "initialize"
            )
        return reply

    async def setup(
        self, run: AgentRun, session: bool = True, **extra: Any
    ) -> tuple[dict[str, Any], str]:
        """initialize, authenticate (with --auth-method), and session/new (with `extra`
        params) at the start of a run; NotTestable if they fail, saying what blocks them."""
        init: dict[str, Any] = as_object((await self.initialized(run)).result) or {}
        method = self.options.auth_method
        if method is not None:
            reply = await self.call(run, "authenticate", {"methodId": method})
            if not reply.ok:
                raise NotTestable(
                    f"authenticate {method!r} failed: {self.why(run, reply)}",
                    f"blocked by authentication: authenticate {method!r} fails "
                    "(give the agent its credentials with --env KEY=VALUE)",
                )
        if not session:
            return init, ""
        session_id, _ = await self.open_session(run, init, **extra)
        return init, session_id

    async def open_session(
        self, run: AgentRun, init: dict[str, Any], **extra: Any
    ) -> tuple[str, Reply]:
        """session/new (with `extra` params): its id and answer; NotTestable if it fails."""
        params = self.new_params(**extra)
        # The first session of an agent may start its machinery: the start-up timeout too.
        new = await self.call(run, "session/new", params, self.options.startup_timeout)
        session_id = new.get("sessionId")
        if not new.ok or not isinstance(session_id, str):
            if new.error_code == AUTH_REQUIRED:
                raise NotTestable(
                    f"session/new needs authentication ({error_text(new)})",
                    self.auth_hint(init),
                    "session-new",
                )
            raise NotTestable(
                f"session/new failed: {self.why(run, new)}", SESSION_REFUSED, "session-new"
            )
        return session_id, new

    def new_params(self, **extra: Any) -> dict[str, Any]:
        """session/new params: the run's cwd, no MCP servers, and `extra`."""
        params: dict[str, Any] = {"cwd": self.cwd, "mcpServers": []}
        params.update(extra)
        return params

    def auth_hint(self, init: dict[str, Any]) -> str:
        methods = [as_object(m) or {} for m in as_list(init.get("authMethods")) or []]
        ids = ", ".join(str(m.get("id")) for m in methods) or "none advertised"
        return (
            "blocked by authentication: pass `--auth-method ID` and the agent's env "
            f"(--env KEY=VALUE; advertised methods: {ids})"
        )

    def info_strict(self, reply: Reply) -> str | None:
        """Take an info probe's answer as that check's to judge (schema-strict, a MUST, skips
        it: an info probe's bad answer is reported at the info tier); why it does not decode
        strictly, if it does not."""
        line = reply.response
        if line is None or not reply.ok:
            return None
        self.info_lines.add(id(line))
        spec = METHODS.get(reply.method)
        if spec is None or spec.decode_result is None:
            return None
        try:
            spec.decode_result(reply.result, types.DecodeContext(strict=True))
        except types.DecodeError as exc:
            return f"the {reply.method} result does not decode strictly: {exc}"
        return None

    def why(self, run: AgentRun, reply: Reply) -> str:
        if reply.timed_out:
            return f"no answer within {reply.timeout or 0:g} s of silence"
        if reply.closed:
            tail = " | ".join(run.stderr)
            ended = run.exit_text()  # "killed by SIGSEGV", once the process is gone
            text = "the agent closed the connection" + (f" ({ended})" if ended else "")
            return text + (f" (stderr: {tail[-300:]})" if tail else "")
        return error_text(reply)

    async def late_replay(self, run: AgentRun, after: Line, session_id: str) -> Line | None:
        """A conversation entry for `session_id` after a session/load answer `after`, however
        late: watched until the agent falls silent for `Options.replay_watch` seconds (each
        message it sends restarts the window) or closes."""
        window = max(self.options.replay_watch, self.options.settle)
        while True:
            received = run.client.received[:]
            for line in received:
                if line.index > after.index and is_conversation(line, session_id):
                    return line
            last = received[-1].index if received else -1

            def newer(line: Line, last: int = last) -> bool:
                return line.index > last

            fresh = await run.client.wait_for(newer, window)
            if fresh is None and len(run.client.received) == len(received):
                return None

    async def late_conversation(self, run: AgentRun, after: Line, session_id: str) -> Line | None:
        """A conversation entry for `session_id` sent after `after`, within the settle time
        (state updates, which may come at any time, do not count)."""

        def late(line: Line) -> bool:
            return line.index > after.index and is_conversation(line, session_id)

        return await run.client.wait_for(late, self.options.settle)

    # -- settling ----------------------------------------------------------------------
    async def outcome_of(self, check_id: str) -> Outcome | None:
        """Another check's outcome, once settled; None if it does not run in this report."""
        if check_id not in self.scheduled:
            return None
        return await asyncio.shield(self.done[check_id])

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
        _checks.set(check_ids)  # this task's own context: gather wraps each probe in a task
        try:
            outcomes = await probe()
        except Skip as exc:
            shared = ("skipped", str(exc), None, [])
        except NotTestable as exc:
            shared = ("not testable", exc.detail, None, [])
            for check_id in check_ids:
                self.blocked[check_id] = exc.blocked
                if exc.by and exc.by != check_id:
                    self.blocked_by[check_id] = exc.by
        except Fail as exc:
            shared = ("failed", exc.detail, exc.offending, [])
        except OSError as exc:  # the agent could not even be started
            shared = ("not testable", f"cannot start the agent: {exc}", None, [])
        except Exception as exc:  # noqa: BLE001 - a bug here must not hang the checks waiting
            shared = ("not testable", f"the check stopped: {type(exc).__name__}: {exc}", None, [])
        if shared is not None:
            outcomes = (shared,) * len(check_ids)
        for check_id, outcome in zip(check_ids, outcomes, strict=True):
            outcome = await self.root_cause(check_id, outcome)
            self.finished[check_id] = time.monotonic()
            if not self.done[check_id].done():
                self.done[check_id].set_result(outcome)

    async def root_cause(self, check_id: str, outcome: Outcome) -> Outcome:
        """One fault, one failure: a failure that is its root check's own failure (the same
        fault, seen again by a check that needs a working turn) is blocked by that check."""
        root = ROOT_OF.get(check_id)
        if root is None or outcome[0] != "failed" or self.done[check_id].done():
            return outcome
        base = await self.outcome_of(root)
        if base is None or base[0] != "failed" or base[1] != outcome[1]:
            return outcome
        self.blocked[check_id] = f"blocked by {root}: {base[1]}"
        self.blocked_by[check_id] = root
        return ("not testable", f"blocked by {root} (the same fault: {base[1]})", None, [])

    # -- prompts -----------------------------------------------------------------------
    async def prompt(
        self,
        run: AgentRun,
        session_id: str,
        text: str,
        extra: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Reply:
        params: dict[str, Any] = {
            "sessionId": session_id,
            "prompt": [{"type": "text", "text": text}, *(extra or [])],
        }
        if meta is not None:
            params["_meta"] = meta
        reply = await self.call(run, "session/prompt", params)
        if reply.ok:
            self.turns += 1
        return reply

    def prompt_failed(self, run: AgentRun, reply: Reply, detail: str = "") -> None:
        """Stop the probe when a prompt did not end with a result: Fail for a broken answer,
        NotTestable (saying what blocks it) for a refusal or a timeout."""
        if reply.ok:
            return
        if reply.timed_out:
            raise NotTestable(
                detail or f"no answer to the prompt within {reply.timeout or 0:g} s of silence",
                "blocked: prompts get no answer in time (a slow model? raise --timeout)",
                "prompt-turn",
            )
        if reply.response is None:
            raise Fail(self.why(run, reply))
        if not well_formed_error(reply.error):
            raise Fail("the error response is not a JSON-RPC error", reply.response)
        if reply.error_code == AUTH_REQUIRED:
            raise NotTestable(
                detail or f"the prompt failed: {error_text(reply)}",
                "blocked by authentication: prompts are refused (-32000): pass `--auth-method ID` "
                "and the agent's env (--env KEY=VALUE)",
                "prompt-turn",
            )
        raise NotTestable(
            detail or f"the prompt failed: {error_text(reply)}",
            "blocked: prompts fail (no credentials or model? give the agent its env with "
            "--env KEY=VALUE, or --auth-method ID)",
            "prompt-turn",
        )
