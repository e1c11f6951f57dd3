# Ported from the official Python SDK's examples/agent.py (agent-client-protocol 0.12.1,
# Apache-2.0: see LICENSE and README.md here) to the generated agent package.
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "generated"))  # the golden package

from agent import PROTOCOL_VERSION, Agent, run_agent, types  # noqa: E402
from agent.helpers import text_block, update_agent_message  # noqa: E402


class ExampleAgent(Agent):
    def __init__(self) -> None:
        self._next_session_id = 0
        self._sessions: set[str] = set()

    async def _send_agent_message(self, session_id: str, content: types.ContentBlock) -> None:
        await self.peer.session_update(session_id=session_id, update=update_agent_message(content))

    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        logging.info("Received initialize request")
        return types.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=types.AgentCapabilities(),
            agent_info=types.Implementation(name="example-agent", title="Example Agent", version="0.1.0"),
        )

    async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
        logging.info("Received authenticate request %s", params.method_id)
        return types.AuthenticateResponse()

    async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
        logging.info("Received new session request")
        session_id = str(self._next_session_id)
        self._next_session_id += 1
        self._sessions.add(session_id)
        return types.NewSessionResponse(session_id=session_id)

    async def session_load(self, params: types.LoadSessionRequest) -> types.LoadSessionResponse:
        logging.info("Received load session request %s", params.session_id)
        self._sessions.add(params.session_id)
        return types.LoadSessionResponse()

    async def session_set_mode(self, params: types.SetSessionModeRequest) -> types.SetSessionModeResponse:
        logging.info("Received set session mode request %s -> %s", params.session_id, params.mode_id)
        return types.SetSessionModeResponse()

    async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
        logging.info("Received prompt request for session %s", params.session_id)
        self._sessions.add(params.session_id)

        await self._send_agent_message(params.session_id, text_block("Client sent:"))
        for block in params.prompt:
            await self._send_agent_message(params.session_id, block)
        return types.PromptResponse(stop_reason="end_turn")

    async def session_cancel(self, params: types.CancelNotification) -> None:
        logging.info("Received cancel notification for session %s", params.session_id)

    async def ext_method(self, method: str, params: Any) -> Any:
        logging.info("Received extension method call: %s", method)
        return {"example": "response"}

    async def ext_notification(self, method: str, params: Any) -> None:
        logging.info("Received extension notification: %s", method)


async def main() -> None:
    logging.basicConfig(level=logging.INFO)
    await run_agent(ExampleAgent())


if __name__ == "__main__":
    asyncio.run(main())
