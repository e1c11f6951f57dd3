"""The conformance probes of sessions, when the agent advertises them: load (after a turn, and
fresh), resume, list, close (idle and mid-turn), delete, additional directories, modes and
config options. Each drives a fresh agent with a session of its own. (`conformance` is the
public façade.)"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from .conformance_checks import Outcome
from .conformance_harness import Fail, NotTestable, Skip, error_text, is_conversation
from .conformance_messages import well_formed_error
from .conformance_probes import PASSED, passed
from .conformance_probes_turn import TurnProbes
from .runners import AgentRun, Line, Reply, as_list, as_object

NO_SUCH_SESSION = "acp-conformance-no-such-session"


def _advertised(init: dict[str, Any], path: str) -> bool:
    """Whether a capability (`loadSession`, `sessionCapabilities.list`) is advertised: true,
    or an object (`{}` is support; omitted and null are not)."""
    value: Any = as_object(init.get("agentCapabilities")) or {}
    for key in path.split("."):
        value = (as_object(value) or {}).get(key)
    return value is True or isinstance(value, dict)


class SessionProbes(TurnProbes):
    """The session probes; one method per probe."""

    live_turn: tuple[AgentRun, str, Reply, int] | None = None
    """session-load's agent, session, turn and where its load began: the restart check's."""

    async def advertises(self, path: str) -> None:
        """Skip unless the agent advertises `path`, as its first initialize answer says (the
        same for every agent: no agent is started for a feature it does not have)."""
        await asyncio.shield(self.started_up)
        if not self.gate_blocked and not _advertised(self.init_answer, path):
            raise Skip(f"{path} is not advertised")

    async def advertised(
        self, run: AgentRun, path: str, **extra: Any
    ) -> tuple[dict[str, Any], str]:
        """Set up (initialize, session/new) when the agent advertises `path`; Skip otherwise."""
        init, _ = await self.setup(run, session=False)
        if not _advertised(init, path):
            raise Skip(f"{path} is not advertised")
        session_id, _ = await self.open_session(run, init, **extra)
        return init, session_id

    def nothing_to_reopen(self, run: AgentRun, turn: Reply, reply: Reply, method: str) -> None:
        """NotTestable when `method` refused a session whose prompt had failed: with no turn,
        there may be nothing stored to load or resume (the check is about the replay)."""
        if not turn.ok and reply.response is not None and not reply.ok:
            detail = f"{method} answered {error_text(reply)}; the prompt before it failed"
            self.prompt_failed(run, turn, detail)

    def session_params(self, session_id: str) -> dict[str, Any]:
        return {"sessionId": session_id, "cwd": self.cwd, "mcpServers": []}

    async def session_load(self) -> Outcome:
        await self.advertises("loadSession")
        async with self.agent() as run:
            _, session_id = await self.advertised(run, "loadSession")
            turn = await self.prompt(run, session_id, self.options.prompt)
            if turn.response is not None:  # the turn's own late updates are prompt-turn's
                await self.late_conversation(run, turn.response, session_id)
            before = len(run.client.lines)
            self.live_turn = (run, session_id, turn, before)  # for the restart check
            reply = await self.call(run, "session/load", self.session_params(session_id))
            if not reply.ok or reply.response is None:
                self.nothing_to_reopen(run, turn, reply, "session/load")
                raise Fail(f"session/load failed: {self.why(run, reply)}", reply.response)
            answer = reply.response
            replayed = [
                line
                for line in run.client.received[:]
                if before <= line.index < answer.index and is_conversation(line, session_id)
            ]
            late = await self.late_replay(run, answer, session_id)
        if late is not None:
            raise Fail(
                "a conversation entry of the replay came after the session/load response", late
            )
        if not turn.ok:  # the case (replaying a conversation) never came up: no pass
            detail = f"the prompt before the load failed ({error_text(turn)}): nothing to replay"
            return ("not exercised", detail, None, [])
        if not replayed:
            raise Fail(
                "the session had a prompt turn, but session/load replayed nothing before its "
                "answer (the Agent MUST replay the entire conversation)",
                answer,
            )
        return passed(f"{len(replayed)} updates replayed")

    async def session_load_fresh(self) -> Outcome:
        await self.advertises("loadSession")
        async with self.agent() as run:
            _, session_id = await self.advertised(run, "loadSession")
            reply = await self.call(run, "session/load", self.session_params(session_id))
            if reply.response is not None and not reply.ok and well_formed_error(reply.error):
                # "Allow Clients to resume previous conversations": an agent may store a
                # session only once it has one; refusing an empty one breaks no rule.
                detail = (
                    f"session/load of a session with no turn answered {error_text(reply)}: "
                    "nothing stored to load (session-load loads one after a turn)"
                )
                return ("not exercised", detail, reply.response, [])
            if not reply.ok or reply.response is None:
                raise Fail(
                    f"session/load of a fresh session failed: {self.why(run, reply)}",
                    reply.response,
                )
            late = await self.late_replay(run, reply.response, session_id)
        if late is not None:
            raise Fail("a conversation entry came after the session/load response", late)
        if reply.result is None:
            return passed(
                "", ["the result is null, not {} (session-setup.mdx § Loading a Session)"]
            )
        return PASSED

    async def session_resume(self) -> Outcome:
        await self.advertises("sessionCapabilities.resume")
        async with self.agent() as run:
            _, session_id = await self.advertised(run, "sessionCapabilities.resume")
            turn = await self.prompt(run, session_id, self.options.prompt)
            if turn.response is not None:
                await self.late_conversation(run, turn.response, session_id)
            mark = len(run.client.lines)
            reply = await self.call(
                run, "session/resume", {"sessionId": session_id, "cwd": self.cwd}
            )
        if not reply.ok or reply.response is None:
            self.nothing_to_reopen(run, turn, reply, "session/resume")
            raise Fail(f"session/resume failed: {self.why(run, reply)}", reply.response)
        for line in run.client.received:
            if mark <= line.index < reply.response.index and is_conversation(line, session_id):
                raise Fail("session/resume replayed the conversation before its response", line)
        return passed("" if turn.ok else "resumed a session without a turn (its prompt failed)")

    async def session_list(self) -> tuple[Outcome, Outcome]:
        """session-list and session-list-cwd."""
        await self.advertises("sessionCapabilities.list")
        async with self.agent() as run:
            init, _ = await self.setup(run, session=False)
            if not _advertised(init, "sessionCapabilities.list"):
                raise Skip("sessionCapabilities.list is not advertised")
            try:  # a session to list, if the agent makes one (listing needs none)
                await self.open_session(run, init)
            except NotTestable:
                pass
            every = await self.call(run, "session/list", {})
            nowhere = os.path.join(self.files, "no-session-here")
            filtered = await self.call(run, "session/list", {"cwd": nowhere})
        return self._sessions(run, every, None), self._sessions(run, filtered, [])

    def _sessions(self, run: AgentRun, reply: Reply, expected: list[Any] | None) -> Outcome:
        if not reply.ok:
            return ("failed", f"session/list failed: {self.why(run, reply)}", reply.response, [])
        sessions = as_list(reply.get("sessions"))
        if sessions is None:
            return ("failed", "the result has no sessions array", reply.response, [])
        if expected is not None and sessions != expected:
            return (
                "failed",
                f"{len(sessions)} sessions listed for a cwd no session uses",
                reply.response,
                [],
            )
        return passed(f"{len(sessions)} sessions")

    async def session_close(self) -> Outcome:
        await self.advertises("sessionCapabilities.close")
        async with self.agent() as run:
            _, session_id = await self.advertised(run, "sessionCapabilities.close")
            reply = await self.call(run, "session/close", {"sessionId": session_id})
        if not reply.ok:
            raise Fail(f"session/close failed: {self.why(run, reply)}", reply.response)
        return PASSED

    async def session_close_prompt(self) -> Outcome:
        async def close(run: AgentRun, session_id: str) -> Line | None:
            params = {"sessionId": session_id}
            return (await run.client.call("session/close", params, self.options.timeout)).response

        await self.advertises("sessionCapabilities.close")
        await self.turns_run()
        async with self.agent() as run:
            init, first = await self.advertised(run, "sessionCapabilities.close")
            sessions = [first]

            async def fresh() -> str:  # a closed session cannot take another turn
                if not sessions:
                    sessions.append((await self.open_session(run, init))[0])
                return sessions.pop()

            return await self.interrupted_turn(run, fresh, close, "session/close")

    async def session_delete(self) -> tuple[Outcome, Outcome]:
        """session-delete and session-delete-unknown."""
        await self.advertises("sessionCapabilities.delete")
        async with self.agent() as run:
            init, _ = await self.setup(run, session=False)
            if not _advertised(init, "sessionCapabilities.delete"):
                raise Skip("sessionCapabilities.delete is not advertised")
            known: Reply | NotTestable
            try:  # deleting an unknown session needs no session of its own
                session_id, _ = await self.open_session(run, init)
                known = await self.call(run, "session/delete", {"sessionId": session_id})
            except NotTestable as exc:
                known = exc
                self.blocked["session-delete"] = exc.blocked
            unknown = await self.call(run, "session/delete", {"sessionId": NO_SUCH_SESSION})
        outcomes: list[Outcome] = []
        for reply, what in (
            (known, "a session it made"),
            (unknown, "a session that never existed"),
        ):
            if isinstance(reply, NotTestable):
                outcomes.append(("not testable", reply.detail, None, []))
            elif reply.ok:
                outcomes.append(PASSED)
            else:
                outcomes.append(
                    (
                        "failed",
                        f"session/delete of {what}: {self.why(run, reply)}",
                        reply.response,
                        [],
                    )
                )
        return outcomes[0], outcomes[1]

    async def additional_directories(self) -> Outcome:
        await self.advertises("sessionCapabilities.additionalDirectories")
        async with self.agent() as run:
            init, _ = await self.setup(run, session=False)
            if not _advertised(init, "sessionCapabilities.additionalDirectories"):
                raise Skip("sessionCapabilities.additionalDirectories is not advertised")
            extra = os.path.join(self.files, "extra-root")
            params = self.new_params(additionalDirectories=[extra])
            reply = await self.call(run, "session/new", params, self.options.startup_timeout)
        if not reply.ok or not isinstance(reply.get("sessionId"), str):
            raise Fail(
                f"session/new with additionalDirectories failed: {self.why(run, reply)}",
                reply.response,
            )
        return PASSED

    # -- modes and config options ------------------------------------------------------
    async def modes(self) -> tuple[Outcome, Outcome]:
        """session-modes and session-modes-unknown, from one run."""
        async with self.agent() as run:
            init, _ = await self.setup(run, session=False)
            session_id, new = await self.open_session(run, init)
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
            return main, (
                "failed",
                "switching to a mode that was not advertised succeeded",
                unknown.response,
                [],
            )
        if unknown.response is None:
            return main, ("failed", self.why(run, unknown), None, [])
        return main, passed(error_text(unknown))

    async def _check_modes(self, run: AgentRun, session_id: Any, modes: Any, new: Reply) -> Outcome:
        state = as_object(modes)
        available: Any = None if state is None else state.get("availableModes")
        if state is None or not isinstance(available, list):
            return ("failed", "modes has no availableModes list", new.response, [])
        ids: list[Any] = [
            mode.get("id") for mode in map(as_object, as_list(available) or []) if mode
        ]
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
        return passed(f"{len(ids)} modes, switched to {target!r}")

    async def config_options(self) -> tuple[Outcome, Outcome]:
        """config-options (each currentValue valid) and config-set (the complete list back)."""
        async with self.agent() as run:
            init, _ = await self.setup(run, session=False)
            session_id, new = await self.open_session(run, init)
            options = [o for o in map(as_object, as_list(new.get("configOptions")) or []) if o]
            if not options:
                raise Skip("the agent advertises no config options")
            valid = _valid_values(options, new)
            choice = next(
                ((o, v) for o in options for v in _values(o) if v != o.get("currentValue")), None
            )
            if choice is None:
                return valid, ("skipped", "no select option with a second value to set", None, [])
            option, value = choice
            params = {"sessionId": session_id, "configId": option.get("id"), "value": value}
            reply = await self.call(run, "session/set_config_option", params)
        if not reply.ok and reply.response is not None and well_formed_error(reply.error):
            detail = f"session/set_config_option refused the change: {error_text(reply)}"
            return valid, ("not testable", detail, None, [])
        if not reply.ok:
            return valid, (
                "failed",
                f"session/set_config_option failed: {self.why(run, reply)}",
                reply.response,
                [],
            )
        answered = {
            o.get("id"): o for o in map(as_object, as_list(reply.get("configOptions")) or []) if o
        }
        missing = [o.get("id") for o in options if o.get("id") not in answered]
        if missing:
            return valid, (
                "failed",
                f"the answer lacks the options {missing}: not the complete list",
                reply.response,
                [],
            )
        now = answered[option.get("id")].get("currentValue")
        if now != value:
            return valid, (
                "failed",
                f"set {option.get('id')!r} to {value!r}, the answer says {now!r}",
                reply.response,
                [],
            )
        return valid, passed(f"set {option.get('id')!r} to {value!r}")


def _values(option: dict[str, Any]) -> list[Any]:
    """The values a select option offers (flat or grouped); none for other types."""
    if option.get("type", "select") != "select":
        return []
    values: list[Any] = []
    for entry in map(as_object, as_list(option.get("options")) or []):
        if entry is None:
            continue
        if "group" in entry and "value" not in entry:
            values += [
                (as_object(o) or {}).get("value") for o in as_list(entry.get("options")) or []
            ]
        else:
            values.append(entry.get("value"))
    return values


def _valid_values(options: list[dict[str, Any]], new: Reply) -> Outcome:
    for option in options:
        current = option.get("currentValue")
        kind = option.get("type", "select")
        if kind == "boolean" and not isinstance(current, bool):
            return (
                "failed",
                f"boolean option {option.get('id')!r} has currentValue {current!r}",
                new.response,
                [],
            )
        if kind == "select" and current not in _values(option):
            return (
                "failed",
                f"option {option.get('id')!r}: currentValue {current!r} is not one of its values",
                new.response,
                [],
            )
    return passed(f"{len(options)} options")


__all__ = ["NotTestable", "SessionProbes"]
