#!/usr/bin/env python3
"""The echo agent of the echo contract, built only on the generated `agent` package.

Run it as an ACP agent on stdio:  python examples/echo_agent.py
It speaks newline-delimited JSON-RPC on stdin/stdout, logs to stderr (level from
ECHO_AGENT_LOG, default WARNING) and exits when stdin reaches EOF.

Or serve it remotely:  python examples/echo_agent.py --listen 127.0.0.1:8000
(needs the `remote` extra: uvicorn and hypercorn). One process, one `asgi_app`, two servers:
uvicorn serves WebSocket on that port, hypercorn Streamable HTTP (HTTP/2 cleartext, and
HTTP/1.1; a WebSocket upgrade there gets 403) on the next free one; port 0 picks free ports.
Once both listen it prints one line, `listening ws://HOST:PORT/acp http://HOST:PORT2/acp`, and
it stops cleanly on SIGTERM or SIGINT. Sessions are shared by all connections, so a client can
reconnect and session/load; each belongs to the principal that made it. `--store URL` says where they are kept: `memory`
(the default), `sqlite:PATH` (survives restarts; several processes may share the file) or
`postgresql://...` (several hosts; needs psycopg). Without --token-file only loopback clients are
served; `--token-file FILE` (one token per line, `TOKEN` or `NAME TOKEN`, each its own
principal) turns bearer-token authentication on, `--allow-host NAME[:*]` accepts another Host.
Both servers are set up against hostile clients (docs/security.md's table): a request head must
arrive within `--head-timeout` (10 s), WebSockets are pinged every `--ping` seconds (20) and closed
without a pong within as long, permessage-deflate is off, at most `--ws-budget` bytes (8 MiB) of
WebSocket messages are being received at once over all connections and at most `--ws-rate` bytes a
second (4 MiB) of large ones per client address (a sender over either waits: ws_budget.py; glibc
keeps `--malloc-keep` bytes of freed memory for the next one, malloc_keep.py), a Streamable HTTP
connection with no stream and no request ends after `--http-idle-timeout` (30 s), and TCP keepalive
finds peers that vanished without a FIN. A POST's body must arrive within `--body-timeout` (30 s,
else 408); new connections and sessions are rate-limited per client address and per connection
(`Limits`' defaults: `--rate-limits off` turns that off, e.g. for a load test from one address).
`--tls-cert FILE --tls-key FILE` (PEM) serve both over TLS: the line then reads `wss://` and
`https://` (HTTP/2 by ALPN), and clients verify the certificate (echo_client.py `--verify CA`).

Prompt commands (first text block of the prompt, trimmed):
  slow                   20 chunks "slow i/20\\n", 50 ms apart, cancellable with session/cancel
  read <absolute path>   fs/read_text_file through the client, then the content as one chunk
  permission             session/request_permission, then the outcome as one chunk
  anything else          each prompt block echoed back unchanged
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The example imports the checked-in generated package, wherever it is run from.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated"))

from agent import GENERATOR_VERSION, AsgiApp, BearerTokens, RequestError, asgi_app, run_agent, types  # noqa: E402
from agent.helpers import update_agent_message  # noqa: E402
from agent.remote_auth import LOOPBACK_HOSTS  # noqa: E402
from agent.remote_limits import RATES, Limits  # noqa: E402
from agent.session_store import SessionStore, StoreError  # noqa: E402
from agent.session_stores import STORE_URLS, open_store  # noqa: E402
from agent.sessions import Session, SessionAgent  # noqa: E402

if TYPE_CHECKING:  # imported when serving (the `remote` extra), not for stdio
    import uvicorn
    from hypercorn.config import Config as HypercornConfig

log = logging.getLogger("echo_agent")

SLOW_CHUNKS = 20
SLOW_INTERVAL = 0.05


class EchoAgent(SessionAgent):
    # The session layer serves new/load/list/resume/close/delete/set_mode/set_config_option and
    # cancel over the store; this class only says what a turn does.
    modes = [
        types.SessionMode(id="ask", name="Ask", description="Request permission before making any changes"),
        types.SessionMode(
            id="architect", name="Architect", description="Design and plan software systems without implementation"
        ),
        types.SessionMode(id="code", name="Code", description="Write and modify code with full tool access"),
    ]
    agent_info = types.Implementation(name="acp-codegen-echo-agent", title="Echo agent", version=GENERATOR_VERSION)
    agent_capabilities = types.AgentCapabilities(prompt_capabilities=types.PromptCapabilities(embedded_context=True))
    client_capabilities = types.ClientCapabilities()
    info_after_turn = False  # the echo contract: a turn sends its chunks and nothing else

    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        self.client_capabilities = params.client_capabilities
        return await super().initialize(params)

    async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
        # No auth methods are advertised, so no method id can be valid.
        raise RequestError.invalid_params(f"unknown auth method {params.method_id!r}", "params.methodId")

    async def turn(self, session: Session, prompt: list[types.ContentBlock]) -> None:
        text = next((block.text for block in prompt if isinstance(block, types.TextContent)), "").strip()
        words = text.split(None, 1)
        if text == "slow":  # session/cancel interrupts the sleep: the layer answers `cancelled`
            for i in range(1, SLOW_CHUNKS + 1):
                await session.say(f"slow {i}/{SLOW_CHUNKS}\n")
                if i < SLOW_CHUNKS:
                    await asyncio.sleep(SLOW_INTERVAL)
        elif len(words) == 2 and words[0] == "read":
            await session.say(await self._read(session, words[1].strip()))
        elif text == "permission":
            await session.say(await self._permission(session))
        else:
            for block in prompt:
                await session.send(update_agent_message(block))

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


# The servers' own limits, set to match the app's (docs/security.md has the table of what each stops).
MAX_MESSAGE = 8 * 1024 * 1024  # asgi_app's max_message_size; both servers' WebSocket limits are set to it
HEAD_TIMEOUT = 10.0  # seconds a request's head may take to arrive (slowloris); also hypercorn's keep-alive
PING = 20.0  # WebSocket ping interval and pong deadline: a half-open socket is found within 40 s
MAX_HEAD = 16 * 1024  # bytes of an unfinished request head either server buffers
KEEPALIVE = (30, 10, 3)  # TCP keepalive: idle seconds, probe interval, probes: a vanished peer found in 60 s
# WebSocket bytes being received at once, every connection (ws_budget.py): one largest message. Under
# 40 senders of 7 MiB messages a good client's p99 was 70-121 ms with it, 117-327 ms with 32 MiB.
WS_BUDGET = 8 * 1024 * 1024
# Bytes a second of large WebSocket frames (over 64 KiB) per client address (ws_budget.py): the budget
# bounds memory, this bounds the CPU a sender's large messages take. Each 7 MiB message is ~12-15 ms of
# CPU the loop cannot split (the parse), so a good turn that meets one waits: under the same 40 senders a
# good client's p99 was 6-12x quiet without a rate, 25-40 ms at 32 MiB/s, 7.6-9.1 at 8, 6.6-8.2 at 4.
WS_RATE = 4 * 1024 * 1024
# Freed memory glibc keeps for the next large message (malloc_keep.py): a 7 MiB message cost 30-34 ms of
# server CPU with glibc's defaults (its copies' pages faulted in afresh each time), 15-19 ms with this.
MALLOC_KEEP = 128 * 1024 * 1024
# --rate-limits off: no rate of new connections or sessions (a load test from one address)
NO_RATES: dict[str, Any] = dict.fromkeys(RATES)


def _uvicorn_config(
    app: AsgiApp,
    head_timeout: float,
    ping: float,
    ws_budget: int = WS_BUDGET,
    ws_rate: int | None = WS_RATE,
    tls: tuple[str, str] | None = None,
) -> uvicorn.Config:
    import h11
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from ws_budget import budgeted  # beside this file

    class HeadInTime(H11Protocol):
        """uvicorn's HTTP/1.1 protocol, but a connection whose request head has not arrived
        `head_timeout` after it opened (or after its last response) is closed: uvicorn itself
        waits forever for a half-sent head, so 2,000 of them held 2,000 sockets."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = self.loop.call_later(head_timeout, self._head_late)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE and self._head_timer is not None:
                self._head_timer.cancel()  # the head is in (a body, if slow, is the app's to time out)
                self._head_timer = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._head_timer is None and not self.transport.is_closing():  # keep-alive: the next head
                self._head_timer = self.loop.call_later(head_timeout, self._head_late)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

        def _head_late(self) -> None:
            self._head_timer = None
            transport: asyncio.Transport | None = self.transport
            if transport is not None and transport.get_protocol() is self and self.conn.their_state is h11.IDLE:
                transport.close()

    return uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        ws=budgeted(ws_budget, rate=ws_rate),  # uvicorn's websockets-sansio, with a budget of bytes being received
        http=HeadInTime,
        ws_max_size=MAX_MESSAGE,
        ws_per_message_deflate=False,  # 74 KiB per idle socket instead of 30, and deflate bombs
        ws_ping_interval=ping,
        ws_ping_timeout=ping,
        timeout_keep_alive=5,
        h11_max_incomplete_event_size=MAX_HEAD,
        ssl_certfile=None if tls is None else tls[0],
        ssl_keyfile=None if tls is None else tls[1],
    )


def _hypercorn_config(fd: int, head_timeout: float, ping: float, tls: tuple[str, str] | None = None) -> HypercornConfig:
    from hypercorn.config import Config as HypercornConfig

    config = HypercornConfig()
    if tls is not None:  # HTTP/2 and HTTP/1.1 by ALPN
        config.certfile, config.keyfile = tls
    config.bind = [f"fd://{fd}"]
    config.loglevel = "WARNING"
    config.accesslog = None
    # hypercorn's idle timer runs until a request's head is complete: with it, the head timeout
    config.keep_alive_timeout = head_timeout
    config.h11_max_incomplete_size = MAX_HEAD
    config.h2_max_concurrent_streams = 100  # per HTTP/2 connection: SSE streams and POSTs together
    config.websocket_max_message_size = MAX_MESSAGE
    config.websocket_ping_interval = ping
    # Not read_timeout: it closes a connection that sends nothing for that long, and an SSE stream's
    # client legitimately sends nothing for hours. Slow bodies are timed out by the app (Limits.body_timeout).
    return config


def _http_only(app: AsgiApp) -> Callable[[Any, Any, Any], Awaitable[None]]:
    """The app for hypercorn: Streamable HTTP only. A WebSocket upgrade on its port is refused
    (403): WebSockets belong on uvicorn's, whose receive budget bounds what they cost (40 senders
    of 7 MiB messages through hypercorn grew the server to 510 MiB, past that budget)."""

    async def http_only(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008, "reason": "WebSocket is served on the ws:// port"})
            return
        await app(scope, receive, send)

    return http_only


def _bind(host: str, port: int) -> socket.socket:
    # IPPROTO_TCP, not socket.create_server's 0: asyncio turns Nagle off (TCP_NODELAY) only on
    # sockets that say they are TCP, and accepted ones inherit this. With Nagle on, uvicorn holds a
    # prompt's answer written right after an update until the client's delayed ACK: 40 ms a turn.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # TCP keepalive (accepted sockets inherit it): the kernel finds a peer that vanished without a FIN,
    # a half-open connection, even on an SSE stream where the client never sends anything.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux; macOS has only the switch
        for option, value in zip(
            (socket.TCP_KEEPIDLE, socket.TCP_KEEPINTVL, socket.TCP_KEEPCNT), KEEPALIVE, strict=True
        ):
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
    sock.bind((host, port))
    sock.listen()
    sock.setblocking(False)
    return sock


async def listen(
    host: str,
    port: int,
    tokens: BearerTokens | None = None,
    hosts: list[str] | None = None,
    store_url: str = "memory",
    head_timeout: float = HEAD_TIMEOUT,
    ping: float = PING,
    http_idle_timeout: float = 30.0,
    ws_budget: int = WS_BUDGET,
    body_timeout: float = 30.0,
    rate_limits: bool = True,
    ws_rate: int | None = WS_RATE,
    tls: tuple[str, str] | None = None,
) -> None:
    """Serve one `asgi_app` with uvicorn (WebSocket) and hypercorn (Streamable HTTP) until SIGTERM.
    `tokens`: authentication on (else loopback clients only); `hosts`: Host values allowed besides loopback;
    `store_url`: where sessions are kept (every connection's agent shares the store); `head_timeout`:
    seconds a request's head may take on either server; `ping`: WebSocket ping interval and pong
    deadline; `http_idle_timeout`: seconds a Streamable HTTP connection lives with no stream and no request;
    `ws_budget`: WebSocket bytes being received at once over all connections (more waits: ws_budget.py);
    `body_timeout`: seconds a POST's body may take; `rate_limits`: the per-address and per-connection rates
    of new connections and sessions (`Limits`' defaults) and `ws_rate` on, or off; `ws_rate`: bytes a second
    of large WebSocket frames per client address (None: no rate; over it a frame waits, ws_budget.py);
    `tls`: (certificate file, key file) to serve wss:// and https://, or None for ws:// and http://."""
    import uvicorn
    from hypercorn.asyncio import serve

    store = await open_store(store_url)
    allowed = None if not hosts else [*LOOPBACK_HOSTS, *hosts]
    app = asgi_app(
        lambda: EchoAgent(store),
        authenticate=tokens,
        allowed_hosts=allowed,
        max_message_size=MAX_MESSAGE,
        limits=Limits(
            http_idle_timeout=http_idle_timeout, body_timeout=body_timeout, **({} if rate_limits else NO_RATES)
        ),
    )
    ws_sock = _bind(host, port)
    http_sock = _bind(host, 0 if port == 0 else port + 1)

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:  # ours are installed below
            yield

    ws_server = Server(_uvicorn_config(app, head_timeout, ping, ws_budget, ws_rate if rate_limits else None, tls))
    config = _hypercorn_config(http_sock.fileno(), head_timeout, ping, tls)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ws_task = asyncio.ensure_future(ws_server.serve(sockets=[ws_sock]))
    http_task = asyncio.ensure_future(serve(_http_only(app), config, shutdown_trigger=stop.wait))
    while not ws_server.started:
        if ws_task.done():
            await ws_task
        await asyncio.sleep(0.01)
    urls = [
        f"{scheme}://{_url_host(host)}:{sock.getsockname()[1]}/acp"
        for scheme, sock in (
            (("ws", ws_sock), ("http", http_sock)) if tls is None else (("wss", ws_sock), ("https", http_sock))
        )
    ]
    print("listening", *urls, flush=True)
    await stop.wait()
    ws_server.should_exit = True
    await app.aclose()
    await asyncio.gather(ws_task, http_task)
    await store.aclose()


async def serve_stdio(store_url: str) -> None:
    store: SessionStore = await open_store(store_url)
    try:
        await run_agent(EchoAgent(store))
    finally:
        await store.aclose()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _tls_files(parser: argparse.ArgumentParser, cert: str | None, key: str | None) -> tuple[str, str] | None:
    """--tls-cert and --tls-key, both or neither, loaded once here so that a wrong file is a
    clear error before anything listens (the servers would fail with a traceback)."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        parser.error("--tls-cert and --tls-key go together")
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        parser.error(f"--tls-cert {cert} / --tls-key {key}: cannot load them: {exc}")
    return cert, key


def main() -> None:
    parser = argparse.ArgumentParser(description="The echo agent, on stdio or served remotely.")
    parser.add_argument("--listen", metavar="HOST:PORT", help="serve WebSocket and Streamable HTTP at /acp")
    parser.add_argument(
        "--token-file", metavar="FILE", help="bearer tokens, one per line (`TOKEN` or `NAME TOKEN`): authentication on"
    )
    parser.add_argument("--store", metavar="URL", default="memory", help=f"where sessions are kept: {STORE_URLS}")
    parser.add_argument(
        "--allow-host", metavar="HOST", action="append", default=[], help="a Host to accept too (NAME:* any port)"
    )
    parser.add_argument(
        "--head-timeout",
        metavar="SECONDS",
        type=float,
        default=HEAD_TIMEOUT,
        help=f"seconds a request's head may take to arrive (default {HEAD_TIMEOUT:g})",
    )
    parser.add_argument(
        "--ping",
        metavar="SECONDS",
        type=float,
        default=PING,
        help=f"WebSocket ping interval and pong deadline (default {PING:g})",
    )
    parser.add_argument(
        "--http-idle-timeout",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="seconds a Streamable HTTP connection lives with no stream open and no request (default 30)",
    )
    parser.add_argument(
        "--ws-budget",
        metavar="BYTES",
        type=int,
        default=WS_BUDGET,
        help=f"WebSocket bytes being received at once, all connections; more waits (default {WS_BUDGET})",
    )
    parser.add_argument(
        "--ws-rate",
        metavar="BYTES",
        type=int,
        default=WS_RATE,
        help=f"bytes a second of WebSocket frames over 64 KiB per client address; more waits (default {WS_RATE})",
    )
    parser.add_argument(
        "--malloc-keep",
        metavar="BYTES",
        type=int,
        default=MALLOC_KEEP,
        help=f"freed memory glibc keeps for the next large message; 0: its defaults (default {MALLOC_KEEP})",
    )
    parser.add_argument(
        "--body-timeout",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="seconds a POST's whole body may take to arrive, else 408 (default 30)",
    )
    parser.add_argument("--tls-cert", metavar="FILE", help="a PEM certificate (chain): serve wss:// and https://")
    parser.add_argument("--tls-key", metavar="FILE", help="the PEM private key of --tls-cert")
    parser.add_argument(
        "--rate-limits",
        choices=("on", "off"),
        default="on",
        help="the rates of new connections per address, of sessions per connection and address, and --ws-rate"
        " (default on)",
    )
    args = parser.parse_args()
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("ECHO_AGENT_LOG", "WARNING").upper(),
        format="echo_agent %(levelname)s %(name)s: %(message)s",
    )
    if args.listen is None:
        if args.token_file or args.allow_host or args.tls_cert or args.tls_key:
            parser.error("--token-file, --allow-host, --tls-cert and --tls-key need --listen")
        try:
            asyncio.run(serve_stdio(args.store))
        except StoreError as exc:
            sys.exit(f"echo_agent: {exc}")
        return
    try:
        tokens = None if args.token_file is None else BearerTokens.from_file(args.token_file)
    except ValueError as exc:
        parser.error(str(exc))
    tls = _tls_files(parser, args.tls_cert, args.tls_key)
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit():
        parser.error(f"--listen takes HOST:PORT, got {args.listen!r}")
    try:
        for flag, seconds in (
            ("--head-timeout", args.head_timeout),
            ("--ping", args.ping),
            ("--http-idle-timeout", args.http_idle_timeout),
            ("--body-timeout", args.body_timeout),
        ):
            if not seconds > 0:
                parser.error(f"{flag} takes positive seconds, got {seconds!r}")
        address = host.strip("[]") or "127.0.0.1"
        timeouts = (args.head_timeout, args.ping, args.http_idle_timeout)
        if not args.ws_budget > 0:
            parser.error(f"--ws-budget takes positive bytes, got {args.ws_budget!r}")
        if not args.ws_rate > 0:
            parser.error(f"--ws-rate takes positive bytes a second, got {args.ws_rate!r}")
        if args.malloc_keep < 0:
            parser.error(f"--malloc-keep takes bytes >= 0, got {args.malloc_keep!r}")
        from malloc_keep import keep_freed_memory  # beside this file

        keep_freed_memory(args.malloc_keep)  # glibc only; elsewhere the allocator's own policy stands
        serve = listen(
            address,
            int(port),
            tokens,
            args.allow_host,
            args.store,
            *timeouts,
            args.ws_budget,
            body_timeout=args.body_timeout,
            rate_limits=args.rate_limits == "on",
            ws_rate=args.ws_rate,
            tls=tls,
        )
        asyncio.run(serve)
    except StoreError as exc:
        sys.exit(f"echo_agent: {exc}")
    except ImportError as exc:
        sys.exit(f"echo_agent --listen needs uvicorn and hypercorn (pip install 'acp-codegen[remote]'): {exc}")


if __name__ == "__main__":
    main()
