# Ported from the official Python SDK's examples/echo_agent.py (agent-client-protocol 0.12.1,
# Apache-2.0: see LICENSE and README.md here) to the generated agent package.
import asyncio
import sys
from pathlib import Path
from uuid import uuid4

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "generated"))  # the golden package

from agent import Agent, RequestError, run_agent, types  # noqa: E402
from agent.helpers import text_block, update_agent_message  # noqa: E402


class EchoAgent(Agent):
    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        return types.InitializeResponse(protocol_version=params.protocol_version)

    async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
        raise RequestError.method_not_found("authenticate")  # required here; the SDK example has none

    async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
        return types.NewSessionResponse(session_id=uuid4().hex)

    async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
        for block in params.prompt:
            text = block.text if isinstance(block, types.TextContent) else ""
            chunk = update_agent_message(text_block(text, meta={"echo": True}), meta={"echo": True})
            await self.peer.session_update(session_id=params.session_id, update=chunk, meta={"source": "echo_agent"})
        return types.PromptResponse(stop_reason="end_turn")

    async def session_cancel(self, params: types.CancelNotification) -> None:
        pass


async def main() -> None:
    await run_agent(EchoAgent())


if __name__ == "__main__":
    asyncio.run(main())
