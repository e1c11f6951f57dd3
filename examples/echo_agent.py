#!/usr/bin/env python3
"""The echo agent of the echo contract, built only on the generated `agent` package.

Run it as an ACP agent on stdio:  python examples/echo_agent.py
It speaks newline-delimited JSON-RPC on stdin/stdout, logs to stderr (level from
ECHO_AGENT_LOG, default WARNING) and exits when stdin reaches EOF.

Or serve it remotely:  python examples/echo_agent.py --listen 127.0.0.1:8000
(needs the `remote` extra: uvicorn and hypercorn). One process, one `asgi_app`, two servers:
uvicorn serves WebSocket on that port, hypercorn Streamable HTTP (HTTP/2 cleartext, and
HTTP/1.1) on the next free one; port 0 picks free ports. Once both listen it prints one line,
`listening ws://HOST:PORT/acp http://HOST:PORT2/acp`, and it stops cleanly on SIGTERM or
SIGINT. Sessions are shared by all connections, so a client can reconnect and session/load;
each belongs to the principal that made it. Without --token-file only loopback clients are
served; `--token-file FILE` (one token per line, `TOKEN` or `NAME TOKEN`, each its own
principal) turns bearer-token authentication on, `--allow-host NAME[:*]` accepts another Host.

Prompt commands (first text block of the prompt, trimmed):
  slow                   20 chunks "slow i/20\\n", 50 ms apart, cancellable with session/cancel
  read <absolute path>   fs/read_text_file through the client, then the content as one chunk
  permission             session/request_permission, then the outcome as one chunk
  anything else          each prompt block echoed back unchanged
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

# The example imports the checked-in generated package, wherever it is run from.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated"))

from agent import GENERATOR_VERSION, PROTOCOL_VERSION, Agent, BearerTokens, RequestError, asgi_app, run_agent, types  # noqa: E402
from agent.helpers import update_agent_message, update_agent_message_text, update_user_message  # noqa: E402
from agent.remote_auth import LOOPBACK_HOSTS  # noqa: E402

log = logging.getLogger("echo_agent")

SLOW_CHUNKS = 20
SLOW_INTERVAL = 0.05

MODES = [
    types.SessionMode(id="ask", name="Ask", description="Request permission before making any changes"),
    types.SessionMode(
        id="architect", name="Architect", description="Design and plan software systems without implementation"
    ),
    types.SessionMode(id="code", name="Code", description="Write and modify code with full tool access"),
]
MODE_IDS = frozenset(mode.id for mode in MODES)


@dataclass
class Session:
    id: str
    cwd: str
    owner: str  # the principal that made it: only its connections may use it
    mode: str = "ask"
    # Replayed by session/load: user blocks and agent chunks, in the order they happened.
    history: list[types.SessionUpdate] = field(default_factory=list)
    # Set by session/cancel; a fresh event per turn so a stale cancel never hits the next turn.
    cancelled: asyncio.Event | None = None


class EchoAgent(Agent):
    def __init__(self, sessions: dict[str, Session] | None = None) -> None:
        # Served remotely, every connection's agent shares one store: sessions outlive connections.
        self.sessions: dict[str, Session] = {} if sessions is None else sessions
        self.client_capabilities = types.ClientCapabilities()

    # -- lifecycle -------------------------------------------------------------------
    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        self.client_capabilities = params.client_capabilities
        # We speak exactly one version: answer it whatever was asked (the client decides).
        return types.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=types.AgentCapabilities(
                load_session=True,
                prompt_capabilities=types.PromptCapabilities(embedded_context=True),
            ),
            auth_methods=[],
            agent_info=types.Implementation(
                name="acp-codegen-echo-agent", title="Echo agent", version=GENERATOR_VERSION
            ),
        )

    async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
        # No auth methods are advertised, so no method id can be valid.
        raise RequestError.invalid_params(f"unknown auth method {params.method_id!r}", "params.methodId")

    async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
        self._check_cwd(params.cwd)
        session = Session(id=f"sess_{uuid.uuid4().hex}", cwd=params.cwd, owner=self.principal.id)
        self.sessions[session.id] = session
        log.info("new session %s in %s", session.id, session.cwd)
        return types.NewSessionResponse(session_id=session.id, modes=self._modes(session))

    async def session_load(self, params: types.LoadSessionRequest) -> types.LoadSessionResponse:
        self._check_cwd(params.cwd)
        session = self._session(params.session_id)
        session.cwd = params.cwd
        # Snapshot: a turn running concurrently must not change what this replay sends.
        for update in list(session.history):
            await self.peer.session_update(session_id=session.id, update=update)
        return types.LoadSessionResponse(modes=self._modes(session))

    async def session_set_mode(self, params: types.SetSessionModeRequest) -> types.SetSessionModeResponse:
        session = self._session(params.session_id)
        if params.mode_id not in MODE_IDS:
            raise RequestError.invalid_params(f"unknown mode {params.mode_id!r}", "params.modeId")
        session.mode = params.mode_id
        return types.SetSessionModeResponse()

    async def session_cancel(self, params: types.CancelNotification) -> None:
        session = self.sessions.get(params.session_id)
        if session is not None and session.owner == self.principal.id and session.cancelled is not None:
            session.cancelled.set()

    # -- prompt turn -----------------------------------------------------------------
    async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
        session = self._session(params.session_id)
        if session.cancelled is not None:
            raise RequestError.invalid_request("a prompt turn is already running")
        cancelled = session.cancelled = asyncio.Event()
        try:
            for block in params.prompt:
                session.history.append(update_user_message(block))
            await self._turn(session, params.prompt, cancelled)
            return types.PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")
        finally:
            session.cancelled = None

    async def _turn(self, session: Session, prompt: list[types.ContentBlock], cancelled: asyncio.Event) -> None:
        text = next((block.text for block in prompt if isinstance(block, types.TextContent)), "").strip()
        words = text.split(None, 1)
        if text == "slow":
            for i in range(1, SLOW_CHUNKS + 1):
                if cancelled.is_set():
                    return
                await self._say(session, cancelled, f"slow {i}/{SLOW_CHUNKS}\n")
                if i < SLOW_CHUNKS:
                    try:
                        await asyncio.wait_for(cancelled.wait(), SLOW_INTERVAL)
                    except asyncio.TimeoutError:
                        pass
        elif len(words) == 2 and words[0] == "read":
            await self._say(session, cancelled, await self._read(session, words[1].strip()))
        elif text == "permission":
            await self._say(session, cancelled, await self._permission(session))
        else:
            for block in prompt:
                await self._send(session, cancelled, update_agent_message(block))

    async def _read(self, session: Session, path: str) -> str:
        if not self.client_capabilities.fs.read_text_file:
            return "read: client does not support fs/read_text_file"
        if not os.path.isabs(path):
            return "read failed: -32602 path must be absolute"
        try:
            result = await self.peer.fs_read_text_file(session_id=session.id, path=path)
        except RequestError as exc:
            return f"read failed: {exc.code} {exc.message}"
        return result.content

    async def _permission(self, session: Session) -> str:
        response = await self.peer.session_request_permission(
            session_id=session.id,
            tool_call=types.ToolCallUpdate(
                tool_call_id="call_permission_1", title="Echo permission check", kind="other", status="pending"
            ),
            options=[
                types.PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
                types.PermissionOption(option_id="reject-once", name="Reject once", kind="reject_once"),
            ],
        )
        outcome = response.outcome
        if isinstance(outcome, types.SelectedPermissionOutcome):
            return f"permission: selected {outcome.option_id}"
        return "permission: cancelled"

    async def _say(self, session: Session, cancelled: asyncio.Event, text: str) -> None:
        await self._send(session, cancelled, update_agent_message_text(text))

    async def _send(self, session: Session, cancelled: asyncio.Event, update: types.SessionUpdate) -> None:
        # After session/cancel the turn only winds down: nothing more is sent for it.
        if cancelled.is_set():
            return
        session.history.append(update)
        await self.peer.session_update(session_id=session.id, update=update)

    # -- helpers ---------------------------------------------------------------------
    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None or session.owner != self.principal.id:  # another's: as if unknown
            raise RequestError(-32002, "Resource not found", {"sessionId": session_id})
        return session

    @staticmethod
    def _check_cwd(cwd: str) -> None:
        if not os.path.isabs(cwd):
            raise RequestError.invalid_params(f"cwd must be an absolute path, got {cwd!r}", "params.cwd")

    @staticmethod
    def _modes(session: Session) -> types.SessionModeState:
        return types.SessionModeState(current_mode_id=session.mode, available_modes=list(MODES))


def _bind(host: str, port: int) -> socket.socket:
    # IPPROTO_TCP, not socket.create_server's 0: asyncio turns Nagle off (TCP_NODELAY) only on
    # sockets that say they are TCP, and accepted ones inherit this. With Nagle on, uvicorn holds a
    # prompt's answer written right after an update until the client's delayed ACK: 40 ms a turn.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen()
    sock.setblocking(False)
    return sock


async def listen(host: str, port: int, tokens: BearerTokens | None = None, hosts: list[str] | None = None) -> None:
    """Serve one `asgi_app` with uvicorn (WebSocket) and hypercorn (Streamable HTTP) until SIGTERM.
    `tokens`: authentication on (else loopback clients only); `hosts`: Host values allowed besides loopback."""
    import uvicorn
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    sessions: dict[str, Session] = {}
    allowed = None if not hosts else [*LOOPBACK_HOSTS, *hosts]
    app = asgi_app(lambda: EchoAgent(sessions), authenticate=tokens, allowed_hosts=allowed)
    ws_sock = _bind(host, port)
    http_sock = _bind(host, 0 if port == 0 else port + 1)

    class Server(uvicorn.Server):
        def capture_signals(self):  # type: ignore[no-untyped-def]  # ours are installed below
            import contextlib

            return contextlib.nullcontext()

    ws_server = Server(uvicorn.Config(app, lifespan="off", log_level="warning", ws="websockets-sansio"))
    config = Config()
    config.bind = [f"fd://{http_sock.fileno()}"]
    config.loglevel = "WARNING"
    config.accesslog = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ws_task = asyncio.ensure_future(ws_server.serve(sockets=[ws_sock]))
    http_task = asyncio.ensure_future(serve(app, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
    while not ws_server.started:
        if ws_task.done():
            await ws_task
        await asyncio.sleep(0.01)
    urls = [
        f"{scheme}://{_url_host(host)}:{sock.getsockname()[1]}/acp"
        for scheme, sock in (("ws", ws_sock), ("http", http_sock))
    ]
    print("listening", *urls, flush=True)
    await stop.wait()
    ws_server.should_exit = True
    await app.aclose()
    await asyncio.gather(ws_task, http_task)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def main() -> None:
    parser = argparse.ArgumentParser(description="The echo agent, on stdio or served remotely.")
    parser.add_argument("--listen", metavar="HOST:PORT", help="serve WebSocket and Streamable HTTP at /acp")
    parser.add_argument(
        "--token-file", metavar="FILE", help="bearer tokens, one per line (`TOKEN` or `NAME TOKEN`): authentication on"
    )
    parser.add_argument(
        "--allow-host", metavar="HOST", action="append", default=[], help="a Host to accept too (NAME:* any port)"
    )
    args = parser.parse_args()
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("ECHO_AGENT_LOG", "WARNING").upper(),
        format="echo_agent %(levelname)s %(name)s: %(message)s",
    )
    if args.listen is None:
        if args.token_file or args.allow_host:
            parser.error("--token-file and --allow-host need --listen")
        asyncio.run(run_agent(EchoAgent()))
        return
    try:
        tokens = None if args.token_file is None else BearerTokens.from_file(args.token_file)
    except ValueError as exc:
        parser.error(str(exc))
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit():
        parser.error(f"--listen takes HOST:PORT, got {args.listen!r}")
    try:
        asyncio.run(listen(host.strip("[]") or "127.0.0.1", int(port), tokens, args.allow_host))
    except ImportError as exc:
        sys.exit(f"echo_agent --listen needs uvicorn and hypercorn (pip install 'acp-codegen[remote]'): {exc}")


if __name__ == "__main__":
    main()
