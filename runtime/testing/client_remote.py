"""check-client for remote clients: the probe agent served over the RFD's WebSocket and
Streamable HTTP profiles, on this package's own `asgi_app`, and judged as over stdio.

    report = check_client_listen(["my-editor", "--agent-url", "{url}"], "127.0.0.1:8765")

The client command runs twice, `{url}` once `ws://HOST:PORT/acp` and once `http://HOST:PORT/acp`
(the RFD: clients MUST support both). A recording middleware sits in front of `asgi_app`: it
records every message as the transport carried it (WebSocket text frames, POST bodies, the
JSON answer to `initialize`, SSE events), sets a cookie on every response, and checks the
RFD's client MUSTs beside the protocol's: the cookie kept and returned, `Acp-Connection-Id`
and `Acp-Session-Id` on every session-scoped POST, both profiles served.

Needs the server libraries (the `remote` extra): uvicorn serves the WebSocket run, hypercorn
the Streamable HTTP one (HTTP/2 cleartext, which the RFD requires, and HTTP/1.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import importlib
import json
import os
import secrets
import shlex
import socket
from collections.abc import AsyncGenerator, Mapping, MutableMapping, Sequence
from typing import Any, Final, Literal, cast

from ..agent import Agent
from ..remote import asgi_app
from .client_checks import REMOTE_CHECKS, ClientOptions
from .client_conformance import Probe, run_client
from .conformance_output import Matcher
from .conformance_report import CheckResult, Report
from .probe import Findings, ProbeSession
from .probe_scenario import run_turn
from .scripted import as_object

__all__ = ["URL_PLACEHOLDER", "check_client_listen", "expand_url", "parse_listen"]

URL_PLACEHOLDER: Final = "{url}"
PROFILES: Final = (("ws", "WebSocket"), ("http", "Streamable HTTP"))
_COOKIE: Final = "acp-probe-affinity"

Scope = MutableMapping[str, Any]


def parse_listen(listen: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:PORT`); ValueError saying what is wrong."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--listen takes HOST:PORT (e.g. 127.0.0.1:8765), got {listen!r}")
    return host, int(port)


def expand_url(argv: Sequence[str], url: str) -> list[str]:
    """`argv` with `{url}` replaced; ValueError when it has none."""
    if not any(URL_PLACEHOLDER in arg for arg in argv):
        raise ValueError(
            "the client command has no {url}: put it where the client takes its agent's URL"
        )
    return [arg.replace(URL_PLACEHOLDER, url) for arg in argv]


@dataclasses.dataclass
class _Conn:
    """One remote connection as the middleware saw it: its probe session (once `asgi_app`
    made it), the messages recorded before that, and its transport findings."""

    profile: str
    session: ProbeSession | None = None
    early: list[tuple[str, bytes]] = dataclasses.field(default_factory=list[tuple[str, bytes]])
    cookie_set: bool = False

    def record(self, direction: str, raw: bytes) -> None:
        if self.session is None:
            self.early.append((direction, raw))
        else:
            self.session.record("in" if direction == "in" else "out", raw)


_current: contextvars.ContextVar[_Conn | None] = contextvars.ContextVar(
    "acp_probe_connection", default=None
)


class _Recorder:
    """The middleware: records each connection's messages for its probe session, sets the
    affinity cookie, and judges the RFD's client rules."""

    def __init__(self, probe: Probe, profile: str) -> None:
        self.probe = probe
        self.profile = profile
        self.token = secrets.token_hex(8)
        self.by_id: dict[str, _Conn] = {}
        self.app = asgi_app(self._make_agent, max_connections=16)

    def _make_agent(self) -> Agent:
        conn = _current.get() or _Conn(self.profile)
        session = self.probe.attached(run_turn)
        conn.session = session
        for direction, raw in conn.early:
            conn.record(direction, raw)
        conn.early.clear()
        return cast(Agent, session.handler())

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        conn = self.by_id.get(headers.get("acp-connection-id", "")) or _Conn(self.profile)
        self._cookie_returned(scope, headers, conn)
        body = bytearray()
        stream = _Events()

        async def receive_recorded() -> dict[str, Any]:
            message: dict[str, Any] = await receive()
            if message["type"] == "websocket.receive" and message.get("text") is not None:
                conn.record("in", message["text"].encode())
            elif message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body") and scope.get("method") == "POST" and body:
                    self._posted(headers, bytes(body), conn, scope)
            return message

        async def send_recorded(message: dict[str, Any]) -> None:
            kind = message["type"]
            if kind in ("http.response.start", "websocket.accept"):
                out = list(message.get("headers", []))
                for key, value in out:
                    if key.lower() == b"acp-connection-id":
                        self.by_id[value.decode("latin-1")] = conn
                out.append((b"set-cookie", f"{_COOKIE}={self.token}; Path=/".encode()))
                conn.cookie_set = True
                stream.status = message.get("status", 101)
                stream.sse = any(
                    k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                    for k, v in out
                )
                message = {**message, "headers": out}
            elif kind == "websocket.send" and message.get("text") is not None:
                conn.record("out", message["text"].encode())
            elif kind == "http.response.body" and stream.status == 200:
                for event in stream.feed(message.get("body", b"")):
                    conn.record("out", event)
            await send(message)

        token = _current.set(conn)
        try:
            await self.app(scope, receive_recorded, send_recorded)
        finally:
            _current.reset(token)

    def _cookie_returned(self, scope: Scope, headers: dict[str, str], conn: _Conn) -> None:
        """RFD § 5: a cookie the server set comes back on every later request."""
        check = "client-remote-cookies"
        if not any(c.cookie_set for c in (conn, *self.by_id.values())):
            return  # no response has set it yet
        what = f"{scope.get('method', 'GET')} {scope['type']} ({self.profile})"
        if f"{_COOKIE}={self.token}" in headers.get("cookie", ""):
            self.probe.findings.ok(check, f"returned on every later request ({self.profile})")
        else:
            self.probe.findings.fail(check, f"{what} without the cookie the server set")

    def _posted(self, headers: dict[str, str], body: bytes, conn: _Conn, scope: Scope) -> None:
        """A POST's message, recorded; RFD: session-scoped POSTs carry both headers."""
        if conn.session is None and headers.get("acp-connection-id"):
            return  # an unknown connection: the app answers 404
        conn.record("in", body)
        try:
            message = as_object(json.loads(body)) or {}
        except ValueError:
            return
        session_id = self._session_of(message, conn)
        if session_id is None:
            return
        check = "client-remote-session-header"
        what = message.get("method") or "the response to a session request"
        if headers.get("acp-session-id") != session_id:
            got = headers.get("acp-session-id")
            detail = f"POST {what} for session {session_id!r} with Acp-Session-Id {got!r}"
            self.probe.findings.fail(check, detail, _line(conn))
        elif not headers.get("acp-connection-id"):
            self.probe.findings.fail(check, f"POST {what} without Acp-Connection-Id", _line(conn))
        else:
            self.probe.findings.ok(check, "Acp-Connection-Id and Acp-Session-Id on session POSTs")

    def _session_of(self, message: dict[str, Any], conn: _Conn) -> str | None:
        """The session a POSTed message is scoped to: its params' sessionId, or for a response
        the session of the probe's request it answers."""
        params = as_object(message.get("params")) or {}
        if message.get("method") is not None:
            found = params.get("sessionId")
            return found if isinstance(found, str) else None
        if conn.session is None:
            return None
        for line in conn.session.sent:
            if line.method is not None and line.get("id") == message.get("id"):
                found = (as_object(line.get("params")) or {}).get("sessionId")
                return found if isinstance(found, str) else None
        return None


def _line(conn: _Conn) -> Any:
    return conn.session.received[-1] if conn.session and conn.session.received else None


class _Events:
    """The `data:` payloads of an SSE stream, fed in chunks (one JSON message per event)."""

    def __init__(self) -> None:
        self.status = 0
        self.sse = False
        self.pending = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        if not self.sse:
            return [chunk] if chunk.strip() else []  # a JSON answer (initialize over HTTP)
        self.pending += chunk.replace(b"\r\n", b"\n")
        *events, self.pending = self.pending.split(b"\n\n")
        out: list[bytes] = []
        for event in events:
            data = [
                line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")
            ]
            if data:
                out.append(b"\n".join(data))
        return out


def _bound(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(64)
    return sock


ServerModule = Literal["uvicorn", "hypercorn.asyncio", "hypercorn.config"]


def _server(name: ServerModule) -> Any:
    """An ASGI server's module, by one of these constant names: the servers are optional (the
    `remote` extra), and this package stays stdlib-only until --listen is used."""
    return importlib.import_module(name)


@contextlib.asynccontextmanager
async def _serving(profile: str, sock: socket.socket, app: Any) -> AsyncGenerator[None, None]:
    """uvicorn for the WebSocket run, hypercorn (h2c and HTTP/1.1) for Streamable HTTP.
    (Imported by name: the servers are optional, and this package stays stdlib-only.)"""
    stop = asyncio.Event()
    server: Any = None
    if profile == "ws":
        uvicorn = _server("uvicorn")
        server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", lifespan="off", ws="websockets-sansio")
        )
        server.capture_signals = contextlib.nullcontext  # the caller's signal handlers stay
        # a duplicate: uvicorn closes the sockets it is given, and the next run needs this one
        copy = socket.fromfd(sock.fileno(), sock.family, sock.type)
        task: asyncio.Future[Any] = asyncio.ensure_future(server.serve(sockets=[copy]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
    else:
        serve = _server("hypercorn.asyncio").serve
        config = _server("hypercorn.config").Config()
        config.bind = [f"fd://{os.dup(sock.fileno())}"]  # hypercorn closes the one it is given
        config.loglevel = "WARNING"
        config.graceful_timeout = 0.5
        task = asyncio.ensure_future(serve(app, config, shutdown_trigger=stop.wait))
    try:
        yield
    finally:
        if server is not None:
            server.should_exit = True
            server.force_exit = True
        stop.set()
        done, _ = await asyncio.wait({task}, timeout=5.0)
        if not done:
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def check_client_listen(
    argv: Sequence[str],
    listen: str,
    options: ClientOptions | None = None,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    select: Matcher | None = None,
    stdin: bytes = b"",
) -> Report:
    """Run every client check against a remote client: `argv` (with `{url}`) runs once per
    profile, against the probe agent served at `listen` (HOST:PORT). ValueError for a bad
    `listen` or no `{url}`; ImportError when uvicorn or hypercorn is missing; OSError when
    the address cannot be bound or the client not started."""
    host, port = parse_listen(listen)
    expand_url(argv, "")  # ValueError now, not after a server started
    run = _listen(list(argv), host, port, options or ClientOptions(), cwd, env, select, stdin)
    return asyncio.run(run)


async def _listen(
    argv: list[str],
    host: str,
    port: int,
    options: ClientOptions,
    cwd: str | None,
    env: Mapping[str, str] | None,
    select: Matcher | None,
    stdin: bytes,
) -> Report:
    findings = Findings()
    sock = _bound(host, port)
    bound = sock.getsockname()[1]
    where = f"[{host}]:{bound}" if ":" in host else f"{host}:{bound}"
    probes: list[Probe] = []
    stderr: list[str] = []
    notes: list[str] = []
    cannot: list[str] = []
    try:
        for profile, name in PROFILES:
            probe = Probe(options, findings)
            probes.append(probe)
            recorder = _Recorder(probe, name)
            url = f"{profile}://{where}/acp"
            async with _serving(profile, sock, recorder):
                done = await run_client(expand_url(argv, url), probe, options, cwd, env, stdin)
            stderr[:] = done.stderr
            notes += done.notes
            if not probe.sessions:
                cannot.append(f"over {name} ({url}): {done.cannot_run}")
                why = done.cannot_run.replace("the client never started the probe agent", "")
                findings.fail("client-remote-profiles", f"it never connected over {name}{why}")
            else:
                findings.ok("client-remote-profiles", "WebSocket and Streamable HTTP")
            await probe.close()
    finally:
        sock.close()
    every = Probe(options, findings)
    every.sessions = [session for probe in probes for session in probe.sessions]
    every.start = probes[0].start if probes else every.start
    cannot_run = "; ".join(cannot) if len(cannot) == len(PROFILES) else ""
    report = every.report(shlex.join(argv), cannot_run, stderr, None, list(dict.fromkeys(notes)))
    extra = _remote_results(findings, report)
    report.results += extra
    if select is not None:
        report.results = [r for r in report.results if select(r.check.id)]
    return report


def _remote_results(found: Findings, report: Report) -> list[CheckResult]:
    out: list[CheckResult] = []
    for check in REMOTE_CHECKS:
        if check.id in found.failures:
            detail, line = found.failures[check.id]
            text = None if line is None else line.text()
            out.append(CheckResult(check, "failed", detail, text, found.warnings.get(check.id, [])))
        elif check.id in found.passes:
            out.append(CheckResult(check, "passed", found.passes[check.id][0]))
        else:
            why = "the client made no request after the server set its cookie"
            if check.id == "client-remote-session-header":
                why = "the client made no session-scoped POST (none over Streamable HTTP)"
            out.append(CheckResult(check, "not exercised", why))
    return out
