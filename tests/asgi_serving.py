"""Serving an ASGI app in the test's event loop on a real server (uvicorn or hypercorn), and
`Affinity`, a middleware that sets an affinity cookie as a load balancer would and records what
every request carried, and `listening_echo_agent`, examples/echo_agent.py --listen as a user
starts it. Shared by the remote tests against the SDK's server (tests/sdk_remote_server.py) and
against ours (tests/test_remote_e2e.py, tests/test_remote_interop.py); and
`cancelled_then_permission_turn`, the turn pair the remote clients' concurrency tests run; and
`port_of` and `ws_frame`, what the attacks on a listening agent (tests/test_remote_attacks.py,
benchmarks/bench_attacks.py) send on a raw socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

ECHO_AGENT = Path(__file__).resolve().parent.parent / "examples" / "echo_agent.py"

COOKIE = b"acp-affinity=backend-1"


class Affinity:
    """Sets the affinity cookie on every response, as a load balancer would, and records what
    each request carried: whether the cookie came back, the HTTP version, the headers the RFD
    names, and each POST's JSON-RPC message."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[dict[str, Any]] = []

    def without_cookie(self) -> list[str]:
        return [r["what"] for r in self.requests if not r["cookie"]]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == "/stats":
            body = json.dumps({"requests": len(self.requests), "without_cookie": self.without_cookie()}).encode()
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": body})
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        record: dict[str, Any] = {
            "what": f"{scope.get('method', 'WS')} {scope['type']}",
            "method": scope.get("method", "WS"),
            "cookie": COOKIE.decode() in headers.get("cookie", ""),
            "http_version": scope.get("http_version"),
            "accept": headers.get("accept"),
            "content_type": headers.get("content-type"),
            "connection_id": headers.get("acp-connection-id"),
            "session_id": headers.get("acp-session-id"),
            "authorization": headers.get("authorization"),
            "body": b"",
        }
        self.requests.append(record)

        async def receive_recorded() -> dict[str, Any]:
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                record["body"] += message.get("body", b"")
            return message

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message["type"] in ("http.response.start", "websocket.accept"):
                headers = list(message.get("headers", []))
                headers.append((b"set-cookie", COOKIE + b"; Path=/; HttpOnly"))
                message = {**message, "headers": headers}
                record["status"] = message.get("status", 101)
            await send(message)

        await self.app(scope, receive_recorded, send_with_cookie)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def ws_frame(opcode: int, payload: bytes, rsv1: bool = False) -> bytes:
    """A client frame, masked with the all-zero key (valid: the server must only unmask)."""
    head = bytes([0x80 | (0x40 if rsv1 else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    return head + b"\0\0\0\0" + payload


def bound_socket(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1 (`port` 0: a free one); reusable at once after a stop."""
    # IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say they are
    # TCP, and accepted ones inherit this; with Nagle on, an answer written right after an update
    # waits for the peer's delayed ACK (40 ms a turn).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@contextlib.asynccontextmanager
async def serving(server: str, sock: socket.socket, app: Any) -> AsyncIterator[None]:
    """Serve `app` on `sock` with uvicorn or hypercorn (h2c and HTTP/1.1) while the context runs."""
    stop = asyncio.Event()
    if server == "uvicorn":
        import uvicorn

        runner = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", ws="websockets-sansio"))
        # The test process keeps its own SIGINT/SIGTERM handlers (uvicorn >= 0.29 would take them).
        runner.capture_signals = contextlib.nullcontext  # type: ignore[method-assign, assignment]
        task = asyncio.ensure_future(runner.serve(sockets=[sock]))
        while not runner.started and not task.done():
            await asyncio.sleep(0.01)
    else:
        import hypercorn.asyncio
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"fd://{os.dup(sock.fileno())}"]  # hypercorn closes the one it is given
        config.loglevel = "WARNING"
        config.graceful_timeout = 0.5
        task = asyncio.ensure_future(hypercorn.asyncio.serve(app, config, shutdown_trigger=stop.wait))
    try:
        yield
    finally:
        if server == "uvicorn":
            runner.should_exit = True
            runner.force_exit = True
        stop.set()
        # A server stopped with streams open may end in errors of its own (hypercorn 0.18's
        # graceful shutdown does): stopped is all that matters here.
        done, _ = await asyncio.wait({task}, timeout=5.0)
        if not done:
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@contextlib.contextmanager
def listening_echo_agent(*options: str) -> Iterator[dict[str, str]]:
    """`echo_agent.py --listen 127.0.0.1:0 [options]` (e.g. `--token-file FILE`): its URLs by
    profile ("ws", "http") and its process id ("pid"); stopped by SIGTERM, which it must survive
    cleanly (exit 0, no traceback)."""
    proc = subprocess.Popen(
        [sys.executable, str(ECHO_AGENT), "--listen", "127.0.0.1:0", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        words = line.split()
        assert len(words) == 3 and words[0] == "listening", (line, proc.stderr and proc.stderr.read())
        assert words[1].startswith("ws://127.0.0.1:") and words[2].startswith("http://127.0.0.1:"), words
        yield {"ws": words[1], "http": words[2], "pid": str(proc.pid)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        err = proc.stderr.read() if proc.stderr else ""
        assert code == 0 and "Traceback" not in err, err


async def cancelled_then_permission_turn(proxy: Any, session: str) -> tuple[str, str]:
    """On `session` of a generated client's proxy: a slow turn cancelled 0.15 s in, then a
    permission turn (the agent's request, the client's answer); both stop reasons."""
    # Here, not at the top: tests/sdk_remote_server.py imports this module without generated/ on its path.
    from client import types

    slow = asyncio.ensure_future(
        proxy.session_prompt(session_id=session, prompt=[types.TextContent(text="slow")], timeout=5)
    )
    await asyncio.sleep(0.15)
    await proxy.session_cancel(session_id=session)
    first = await slow
    second = await proxy.session_prompt(session_id=session, prompt=[types.TextContent(text="permission")], timeout=5)
    return first.stop_reason, second.stop_reason
