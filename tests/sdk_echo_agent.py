"""The echo contract's agent written with the official ACP Python SDK (`acp`, 0.12.1).

The interop tests run `examples/echo_client.py` (generated client) against it:
    python tests/sdk_echo_agent.py
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

import acp
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
    TextContentBlock,
    ToolCallUpdate,
    UserMessageChunk,
)

MODES = [
    SessionMode(id="ask", name="Ask", description="Request permission before making any changes"),
    SessionMode(
        id="architect", name="Architect", description="Design and plan software systems without implementation"
    ),
    SessionMode(id="code", name="Code", description="Write and modify code with full tool access"),
]


@dataclass
class Session:
    id: str
    cwd: str
    mode: str = "ask"
    history: list[Any] = field(default_factory=list)
    cancelled: asyncio.Event | None = None


class SdkEchoAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions: dict[str, Session] = {}
        self.client_capabilities = ClientCapabilities()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: ClientCapabilities | None = None, **kwargs: Any
    ) -> InitializeResponse:
        self.client_capabilities = client_capabilities or ClientCapabilities()
        return InitializeResponse(
            protocol_version=1,
            agent_capabilities=AgentCapabilities(
                load_session=True, prompt_capabilities=PromptCapabilities(embedded_context=True)
            ),
            auth_methods=[],
            agent_info=Implementation(name="sdk-echo-agent", version=acp.__dict__.get("__version__", "0.12.1")),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        raise acp.RequestError.invalid_params({"methodId": method_id})

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        if not os.path.isabs(cwd):
            raise acp.RequestError.invalid_params({"cwd": "must be absolute"})
        session = Session(id=f"sess_{uuid.uuid4().hex}", cwd=cwd)
        self.sessions[session.id] = session
        return NewSessionResponse(session_id=session.id, modes=self._modes(session))

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        if not os.path.isabs(cwd):
            raise acp.RequestError.invalid_params({"cwd": "must be absolute"})
        session = self._session(session_id)
        for update in list(session.history):
            await self.conn.session_update(session_id=session.id, update=update)
        return LoadSessionResponse(modes=self._modes(session))

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        session = self._session(session_id)
        if mode_id not in {mode.id for mode in MODES}:
            raise acp.RequestError.invalid_params({"modeId": mode_id})
        session.mode = mode_id
        return SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None and session.cancelled is not None:
            session.cancelled.set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        cancelled = session.cancelled = asyncio.Event()
        try:
            for block in prompt:
                session.history.append(UserMessageChunk(session_update="user_message_chunk", content=block))
            text = next((b.text for b in prompt if isinstance(b, TextContentBlock)), "").strip()
            words = text.split(None, 1)
            if text == "slow":
                for i in range(1, 21):
                    if cancelled.is_set():
                        break
                    await self._say(session, cancelled, f"slow {i}/20\n")
                    if i < 20:
                        try:
                            await asyncio.wait_for(cancelled.wait(), 0.05)
                        except asyncio.TimeoutError:
                            pass
            elif len(words) == 2 and words[0] == "read":
                fs = self.client_capabilities.fs
                if not (fs and fs.read_text_file):
                    await self._say(session, cancelled, "read: client does not support fs/read_text_file")
                else:
                    try:
                        result = await self.conn.read_text_file(session_id=session.id, path=words[1].strip())
                        await self._say(session, cancelled, result.content)
                    except acp.RequestError as exc:
                        await self._say(session, cancelled, f"read failed: {exc.code} {exc}")
            elif text == "permission":
                response = await self.conn.request_permission(
                    session_id=session.id,
                    tool_call=ToolCallUpdate(
                        tool_call_id="call_permission_1", title="Echo permission check", kind="other", status="pending"
                    ),
                    options=[
                        PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
                        PermissionOption(option_id="reject-once", name="Reject once", kind="reject_once"),
                    ],
                )
                outcome = response.outcome
                if isinstance(outcome, AllowedOutcome):
                    await self._say(session, cancelled, f"permission: selected {outcome.option_id}")
                else:
                    await self._say(session, cancelled, "permission: cancelled")
            else:
                for block in prompt:
                    await self._send(
                        session, cancelled, AgentMessageChunk(session_update="agent_message_chunk", content=block)
                    )
            return PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")
        finally:
            session.cancelled = None

    async def _say(self, session: Session, cancelled: asyncio.Event, text: str) -> None:
        chunk = AgentMessageChunk(
            session_update="agent_message_chunk", content=TextContentBlock(type="text", text=text)
        )
        await self._send(session, cancelled, chunk)

    async def _send(self, session: Session, cancelled: asyncio.Event, update: Any) -> None:
        if cancelled.is_set():
            return
        session.history.append(update)
        await self.conn.session_update(session_id=session.id, update=update)

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise acp.RequestError.resource_not_found(session_id)
        return session

    @staticmethod
    def _modes(session: Session) -> SessionModeState:
        return SessionModeState(current_mode_id=session.mode, available_modes=list(MODES))


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(acp.run_agent(SdkEchoAgent()))


if __name__ == "__main__":
    main()
