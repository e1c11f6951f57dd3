"""The conformance probes: each drives a fresh agent with a `ScriptedClient` and settles the
checks it covers. (`conformance` is the public façade; `conformance_messages` holds the
message-level checks.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

from . import types
from .conformance_checks import CHECKS, UNSUPPORTED_VERSION, Options, script_of
from .conformance_messages import well_formed_error
from .conformance_report import Outcome
from .dispatch import INVALID_PARAMS, METHOD_NOT_FOUND
from .methods import PROTOCOL_VERSION
from .testing import AgentRun, Line, Opener, Reply, as_list, as_object

_AUTH_REQUIRED: Final = -32000


class _NotTestable(Exception):
    pass


class _Skip(Exception):
    pass


class _Fail(Exception):
    def __init__(self, detail: str, offending: Line | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.offending = offending


def _error_text(reply: Reply) -> str:
    error = as_object(reply.error)
    if error is not None:
        return f"error {error.get('code')} {error.get('message')!r}"
    return reply.describe()


class Runner:
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
        if not well_formed_error(reply.error):
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

    def exit_on_eof(self) -> Outcome:
        run = self.eof_run
        if run is None or run.exited_on_eof is None:
            return ("not testable", "no run", None, [])
        if run.exited_on_eof:
            return ("passed", "", None, [])
        wait = self.options.eof_timeout
        return ("failed", f"still running {wait:g} s after EOF (it was terminated)", None, [])
