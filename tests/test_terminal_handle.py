"""The agent proxy's `create_terminal` and its `TerminalHandle`, against a scripted client.

The agent side is the golden agent package served in this event loop over memory streams;
the client is `testing.ScriptedClient`, answering the terminal methods from a script that
records what it was asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from agent import Agent, ClientProxy, RequestError, TerminalHandle, run_agent, types
from agent.testing import ScriptedClient, memory_streams


class _Idle(Agent):
    """An agent whose peer the test uses; it answers nothing itself."""

    def __init__(self) -> None:
        self.connected = asyncio.Event()

    def on_connect(self, peer: ClientProxy) -> None:
        super().on_connect(peer)
        self.connected.set()

    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        raise NotImplementedError

    async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
        raise NotImplementedError

    async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
        raise NotImplementedError

    async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
        raise NotImplementedError

    async def session_cancel(self, params: types.CancelNotification) -> None:
        raise NotImplementedError


def _script(calls: list[tuple[str, Any]], release_error: bool = False) -> dict[str, Any]:
    def answer(method: str, result: Any) -> Callable[[Any], Any]:
        def reply(params: Any) -> Any:
            calls.append((method, params.to_dict()))
            if method == "terminal/release" and release_error:
                return RequestError.internal_error()
            return result

        return reply

    return {
        "terminal/create": answer("terminal/create", {"terminalId": "term-1"}),
        "terminal/output": answer(
            "terminal/output", {"output": "hi\n", "truncated": False, "exitStatus": {"exitCode": 0}}
        ),
        "terminal/wait_for_exit": answer("terminal/wait_for_exit", {"exitCode": 0}),
        "terminal/kill": answer("terminal/kill", {}),
        "terminal/release": answer("terminal/release", {}),
    }


async def _with_peer(script: dict[str, Any], body: Callable[[ClientProxy], Any]) -> None:
    (agent_reader, agent_writer), (client_reader, client_writer) = memory_streams()
    agent = _Idle()
    server = asyncio.ensure_future(run_agent(agent, agent_reader, agent_writer))
    try:
        async with ScriptedClient(client_reader, client_writer, script):
            await asyncio.wait_for(agent.connected.wait(), 5)
            await body(agent.peer)
    finally:
        await asyncio.wait_for(server, 5)


def test_handle_calls_each_method_once_and_releases_on_exit() -> None:
    calls: list[tuple[str, Any]] = []

    async def body(peer: ClientProxy) -> None:
        async with await peer.create_terminal(session_id="s1", command="echo", args=["hi"]) as terminal:
            assert isinstance(terminal, TerminalHandle)
            assert (terminal.session_id, terminal.terminal_id) == ("s1", "term-1")
            out = await terminal.output()
            assert (out.output, out.truncated) == ("hi\n", False)
            exited = await terminal.wait_for_exit(timeout=5)
            assert exited.exit_code == 0
            await terminal.kill()
        assert terminal.released
        await terminal.release()  # a second release sends nothing

    asyncio.run(_with_peer(_script(calls), body))
    ids = {"sessionId": "s1", "terminalId": "term-1"}
    assert calls == [
        ("terminal/create", {"sessionId": "s1", "command": "echo", "args": ["hi"]}),
        ("terminal/output", ids),
        ("terminal/wait_for_exit", ids),
        ("terminal/kill", ids),
        ("terminal/release", ids),
    ]


def test_handle_releases_when_the_body_raises() -> None:
    calls: list[tuple[str, Any]] = []

    async def body(peer: ClientProxy) -> None:
        params = types.CreateTerminalRequest(session_id="s1", command="make")
        with pytest.raises(ZeroDivisionError):
            async with await peer.create_terminal(params):
                _ = 1 / 0

    asyncio.run(_with_peer(_script(calls), body))
    assert [m for m, _ in calls] == ["terminal/create", "terminal/release"]


def test_a_failed_release_chains_onto_the_body_error() -> None:
    calls: list[tuple[str, Any]] = []

    async def body(peer: ClientProxy) -> None:
        with pytest.raises(RequestError) as raised:
            async with await peer.create_terminal(session_id="s1", command="make"):
                raise KeyError("body")
        assert isinstance(raised.value.__context__, KeyError)

    asyncio.run(_with_peer(_script(calls, release_error=True), body))
    assert [m for m, _ in calls] == ["terminal/create", "terminal/release"]


def test_the_raw_create_stays_and_mixing_forms_is_refused() -> None:
    calls: list[tuple[str, Any]] = []

    async def body(peer: ClientProxy) -> None:
        raw = await peer.terminal_create(session_id="s1", command="ls")
        assert raw.terminal_id == "term-1"
        with pytest.raises(TypeError):
            await peer.create_terminal(types.CreateTerminalRequest(session_id="s1", command="ls"), command="x")  # type: ignore[call-overload]

    asyncio.run(_with_peer(_script(calls), body))
    assert [m for m, _ in calls] == ["terminal/create"]
