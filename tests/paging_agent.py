"""An agent that pages `session/list` (tests/test_session_pager.py): 23 sessions in two working
directories, `PAGE` per page, cursors opaque offsets; `--loop` gives the same cursor forever.
Run over stdio: `python tests/paging_agent.py [--loop]`."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated"))

from agent import Agent, run_agent, types  # noqa: E402

PAGE = 5
SESSIONS = [types.SessionInfo(session_id=f"s{i:02d}", cwd="/work/a" if i % 3 else "/work/b") for i in range(23)]


class PagingAgent(Agent):
    def __init__(self, loop: bool) -> None:
        self.loop = loop
        self.requests: list[types.ListSessionsRequest] = []

    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        listing = types.SessionCapabilities(list=types.SessionListCapabilities())
        caps = types.AgentCapabilities(session_capabilities=listing)
        return types.InitializeResponse(protocol_version=1, agent_capabilities=caps)

    async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
        return types.AuthenticateResponse()

    async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
        raise NotImplementedError

    async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
        raise NotImplementedError

    async def session_cancel(self, params: types.CancelNotification) -> None:
        pass

    async def session_list(self, params: types.ListSessionsRequest) -> types.ListSessionsResponse:
        if self.loop:
            return types.ListSessionsResponse(sessions=SESSIONS[:1], next_cursor="again")
        matching = [s for s in SESSIONS if isinstance(params.cwd, types.Unset) or s.cwd == params.cwd]
        start = 0 if isinstance(params.cursor, types.Unset) or params.cursor is None else int(params.cursor)
        end = start + PAGE
        more = end < len(matching)
        return types.ListSessionsResponse(
            sessions=matching[start:end], next_cursor=str(end) if more else types.UNSET
        )


if __name__ == "__main__":
    asyncio.run(run_agent(PagingAgent("--loop" in sys.argv)))
