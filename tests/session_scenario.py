"""The session layer of any generated agent package, run in this process over memory streams:
`session/new`, a prompt turn, `session/load` and its replay, `session/list`, an unknown
session, as much of it as the package's schema serves (`sessions.FEATURES.served`).

tests/test_releases.py runs it on the package of every bundled schema release that has a
`sessions.py`, with that package's own kit (`testing.ScriptedClient`, `memory_streams`), so a
layer that only imports, or sends an update its schema lacks, fails there.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

CWD = "/tmp/acp-release-sessions"


def check_session_layer(name: str) -> None:
    """Run the scenario on the importable agent package `name`; AssertionError on a fault."""
    asyncio.run(asyncio.wait_for(_scenario(name), 30))


async def _scenario(name: str) -> None:
    pkg = importlib.import_module(name)
    sessions = importlib.import_module(f"{name}.sessions")
    testing = importlib.import_module(f"{name}.testing")
    served: frozenset[str] = sessions.FEATURES.served
    say = hasattr(sessions.Session, "say")

    serves_initialize = bool(sessions.FEATURES.initialize_fields)
    initialize_result = getattr(pkg.types, pkg.METHODS["initialize"].result_type)

    class Echo(sessions.SessionAgent):  # type: ignore[misc,name-defined]
        batch_delay = 0.001
        if hasattr(sessions.SessionAgent, "agent_info"):  # required in v2's initialize answer
            agent_info = pkg.types.Implementation(name="echo", version="0")

        if not serves_initialize:  # its result is not one the layer knows: the author's

            async def initialize(self, params: Any) -> Any:
                info = {"name": "echo", "version": "0"}
                return initialize_result.from_dict({"protocolVersion": pkg.PROTOCOL_VERSION, "info": info})

        async def turn(self, session: Any, prompt: list[Any]) -> str | None:
            if say:
                for word in ("one", "two", "three"):
                    await session.say(word)
            return None

    update_type = getattr(pkg.types, pkg.METHODS["session/update"].params_type)
    (agent_reader, agent_writer), (client_reader, client_writer) = testing.memory_streams()
    server = asyncio.ensure_future(pkg.run_agent(Echo(), agent_reader, agent_writer))
    try:
        async with testing.ScriptedClient(client_reader, client_writer) as client:

            async def call(method: str, **params: Any) -> Any:
                reply = await client.call(method, params, timeout=10)
                return reply

            def updates(since: int) -> list[dict[str, Any]]:
                found = []
                for line in client.received[since:]:
                    if line.method == "session/update":
                        update_type.from_dict(line.object["params"])  # the schema's own type
                        found.append(line.object["params"]["update"])
                return found

            # v1's and v2's spellings of the client's part (each schema keeps the other's as unknown fields)
            info = {"name": "release-check", "version": "0"}
            hello = await call(
                "initialize", protocolVersion=pkg.PROTOCOL_VERSION, clientCapabilities={}, capabilities={}, info=info
            )
            assert hello.ok, hello.describe()
            if serves_initialize:  # exactly what the layer serves, in this schema's spelling (v2: `capabilities`)
                caps = hello.get("agentCapabilities" if "agentCapabilities" in hello.result else "capabilities")
                assert isinstance(caps, dict), hello.describe()
                assert ("session/load" in served) == (caps.get("loadSession") is True), caps
                field = sessions.FEATURES.session_capabilities_field
                for key in sessions.FEATURES.session_capabilities:
                    assert (caps.get(field, {}).get(key) == {}) == (f"session/{key}" in served), (key, caps)
            new = await call("session/new", cwd=CWD, mcpServers=[])
            assert new.ok, new.describe()
            sid = new.get("sessionId")
            mark = len(client.received)
            turn = await call("session/prompt", sessionId=sid, prompt=[{"type": "text", "text": "hi"}])
            assert turn.ok and turn.get("stopReason") == "end_turn", turn.describe()
            live = [u for u in updates(mark) if u["sessionUpdate"] != "session_info_update"]
            assert len(live) == (3 if say else 0), live
            if "session/load" in served:
                mark = len(client.received)
                load = await call("session/load", sessionId=sid, cwd=CWD, mcpServers=[])
                assert load.ok, load.describe()
                user = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}
                assert updates(mark) == [user, *live]  # the conversation, recorded as it went
            if "session/list" in served:
                listed = await call("session/list", cwd=CWD)
                assert listed.ok, listed.describe()
                assert [s["sessionId"] for s in listed.get("sessions")] == [sid]
            unknown = await call("session/prompt", sessionId="sess_unknown", prompt=[])
            assert unknown.error_code == -32002, unknown.describe()
    finally:
        await asyncio.wait_for(server, 5)
