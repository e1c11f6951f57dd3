"""The conformance harness: what every probe builds on. Fresh agents from the opener, bounded
calls, the initialize/session/new set-up, settling a check's outcome (others may wait on it),
and the exceptions a probe stops with. (`conformance` is the public façade.)"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

from ..methods import PROTOCOL_VERSION
from .conformance_checks import CHECKS, Options, Outcome, script_of
from .conformance_messages import well_formed_error
from .runners import AgentRun, Line, Opener, Reply, as_object

AUTH_REQUIRED: Final = -32000

# The checks the running probe settles (a probe's agents are attributed to them).
_checks: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "acp_conformance_checks", default=()
)


class NotTestable(Exception):
    """The check cannot be run (its set-up failed, or a check it builds on did not pass)."""


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


class Harness:
    """One conformance run: its agents (every line they sent stays in `runs`) and, per check,
    the future its outcome settles."""

    def __init__(self, opener: Opener, options: Options, cwd: str) -> None:
        self.opener = opener
        self.options = options
        self.cwd = cwd
        self.script = script_of(options)
        self.runs: list[AgentRun] = []
        self.eof_run: AgentRun | None = None  # the initialize check's run, which waits for EOF
        self.limit = asyncio.Semaphore(max(1, options.concurrency))
        self.done: dict[str, asyncio.Future[Outcome]] = {}
        self.check_runs: dict[str, list[AgentRun]] = {check.id: [] for check in CHECKS}
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        for check in CHECKS:
            self.done[check.id] = asyncio.get_running_loop().create_future()

    # -- plumbing --------------------------------------------------------------------
    @asynccontextmanager
    async def agent(self, eof_wait: float = 0.2) -> AsyncGenerator[AgentRun, None]:
        async with self.limit:
            for check_id in _checks.get():
                self.started.setdefault(check_id, time.monotonic())
            async with self.opener(eof_wait) as run:
                self.runs.append(run)
                for check_id in _checks.get():
                    self.check_runs[check_id].append(run)
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
        """initialize (and session/new) at the start of a run; NotTestable if they fail."""
        reply = await self.call(
            run,
            "initialize",
            self.initialize_params(PROTOCOL_VERSION),
            self.options.startup_timeout,
        )
        init = as_object(reply.result)
        if not reply.ok or init is None:
            raise NotTestable(f"initialize failed: {self.why(run, reply)}")
        if not session:
            return init, ""
        new = await self.call(run, "session/new", {"cwd": self.cwd, "mcpServers": []})
        session_id = new.get("sessionId")
        if not new.ok or not isinstance(session_id, str):
            if new.error_code == AUTH_REQUIRED:
                raise NotTestable(f"session/new needs authentication ({error_text(new)})")
            raise NotTestable(f"session/new failed: {self.why(run, new)}")
        return init, session_id

    def why(self, run: AgentRun, reply: Reply) -> str:
        if reply.timed_out:
            wait = (
                self.options.startup_timeout
                if reply.method == "initialize"
                else self.options.timeout
            )
            return f"no answer within {wait:g} s"
        if reply.closed:
            tail = " | ".join(run.stderr)
            return "the agent closed the connection" + (f" (stderr: {tail[-300:]})" if tail else "")
        return error_text(reply)

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
        _checks.set(check_ids)  # this task's own context: gather wraps each probe in a task
        try:
            outcomes = await probe()
        except Skip as exc:
            shared = ("skipped", str(exc), None, [])
        except NotTestable as exc:
            shared = ("not testable", str(exc), None, [])
        except Fail as exc:
            shared = ("failed", exc.detail, exc.offending, [])
        except OSError as exc:  # the agent could not even be started
            shared = ("failed", f"cannot start the agent: {exc}", None, [])
        except Exception as exc:  # noqa: BLE001 - a bug here must not hang the checks waiting
            shared = ("not testable", f"the check stopped: {type(exc).__name__}: {exc}", None, [])
        if shared is not None:
            outcomes = (shared,) * len(check_ids)
        for check_id, outcome in zip(check_ids, outcomes, strict=True):
            self.finished[check_id] = time.monotonic()
            self.done[check_id].set_result(outcome)

    async def needs(self, check_id: str) -> Outcome:
        """Wait for another check; NotTestable if it did not pass (what this one builds on)."""
        outcome = await self.done[check_id]
        if outcome[0] != "passed":
            raise NotTestable(f"{check_id} did not pass")
        return outcome

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
        if not well_formed_error(reply.error):
            return ("failed", "the error response is not a JSON-RPC error", reply.response, [])
        return ("not testable", f"the prompt failed: {error_text(reply)}", None, [])
