#!/usr/bin/env python3
"""A full-lifecycle ACP agent on the session layer: it streams a reply, runs a permission-gated
tool call, and serves load/list/resume/close/delete/set_mode/set_config_option, with sessions
kept in `--store URL` (memory, sqlite:PATH, postgresql://...). Run: lifecycle_agent.py --store sqlite:s.db"""

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated"))  # the checked-in package
from agent import run_agent, types  # noqa: E402
from agent.session_stores import open_store  # noqa: E402
from agent.sessions import Session, SessionAgent  # noqa: E402

ALLOW = types.PermissionOption(option_id="allow", name="Allow", kind="allow_once")
REJECT = types.PermissionOption(option_id="reject", name="Reject", kind="reject_once")


class LifecycleAgent(SessionAgent):
    agent_info = types.Implementation(name="lifecycle-agent", version="1.0")
    modes = [types.SessionMode(id="ask", name="Ask"), types.SessionMode(id="code", name="Code")]
    config_options = [
        types.SessionConfigOptionSelect(
            id="tone", name="Tone", current_value="plain",
            options=[types.SessionConfigSelectOption(value=v, name=v.title()) for v in ("plain", "loud")],
        )
    ]  # fmt: skip

    async def turn(self, session: Session, prompt: list[types.ContentBlock]) -> None:
        text = " ".join(b.text for b in prompt if isinstance(b, types.TextContent))
        if not session.title:
            await session.set_title(text[:40])
        if text.startswith("tool"):  # a tool call the user must allow first
            call = types.ToolCall(tool_call_id="count", title="Count the words", kind="other", status="pending")
            await session.send(call)
            answer = await self.peer.session_request_permission(
                session_id=session.id, tool_call=types.ToolCallUpdate(tool_call_id="count"), options=[ALLOW, REJECT]
            )
            outcome = answer.outcome
            allowed = isinstance(outcome, types.SelectedPermissionOutcome) and outcome.option_id == "allow"
            result = f"{len(text.split())} words" if allowed else "not allowed"
            status = "completed" if allowed else "failed"
            await session.send(
                types.SessionUpdateToolCallUpdate(tool_call_id="count", status=status, raw_output={"result": result})
            )
        reply = text.upper() if session.config.get("tone") == "loud" else text
        for word in reply.split():  # streamed, a chunk a word
            await session.say(word + " ")


async def main(store_url: str) -> None:
    store = await open_store(store_url)
    try:
        await run_agent(LifecycleAgent(store))
    finally:
        await store.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", default="memory", help="memory, sqlite:PATH or postgresql://...")
    asyncio.run(main(parser.parse_args().store))
