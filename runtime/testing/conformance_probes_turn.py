"""The conformance probes of prompt turns: a text turn and its ordering, cancellation, each
content type the agent advertises, `_meta` on a prompt, a turn with the client capabilities
off (what the agent then calls is the message-level checks' business), and a live session
for the exit-on-EOF check. (`conformance` is the public façade.)"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any, Final

from .. import types
from ..methods import METHODS
from .conformance_checks import Outcome
from .conformance_harness import Fail, Harness, NotTestable, Skip, error_text, is_conversation
from .conformance_probes import passed
from .runners import AgentRun, Line, Reply, as_object

NOTES: Final = "acp-conformance-notes.txt"
_PNG: Final = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E"
    "rkJggg=="
)
_WAV: Final = "UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YRAAAACAgICAgICAgICAgICAgICA"
TRACEPARENT: Final = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
Interrupt = Callable[[AgentRun, str], Awaitable["Line | None"]]
"""Interrupts a session's turn; the line showing the agent has read the interruption (the
answer to a request sent with or behind it), if one came."""
PING: Final = "_acp_conformance/ping"


def _prompt_capability(init: dict[str, Any], name: str) -> bool:
    capabilities = as_object(init.get("agentCapabilities")) or {}
    return (as_object(capabilities.get("promptCapabilities")) or {}).get(name) is True


class TurnProbes(Harness):
    """The prompt-turn probes; one method per probe."""

    def notes_uri(self) -> str:
        return "file://" + os.path.join(self.files, NOTES)

    def content(
        self, check_id: str
    ) -> tuple[str | None, list[dict[str, Any]], dict[str, Any] | None]:
        """The capability, the blocks beside the text, and the `_meta` of a content probe."""
        uri = self.notes_uri()
        table: dict[str, tuple[str | None, list[dict[str, Any]], dict[str, Any] | None]] = {
            "prompt-image": (
                "image",
                [{"type": "image", "mimeType": "image/png", "data": _PNG}],
                None,
            ),
            "prompt-audio": (
                "audio",
                [{"type": "audio", "mimeType": "audio/wav", "data": _WAV}],
                None,
            ),
            "prompt-resource": (
                "embeddedContext",
                [
                    {
                        "type": "resource",
                        "resource": {"uri": uri, "mimeType": "text/plain", "text": "notes\n"},
                    }
                ],
                None,
            ),
            "prompt-resource-link": (
                None,
                [{"type": "resource_link", "uri": uri, "name": NOTES}],
                None,
            ),
            "prompt-meta": (None, [], {"traceparent": TRACEPARENT}),
        }
        return table[check_id]

    def stop_reason(self, reply: Reply) -> str:
        """The StopReason of a prompt's result; Fail unless it decodes strictly."""
        spec = METHODS.get("session/prompt")
        if spec is None or spec.decode_result is None:
            raise NotTestable("the schema defines no session/prompt request")
        try:
            decoded: Any = spec.decode_result(reply.result, types.DecodeContext(strict=True))
        except types.DecodeError as exc:
            raise Fail(
                f"the session/prompt result is not a PromptResponse: {exc}", reply.response
            ) from None
        return str(decoded.stop_reason)

    async def prompt_turn(self) -> Outcome:
        async with self.agent() as run:
            _, session_id = await self.setup(run)
            mark = len(run.client.lines)
            reply = await self.prompt(run, session_id, self.options.prompt)
            self.prompts_refused = reply.response is not None and not reply.ok
            self.prompt_failed(run, reply)
            assert reply.response is not None
            late = await self.late_conversation(run, reply.response, session_id)
            await self.capability_turn(run, session_id)
        stop = self.plain_stop = self.stop_reason(reply)
        for line in run.client.received:
            if mark < line.index < reply.response.index and line.method == "session/update":
                if line.session_id() != session_id:
                    raise Fail(
                        f"a session/update of the turn is for session {line.session_id()!r}", line
                    )
        if late is not None:
            raise Fail(
                "a conversation update of the turn came after the session/prompt response", late
            )
        return passed(f"stopReason {stop}")

    async def prompt_content(self, check_id: str) -> Outcome:
        capability, blocks, meta = self.content(check_id)
        if capability is not None:  # as the first initialize answer says: no agent otherwise
            await asyncio.shield(self.started_up)
            if not self.gate_blocked and not _prompt_capability(self.init_answer, capability):
                raise Skip(f"promptCapabilities.{capability} is not advertised")
        async with self.agent() as run:
            init, _ = await self.setup(run, session=False)
            if capability is not None and not _prompt_capability(init, capability):
                raise Skip(f"promptCapabilities.{capability} is not advertised")
            session_id, _ = await self.open_session(run, init)
            reply = await self.prompt(run, session_id, self.options.prompt, blocks, meta)
            if not reply.ok:
                baseline = await self.outcome_of("prompt-turn")
                if reply.response is not None and baseline is not None and baseline[0] == "passed":
                    raise Fail(
                        f"a text prompt works, this one fails: {error_text(reply)}", reply.response
                    )
                self.prompt_failed(run, reply)
            assert reply.response is not None
            late = await self.late_conversation(run, reply.response, session_id)
        stop = self.stop_reason(reply)
        if late is not None:
            raise Fail(
                "a conversation update of the turn came after the session/prompt response", late
            )
        return passed(f"stopReason {stop}")

    # -- cancelling a turn -------------------------------------------------------------
    async def cancel(self) -> Outcome:
        async def cancel(run: AgentRun, session_id: str) -> Line | None:
            await run.client.notify("session/cancel", {"sessionId": session_id})
            # A request behind the cancel: once it is answered, the agent has read the cancel.
            ping = await run.client.call(PING, {}, min(self.options.timeout, 2.0))
            return ping.response

        await self.turns_run()
        async with self.agent() as run:
            _, session_id = await self.setup(run)

            async def same() -> str:
                return session_id

            return await self.interrupted_turn(run, same, cancel, "session/cancel")

    async def turns_run(self) -> None:
        """NotTestable when prompt-turn's prompt was refused (no credentials, say): no turn
        runs to interrupt, and whether an early interruption wins the race with the refusal
        is chance, not a verdict. (Awaited before an agent is started: it holds no slot.)"""
        baseline = await self.outcome_of("prompt-turn")
        if baseline is not None and baseline[0] == "not testable" and self.prompts_refused:
            raise NotTestable(
                f"a plain prompt is refused, so no turn runs to interrupt ({baseline[1]})",
                self.blocked.get("prompt-turn", ""),
                "prompt-turn",
            )

    async def interrupted_turn(
        self, run: AgentRun, session: Callable[[], Awaitable[str]], interrupt: Interrupt, what: str
    ) -> Outcome:
        """Start a turn in `session()`, interrupt it once it shows signs of life: it must end
        with stopReason cancelled, and no conversation update after its answer. A turn that
        ended before the interruption was sent is `not exercised` (no pass); with a
        --cancel-prompt it is tried again, up to three times (a loaded machine may wake us
        late)."""
        outcome: Outcome = ("not exercised", "", None, [])
        for _ in range(3 if self.options.cancel_prompt else 1):
            outcome = await self._interrupt_once(run, await session(), interrupt, what)
            if outcome[0] != "not exercised":
                break
        return outcome

    async def _interrupt_once(
        self, run: AgentRun, session_id: str, interrupt: Interrupt, what: str
    ) -> Outcome:
        long = self.options.cancel_prompt
        mark = len(run.client.lines)
        pending = asyncio.ensure_future(self.prompt(run, session_id, long or self.options.prompt))
        # Signs of life: an update or a request of the turn, or its answer. A long turn may
        # take a while to start (a model's first token); a short one is cut after 0.2 s.
        wait = self.options.timeout / 2 if long else 0.2
        await run.client.wait_for(lambda line: line.index > mark and line.method is not None, wait)
        await asyncio.sleep(0)
        ended_before = pending.done()
        sent_at = len(run.client.lines)
        read = None if ended_before else await interrupt(run, session_id)
        reply = await pending
        if ended_before or (reply.response is not None and reply.response.index < sent_at):
            self.prompt_failed(run, reply)
            hint = "pass --cancel-prompt with a prompt whose turn keeps running"
            stop = self.stop_reason(reply)  # a malformed answer is a fault, not a race lost
            return (
                "not exercised",
                f"the turn ended ({stop}) before {what} was sent: {hint}",
                None,
                [],
            )
        if reply.timed_out:
            silence = reply.timeout or 0
            raise Fail(f"no answer to the prompt within {silence:g} s of silence after {what}")
        if reply.response is None:
            raise Fail(self.why(run, reply))
        if not reply.ok:
            detail = (
                f"the interrupted prompt answered {error_text(reply)}, not stopReason cancelled"
            )
            raise Fail(detail, reply.response)
        answer = reply.response
        late = await self.late_conversation(run, answer, session_id)
        stop = self.stop_reason(reply)
        if late is not None:
            raise Fail("a conversation update came after the interrupted turn's response", late)
        if stop == "cancelled" and self.plain_stop == "cancelled":
            # gptme-acp without a model ends every turn so: the answer proves no cancellation.
            detail = f"the turn ended cancelled, but so does a plain prompt, without {what}"
            return ("not exercised", detail, None, [])
        if stop == "cancelled":
            return passed("stopReason cancelled")
        # Ignored: the turn went on (a conversation update) after the agent had read the
        # interruption, as the answer to a request sent behind it shows. Updates in flight
        # when it was sent prove nothing: the turn may have ended before the agent read it.
        went_on = read is not None and any(
            read.index < line.index < answer.index and is_conversation(line, session_id)
            for line in run.client.received
        )
        if went_on:
            raise Fail(
                f"the turn went on after {what} and ended with {stop!r}, not cancelled", answer
            )
        detail = (
            f"the turn ended with {stop!r} right after {what}: it may have ended before the "
            "agent read it (pass --cancel-prompt with a prompt whose turn keeps running)"
        )
        return ("not exercised", detail, None, [])

    async def capability_turn(self, run: AgentRun, session_id: str) -> None:
        """A second turn, asking to read a file, with the client's fs and terminal capabilities
        off: what the agent calls then is checked with every line it sent (message level)."""
        reply = await self.prompt(run, session_id, f"read {os.path.join(self.files, NOTES)}")
        if reply.response is not None:
            await self.late_conversation(run, reply.response, session_id)
