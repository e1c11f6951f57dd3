"""The conformance probes: each drives a fresh agent with a `ScriptedClient` and settles the
checks it covers. (`conformance` is the public façade; `conformance_harness` holds what every
probe builds on, `conformance_messages` the message-level checks.)"""

from __future__ import annotations

import asyncio
from typing import Any

from .. import types
from ..dispatch import INVALID_PARAMS, METHOD_NOT_FOUND
from ..methods import METHODS, PROTOCOL_VERSION
from .conformance_checks import UNSUPPORTED_VERSION, Outcome
from .conformance_harness import AUTH_REQUIRED, Fail, Harness, NotTestable, Skip, error_text
from .runners import AgentRun, Reply, as_list, as_object


class Runner(Harness):
    """The probes, one method per check (one for the two mode checks)."""

    async def initialize(self) -> Outcome:
        async with self.agent(self.options.eof_timeout) as run:
            self.eof_run = run
            reply = await self.call(
                run,
                "initialize",
                self.initialize_params(PROTOCOL_VERSION),
                self.options.startup_timeout,
            )
        if not reply.ok:
            raise Fail(f"initialize failed: {self.why(run, reply)}", reply.response)
        result = reply.result
        # Through METHODS, not types.InitializeResponse: the package stays type-correct for a
        # schema without `initialize` (the check is then not testable).
        spec = METHODS.get("initialize")
        if spec is None or spec.decode_result is None:
            raise NotTestable("the schema defines no initialize request")
        try:
            decoded: Any = spec.decode_result(result, None)
        except types.DecodeError as exc:
            detail = f"the response does not fit InitializeResponse: {exc}"
            raise Fail(detail, reply.response) from None
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
            reply = await self.call(
                run,
                "initialize",
                self.initialize_params(UNSUPPORTED_VERSION),
                self.options.startup_timeout,
            )
        if not reply.ok:
            raise Fail(f"initialize failed: {self.why(run, reply)}", reply.response)
        answered = reply.get("protocolVersion")
        if not isinstance(answered, int) or isinstance(answered, bool):
            raise Fail("protocolVersion is not an integer", reply.response)
        if answered == UNSUPPORTED_VERSION:
            raise Fail(
                f"answered version {answered}, which does not exist: an agent that does not "
                "support the requested version must answer the latest one it supports",
                reply.response,
            )
        if answered < accepted:
            raise Fail(
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
                if reply.error_code == AUTH_REQUIRED:
                    raise NotTestable(f"session/new needs authentication ({error_text(reply)})")
                raise Fail(f"session/new failed: {self.why(run, reply)}", reply.response)
            session_id = reply.get("sessionId")
            if not isinstance(session_id, str) or not session_id:
                raise Fail("no sessionId in the response", reply.response)
            ids.append(session_id)
        if ids[0] == ids[1]:
            raise Fail(f"two session/new calls answered the same id {ids[0]!r}", second.response)
        return ("passed", "", None, [])

    async def modes(self) -> tuple[Outcome, Outcome]:
        """session-modes and session-modes-unknown, from one run."""
        await self.needs("session-new")
        async with self.agent() as run:
            await self.setup(run, session=False)
            new = await self.call(run, "session/new", {"cwd": self.cwd, "mcpServers": []})
            if not new.ok:
                raise NotTestable(f"session/new failed: {self.why(run, new)}")
            session_id = new.get("sessionId")
            modes = new.get("modes")
            if not modes:
                raise Skip("the agent advertises no modes")
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
        return main, ("passed", error_text(unknown), None, [])

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
                raise Fail("the response has no stopReason", reply.response)
            late = await self.settle(run, reply.response, session_id)
        if late is not None:
            raise Fail("a session/update of the turn came after the session/prompt response", late)
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
                        f"the cancelled prompt answered {error_text(reply)}, "
                        "not stopReason cancelled",
                        reply.response,
                        [],
                    )
                return failed
            assert reply.response is not None
            stop = reply.get("stopReason")
            late = await self.settle(run, reply.response, session_id)
        if late is not None:
            raise Fail("a session/update came after the cancelled turn's response", late)
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
                raise Fail(f"session/load failed: {self.why(run, reply)}", reply.response)
            replayed = [
                line
                for line in run.client.received[:]
                if before <= line.index < reply.response.index
                and line.method == "session/update"
                and line.session_id() == session_id
            ]
            late = await self.settle(run, reply.response, session_id)
        if late is not None:
            raise Fail("a session/update of the replay came after the session/load response", late)
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
            raise Fail(f"{method} was answered with a result", reply.response)
        if reply.response is None:
            raise Fail(self.why(run, reply))
        code = reply.error_code
        if code != METHOD_NOT_FOUND:
            raise Fail(f"{method} got error {code}, not {METHOD_NOT_FOUND}", reply.response)
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
                    raise Fail(f"{method} with invalid params succeeded", reply.response)
                if reply.response is None:
                    raise Fail(f"{method} with invalid params: {self.why(run, reply)}")
                code = reply.error_code
                if code != INVALID_PARAMS:
                    warnings.append(f"{method} with invalid params got {code}, not -32602")
            after = await self.call(run, "session/new", {"cwd": self.cwd, "mcpServers": []})
        if after.response is None:
            raise Fail(f"the agent stopped serving after invalid params: {self.why(run, after)}")
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
            raise Fail(f"the agent stopped serving: {self.why(run, after)}")
        for line in run.client.received:
            if (
                line.index > mark
                and line.is_response
                and run.client.sent_method(line.get("id")) is None
            ):
                raise Fail("a notification was answered", line)
        return ("passed", "", None, [])

    def exit_on_eof(self) -> Outcome:
        run = self.eof_run
        if run is None or run.exited_on_eof is None:
            return ("not testable", "no run", None, [])
        if run.exited_on_eof:
            return ("passed", "", None, [])
        wait = self.options.eof_timeout
        return ("failed", f"still running {wait:g} s after EOF (it was terminated)", None, [])
