"""The restart probe (info tier), when the agent advertises `loadSession`: after session-load's
new session and turn, that agent stopped (stdin closed, then terminated: a process ends), a
fresh one started, `session/load` of the same id, and the replay compared with what the turn
streamed live. An agent that refuses the load (it keeps sessions in memory) is `not exercised`;
a replay that differs is `failed` (info: never counted). session-setup.mdx says loading
"enables persistence across restarts"; it does not require it. (`conformance` is the public
façade.)"""

from __future__ import annotations

from typing import Any

from .conformance_checks import Outcome
from .conformance_harness import Fail, error_text, is_conversation, update_kind
from .conformance_messages import well_formed_error
from .conformance_probes import passed
from .conformance_probes_session import SessionProbes
from .runners import AgentRun, Line, Reply, as_list, as_object

_CHUNKS = ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk")


def fold(lines: list[Line]) -> tuple[list[tuple[str, str]], dict[str, Any], Any]:
    """What a client shows of conversation updates: each run of same-kind chunks (and the same
    `messageId`) as one message's text, each tool call with its fields merged, the last plan.
    Agents may coalesce chunks on replay, so chunk boundaries do not count."""
    messages: list[tuple[str, str]] = []
    last: tuple[str, Any] | None = None
    calls: dict[str, Any] = {}
    plan: Any = None
    for line in lines:
        update = as_object((as_object(line.get("params")) or {}).get("update")) or {}
        kind = update_kind(line)
        if kind in _CHUNKS:
            content = as_object(update.get("content")) or {}
            text = content.get("text") if content.get("type") == "text" else f"[{content}]"
            key = (str(kind), update.get("messageId"))
            if key == last:
                messages[-1] = (messages[-1][0], messages[-1][1] + str(text))
            else:
                messages.append((str(kind), str(text)))
            last = key
        elif kind in ("tool_call", "tool_call_update"):
            call = calls.setdefault(str(update.get("toolCallId")), {})
            call.update({k: v for k, v in update.items() if k not in ("sessionUpdate", "_meta")})
            last = None
        elif kind == "plan":
            plan = as_list(update.get("entries"))
            last = None
    return messages, calls, plan


class RestartProbes(SessionProbes):
    """The restart probe, after session-load's (it reuses that probe's turn: one agent more)."""

    async def session_load_restart(self) -> tuple[Outcome, Outcome]:
        """session-load, then info-load-after-restart on a fresh agent."""
        loaded: Outcome
        try:
            loaded = await self.session_load()
        except Fail as exc:  # the restart check is about another agent: it still runs
            loaded = ("failed", exc.detail, exc.offending, [])
        if self.live_turn is None:  # session-load stopped before its turn
            return loaded, ("not testable", "session-load made no turn", None, [])
        return loaded, await self.restart(*self.live_turn)

    async def restart(self, run: AgentRun, session_id: str, turn: Reply, end: int) -> Outcome:
        live = [
            line
            for line in run.client.received[:]
            if line.index < end and is_conversation(line, session_id)
        ]
        if not turn.ok:
            return ("not testable", f"the prompt failed ({error_text(turn)})", None, [])
        # that agent has ended (a process: stdin closed, then stopped); a fresh one must find it
        async with self.agent() as again:
            await self.setup(again, session=False)
            before = len(again.client.lines)
            reply = await self.call(again, "session/load", self.session_params(session_id))
            answer = reply.response
            bad = self.info_strict(reply)
            replayed = [
                line
                for line in again.client.received[:]
                if answer is not None
                and before <= line.index < answer.index
                and is_conversation(line, session_id)
            ]
        if answer is not None and not reply.ok and well_formed_error(reply.error):
            detail = (
                f"after a restart, session/load answered {error_text(reply)}: the agent keeps "
                "its sessions only while it runs (persistence across restarts is optional)"
            )
            return ("not exercised", detail, answer, [])
        if not reply.ok or answer is None:
            return ("failed", f"session/load after a restart: {self.why(again, reply)}", answer, [])
        if bad is not None:
            return ("failed", f"after a restart, {bad}", answer, [])
        return self._compare(live, replayed)

    def _compare(self, live: list[Line], replayed: list[Line]) -> Outcome:
        seen, calls, plan = fold(live)
        again, calls_again, plan_again = fold(replayed)
        users = [text for kind, text in again if kind == "user_message_chunk"]
        again = [entry for entry in again if entry[0] != "user_message_chunk"]
        seen = [entry for entry in seen if entry[0] != "user_message_chunk"]
        warnings: list[str] = []
        if self.options.prompt not in users:
            warnings.append("the replay has no user message with the prompt's text")
        if seen != again:
            detail = "the replay after a restart differs from the live turn: " + _first_difference(
                seen, again
            )
            return ("failed", detail, replayed[-1] if replayed else None, warnings)
        if calls != calls_again:
            detail = f"the replayed tool calls differ: live {calls!r}, replayed {calls_again!r}"
            return ("failed", detail[:500], None, warnings)
        if plan != plan_again:
            return ("failed", "the replayed plan differs from the live one", None, warnings)
        return passed(f"{len(replayed)} updates replayed by a restarted agent", warnings)


def _first_difference(live: list[tuple[str, str]], replayed: list[tuple[str, str]]) -> str:
    for number, (a, b) in enumerate(zip(live, replayed, strict=False), 1):
        if a != b:
            return f"message {number}: live {a!r:.120}, replayed {b!r:.120}"
    return f"the live turn has {len(live)} messages, the replay {len(replayed)}"
