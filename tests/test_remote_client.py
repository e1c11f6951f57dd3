"""The generated client's `connect_remote` (issue 21): WebSocket and Streamable HTTP.

Without a server: the package imports with the standard library alone and `connect_remote`
then names what to install; URLs, cookies and the SSE reader.

Against the official Python SDK's `acp.http.AcpServer` serving the SDK echo agent
(tests/sdk_remote_server.py), on real servers in this event loop: uvicorn for WebSocket,
hypercorn for Streamable HTTP over HTTP/2 (h2c). `examples/echo_client.py --url --reconnect`
runs the whole echo scenario, then reconnects and loads the session. What the SDK server
breaks, and the tests pin as such:
- over Streamable HTTP it refuses `session/load` on a new connection (POST 404 "Unknown
  session id"), so reconnect-and-load works over WebSocket only;
- it sends the `session/load` response on the session stream, not the connection stream (our
  client takes a response on any stream: the same-connection load step passes).
A minimal server laid out as the RFD says (`RfdServer`) checks the order of streams and POSTs
and the replay that comes on another stream than its answer; the TypeScript SDK's server runs
the scenario when `ACP_TS_SDK_NODE_MODULES` names its node_modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import client as gen_client
import pytest
from asgi_serving import cancelled_then_permission_turn
from client import remote_cookies, remote_options, types
from client.remote_sse import sse_data

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
# hypercorn 0.18, stopped with streams open, leaves an idle-timeout coroutine unawaited.
pytestmark = pytest.mark.filterwarnings("ignore:coroutine 'TCPServer._idle_timeout' was never awaited")
TIMEOUT = 30.0


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, TIMEOUT)

    return asyncio.run(bounded())


# -- without a server ---------------------------------------------------------------------------
def test_client_package_imports_with_the_stdlib_alone_and_names_the_extra() -> None:
    """-S: no site-packages, so neither websockets nor httpx; importing the package imports
    neither, and connect_remote says what to install."""
    code = f"""
import asyncio, sys
sys.path.insert(0, {str(ROOT / "generated")!r})
import client
assert "websockets" not in sys.modules and "httpx" not in sys.modules
class Quiet(client.Client):
    async def session_update(self, params): ...
    async def session_request_permission(self, params): ...
for url in ("ws://127.0.0.1:9/acp", "http://127.0.0.1:9/acp"):
    async def main():
        async with client.connect_remote(Quiet(), url):
            pass
    try:
        asyncio.run(main())
    except client.RemoteUnavailable as exc:
        print(exc)
"""
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    ws, http = result.stdout.strip().splitlines()
    assert "needs the 'websockets' package" in ws and "pip install websockets" in ws
    assert "needs the 'httpx' package" in http and "pip install 'httpx[http2]'" in http


@pytest.mark.parametrize("url", ["ftp://host/acp", "ws:///acp", "127.0.0.1:8000/acp"])
def test_a_url_that_is_no_remote_endpoint_is_refused_clearly(url: str) -> None:
    with pytest.raises(gen_client.RemoteUnavailable, match="give a ws://, wss://, http:// or https:// URL"):
        remote_options.profile_of(url)


def test_the_cookie_store_keeps_and_returns_cookies_per_host_path_and_scheme() -> None:
    jar = http.cookiejar.CookieJar()
    remote_cookies.store_cookies(
        jar,
        "ws://127.0.0.1:8000/acp",
        ["lb=backend-2; Path=/", "tls=only; Path=/; Secure", "deep=x; Path=/other"],
    )
    assert remote_cookies.cookie_header(jar, "http://127.0.0.1:8000/acp") == "lb=backend-2"
    assert remote_cookies.cookie_header(jar, "ws://127.0.0.1:8000/acp") == "lb=backend-2"
    assert remote_cookies.cookie_header(jar, "http://127.0.0.2:8000/acp") is None  # another host
    # A Secure cookie is sent over TLS only (wss:// stands for https://), a Path one below it only.
    assert remote_cookies.cookie_header(jar, "wss://127.0.0.1:8000/acp") == "lb=backend-2; tls=only"
    assert remote_cookies.cookie_header(jar, "ws://127.0.0.1:8000/other/acp") == "deep=x; lb=backend-2"
    assert remote_cookies.cookie_header(jar, "ws://127.0.0.1:8000/acp") == "lb=backend-2"
    remote_cookies.store_cookies(jar, "http://127.0.0.1:8000/acp", ["lb=gone; Path=/; Max-Age=0"])
    assert remote_cookies.cookie_header(jar, "http://127.0.0.1:8000/acp") is None


def test_sse_events_are_read_whatever_the_chunking_and_line_endings() -> None:
    raw = b': keep-alive\n\ndata: {"a":1}\n\nevent: message\nid: 7\ndata: {"b":\ndata: 2}\r\n\r\ndata:3\r\rdata: cut'
    want = [b'{"a":1}', b'{"b":\n2}', b"3"]  # the last event never ended: dropped

    async def read(parts: list[bytes]) -> list[bytes]:
        async def chunks() -> AsyncIterator[bytes]:
            for part in parts:
                yield part

        return [data async for data in sse_data(chunks())]

    async def every_split() -> None:
        for cut in range(1, len(raw)):
            assert await read([raw[:cut], raw[cut:]]) == want, cut
        assert await read([raw[i : i + 1] for i in range(len(raw))]) == want

    run(every_split())


# -- against the SDK's AcpServer -------------------------------------------------------------------
@pytest.fixture(scope="module")
def sdk_server() -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import sdk_remote_server

    return sdk_remote_server


def echo_client() -> Any:
    spec = importlib.util.spec_from_file_location("echo_client_example", ROOT / "examples" / "echo_client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.asynccontextmanager
async def served(sdk_server: Any, server: str, port: int = 0, app: Any = None) -> AsyncIterator[tuple[Any, int]]:
    sock = sdk_server.bound_socket(port)
    port = sock.getsockname()[1]
    app = app or sdk_server.make_app()
    try:
        async with sdk_server.serving(server, sock, app):
            yield app, port
    finally:
        sock.close()


async def echo_scenario(sdk_server: Any, server: str, scheme: str) -> tuple[str, Any]:
    out = io.StringIO()
    async with served(sdk_server, server) as (app, port):
        with contextlib.redirect_stdout(out):
            await echo_client().amain([], f"{scheme}://127.0.0.1:{port}/acp", reconnect=True)
    return out.getvalue(), app


class RecordingClient(gen_client.Client):
    """Keeps the agent's text chunks; grants every permission with its first option."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def session_update(self, params: types.SessionNotification) -> None:
        update = params.update
        if isinstance(update, types.SessionUpdateAgentMessageChunk) and isinstance(update.content, types.TextContent):
            self.texts.append(update.content.text)

    async def session_request_permission(
        self, params: types.RequestPermissionRequest
    ) -> types.RequestPermissionResponse:
        return types.RequestPermissionResponse(
            outcome=types.SelectedPermissionOutcome(option_id=params.options[0].option_id)
        )


def posts(app: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every POST the server got: (its JSON-RPC message, what the request carried)."""
    return [(json.loads(r["body"]), r) for r in app.requests if r["method"] == "POST"]


@pytest.mark.slow
def test_the_echo_scenario_over_websocket_on_uvicorn_with_reconnect_and_load(sdk_server: Any) -> None:
    out, app = run(echo_scenario(sdk_server, "uvicorn", "ws"))
    assert out.strip().endswith("10 passed, 0 failed"), out
    assert "ok   reconnect + session/load: new connection, initialized, replayed" in out
    # Two upgrades (the reconnect's too); the second sent back the cookie the first was given.
    assert [r["what"] for r in app.requests] == ["WS websocket", "WS websocket"]
    assert app.without_cookie() == ["WS websocket"]


@pytest.mark.slow
def test_the_echo_scenario_over_streamable_http_on_hypercorn_http2(sdk_server: Any) -> None:
    out, app = run(echo_scenario(sdk_server, "hypercorn", "http"))
    lines = out.strip().splitlines()
    assert lines[-1] == "9 passed, 1 failed", out
    assert "ok   session/load: replayed" in out  # its response came on the session stream
    # The SDK server's bug: session/load on a new connection is refused.
    assert 'FAIL reconnect + session/load: error -32603 HTTP 404: {"error": "Unknown session id"}' in out
    assert {r["http_version"] for r in app.requests} == {"2"}
    assert app.without_cookie() == ["POST http"]  # only the very first request, before any Set-Cookie
    gets = [r for r in app.requests if r["method"] == "GET"]
    assert gets and all(r["accept"] == "text/event-stream" and r["connection_id"] for r in gets)
    # Per connection: its stream, then the session's (after session/new; before session/load on
    # the new connection, which the SDK server refuses: the session is unknown there).
    assert [(r["session_id"] is not None, r["status"]) for r in gets] == [
        (False, 200),
        (True, 200),
        (False, 200),
        (True, 404),
    ]
    deletes = [r for r in app.requests if r["method"] == "DELETE"]
    assert len(deletes) == 2 and all(r["connection_id"] for r in deletes)  # one per connection
    sent = posts(app)
    assert all(r["content_type"] == "application/json" for _, r in sent)
    for message, request in sent:
        # initialize opens a connection (two: the reconnect's); everything else names its own.
        assert (request["connection_id"] is None) == (message.get("method") == "initialize"), message
        scoped = message.get("method") in {"session/prompt", "session/cancel", "session/set_mode", "session/load"}
        answer = "method" not in message  # our answers to fs/read_text_file, request_permission
        if scoped or answer:
            assert request["session_id"] is not None, message
    assert sum("method" not in message for message, _ in sent) == 2  # both answers were posted


@pytest.mark.slow
def test_http2_with_many_open_streams_and_posts_does_not_hang(sdk_server: Any) -> None:
    """Three sessions (four SSE streams) and concurrent prompts, cancels and permission answers
    on one connection: the arrangement that stalls httpcore's HTTP/2 when they share one TCP
    connection (see remote_http._make_clients)."""

    async def scenario() -> list[tuple[str, str]]:
        async with served(sdk_server, "hypercorn") as (app, port):
            url = f"http://127.0.0.1:{port}/acp"
            async with gen_client.connect_remote(
                RecordingClient(), url, headers={"Authorization": "Bearer t"}
            ) as agent:
                proxy = agent.proxy
                await proxy.initialize(protocol_version=1, timeout=5)
                sessions = [(await proxy.session_new(cwd="/", mcp_servers=[], timeout=5)).session_id for _ in range(3)]

                results: list[tuple[str, str]] = []
                for _ in range(2):
                    results += await asyncio.gather(
                        *(cancelled_then_permission_turn(proxy, session) for session in sessions)
                    )
        assert {r["authorization"] for r in app.requests} == {"Bearer t"}  # headers= on every request
        return results

    assert run(scenario()) == [("cancelled", "end_turn")] * 6


@pytest.mark.slow
@pytest.mark.parametrize(("server", "scheme"), [("uvicorn", "ws"), ("hypercorn", "http")])
def test_after_a_server_restart_the_client_reconnects(sdk_server: Any, server: str, scheme: str) -> None:
    """The server goes away mid-turn: the connection ends and the pending prompt fails with
    ConnectionClosed. It comes back on the same port (the sessions kept, as a persisted store
    would): reconnect, initialize, session/load. The SDK's Streamable HTTP refuses that load
    (404, its bug): there the test checks the new connection works with a new session."""

    async def scenario() -> tuple[str, list[str]]:
        client = RecordingClient()
        server_context = served(sdk_server, server)
        _, port = await server_context.__aenter__()
        url = f"{scheme}://127.0.0.1:{port}/acp"
        async with gen_client.connect_remote(client, url) as agent:
            await agent.proxy.initialize(protocol_version=1, timeout=5)
            session = (await agent.proxy.session_new(cwd="/", mcp_servers=[], timeout=5)).session_id
            await agent.proxy.session_prompt(session_id=session, prompt=[types.TextContent(text="before")], timeout=5)
            turn = asyncio.ensure_future(
                agent.proxy.session_prompt(session_id=session, prompt=[types.TextContent(text="slow")], timeout=10)
            )
            while not any(text.startswith("slow") for text in client.texts):
                await asyncio.sleep(0.01)
            await server_context.__aexit__(None, None, None)  # the server goes away
            with pytest.raises(gen_client.ConnectionClosed):
                await turn
            await asyncio.wait_for(agent.wait_closed(), 5)
            assert agent.closed
            async with served(sdk_server, server, port):  # and comes back
                client.texts.clear()
                if scheme == "ws":
                    init = types.InitializeRequest(protocol_version=1)
                    load = types.LoadSessionRequest(session_id=session, cwd="/", mcp_servers=[])
                    await gen_client.reconnect_and_load(agent, init, load, timeout=5)
                    return "loaded", list(client.texts)
                await agent.reconnect()
                await agent.proxy.initialize(protocol_version=1, timeout=5)
                with pytest.raises(gen_client.RequestError, match="HTTP 404"):
                    await agent.proxy.session_load(session_id=session, cwd="/", mcp_servers=[], timeout=5)
                fresh = (await agent.proxy.session_new(cwd="/", mcp_servers=[], timeout=5)).session_id
                await agent.proxy.session_prompt(session_id=fresh, prompt=[types.TextContent(text="after")], timeout=5)
                return "new session", list(client.texts)

    outcome, texts = run(scenario())
    if scheme == "ws":
        assert outcome == "loaded" and texts[0] == "before" and texts[1].startswith("slow 1/20")
    else:
        assert (outcome, texts) == ("new session", ["after"])


class RfdServer:
    """A minimal Streamable HTTP server as the RFD lays it out, answering from a script: the
    answers to session/new and session/load on the connection stream, the rest on the
    session's. session/load replays two updates on the session stream, written *after* its
    answer went out on the connection stream: the worst order two streams can give."""

    def __init__(self) -> None:
        self.streams: dict[str | None, asyncio.Queue[bytes | None]] = {}
        self.log: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        session = headers.get("acp-session-id")
        if scope["method"] == "GET":
            self.log.append(f"GET {session}")
            queue = self.streams.setdefault(session, asyncio.Queue())
            start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            await send(start)
            await send({"type": "http.response.body", "body": b": open\n\n", "more_body": True})
            while (event := await queue.get()) is not None:
                await send({"type": "http.response.body", "body": b"data: " + event + b"\n\n", "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["method"] == "DELETE":
            for queue in self.streams.values():
                queue.put_nowait(None)
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        request = json.loads(body)
        self.log.append(f"POST {request.get('method', 'answer')} {session}")
        if request.get("method") == "initialize":
            answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"protocolVersion": 1}}
            start = {"type": "http.response.start", "status": 200, "headers": [(b"acp-connection-id", b"c1")]}
            await send(start)
            await send({"type": "http.response.body", "body": json.dumps(answer).encode()})
            return
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        if request.get("method") == "session/new":
            self.emit(None, {"jsonrpc": "2.0", "id": request["id"], "result": {"sessionId": "s1"}})
        elif request.get("method") == "session/load":
            self.emit(None, {"jsonrpc": "2.0", "id": request["id"], "result": {}})
            await asyncio.sleep(0.01)
            for text in ("one", "two"):
                update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
                self.emit(
                    "s1",
                    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": update}},
                )

    def emit(self, stream: str | None, message: dict[str, Any]) -> None:
        self.streams[stream].put_nowait(json.dumps(message).encode())


@pytest.mark.slow
def test_streamable_http_the_rfd_way_session_load_replays_before_its_answer(sdk_server: Any) -> None:
    """The session stream is opened before session/load is posted, the load carries
    Acp-Session-Id, and its replay, on another stream and a little late, is still seen before
    the answer (remote_http.CROSS_STREAM_GRACE)."""

    async def scenario() -> tuple[list[str], list[str]]:
        rfd = RfdServer()
        client = RecordingClient()
        async with served(sdk_server, "hypercorn", app=rfd) as (_, port):
            async with gen_client.connect_remote(client, f"http://127.0.0.1:{port}/acp") as agent:
                await agent.proxy.initialize(protocol_version=1, timeout=5)
                assert agent.connection_id == "c1"
                session = (await agent.proxy.session_new(cwd="/", mcp_servers=[], timeout=5)).session_id
                await agent.proxy.session_load(session_id=session, cwd="/", mcp_servers=[], timeout=5)
                texts = list(client.texts)
        return rfd.log, texts

    log, texts = run(scenario())
    assert texts == ["one", "two"]
    assert log == ["POST initialize None", "GET None", "POST session/new None", "GET s1", "POST session/load s1"]


@pytest.mark.slow
def test_the_conformance_checks_run_over_websocket(sdk_server: Any) -> None:
    """What `acp-codegen check-agent --url` runs: every check on a fresh connection; the
    stdio-only ones skipped as not applicable."""
    from client.testing import Options, conformance_remote

    async def scenario() -> Any:
        async with served(sdk_server, "uvicorn") as (_, port):
            return await conformance_remote.check_url_async(f"ws://127.0.0.1:{port}/acp", Options(timeout=5))

    report = run(scenario())
    assert report.ok(), str(report)
    for check_id in conformance_remote.STDIO_ONLY:
        result = report.result(check_id)
        over = "a URL" if check_id == "info-load-after-restart" else "WebSocket"  # no restart over a URL
        assert result.status == "skipped" and result.detail.startswith(f"not applicable over {over}")
    others = [r for r in report.results if r.check.id not in conformance_remote.STDIO_ONLY]
    assert not [r for r in others if r.status in ("failed", "not testable")], str(report)
    assert sum(r.status == "passed" for r in others) >= 25, str(report)


def test_check_url_refuses_a_url_nothing_listens_on() -> None:
    from client.testing import conformance_remote

    with pytest.raises(gen_client.RemoteUnavailable, match="cannot reach 127.0.0.1:9"):
        conformance_remote.check_url("ws://127.0.0.1:9/acp")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "ws://127.0.0.1:9/acp", "--", "python", "agent.py"], "either --url or an agent command"),
        (["--url", "ftp://127.0.0.1/acp"], "is no ws://, wss://, http:// or https:// URL"),
    ],
)
def test_cli_check_agent_url_misuse_exits_2_before_generating(tmp_path: Path, args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from codegen.cli import app

    result = CliRunner().invoke(app, ["check-agent", *args], env={"ACP_CODEGEN_CACHE": str(tmp_path)})
    assert result.exit_code == 2 and message in result.output
    assert not list(tmp_path.iterdir())


# -- against the TypeScript SDK's AcpServer (when its node_modules are given) ---------------------
TS_SDK = os.environ.get("ACP_TS_SDK_NODE_MODULES")  # a node_modules with @agentclientprotocol/sdk 2.4 and ws


@pytest.mark.slow
@pytest.mark.skipif(not TS_SDK or shutil.which("node") is None, reason="set ACP_TS_SDK_NODE_MODULES (and have node)")
@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_the_echo_scenario_against_the_typescript_sdk_server(tmp_path: Path, scheme: str) -> None:
    """tests/ts_sdk_remote_server.mjs: HTTP/1.1 only, so Streamable HTTP falls back from h2c;
    its server accepts session/load on a new connection, so reconnect-and-load passes on both."""
    assert TS_SDK is not None
    script = tmp_path / "server.mjs"
    shutil.copy(ROOT / "tests" / "ts_sdk_remote_server.mjs", script)
    (tmp_path / "node_modules").symlink_to(Path(TS_SDK).resolve())
    server = subprocess.Popen(["node", str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = run(echo_client().amain([], f"{scheme}://127.0.0.1:{port}/acp", reconnect=True))
        assert code == 0 and out.getvalue().strip().endswith("10 passed, 0 failed"), out.getvalue()
    finally:
        server.terminate()
        server.wait(10)


def test_websocket_frames_binary_ignored_pretty_json_read_cookies_and_connection_id_kept() -> None:
    """A plain websockets server: a binary frame is skipped (the RFD), a pretty-printed JSON
    frame is one message, a pre-seeded cookie goes on the upgrade, and the upgrade response's
    Acp-Connection-Id and Set-Cookie are kept."""
    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosed

    seen: dict[str, Any] = {}

    def process_request(connection: Any, request: Any) -> None:
        seen["cookie"] = request.headers.get("Cookie")

    def process_response(connection: Any, request: Any, response: Any) -> Any:
        response.headers["Acp-Connection-Id"] = "conn-7"
        response.headers["Set-Cookie"] = "lb=b2; Path=/"
        return response

    async def handler(socket: Any) -> None:
        request = json.loads(await socket.recv())
        await socket.send(b"\x00 not a message")
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"protocolVersion": 1}}
        await socket.send(json.dumps(answer, indent=2))
        try:  # a frame taken for a message would have been answered (-32700)
            seen["answered"] = await asyncio.wait_for(socket.recv(), 0.3)
        except (asyncio.TimeoutError, ConnectionClosed):
            seen["answered"] = None

    async def scenario() -> tuple[int, str | None, str | None]:
        jar = http.cookiejar.CookieJar()
        remote_cookies.store_cookies(jar, "http://127.0.0.1/", ["seed=1; Path=/"])
        async with serve(
            handler, "127.0.0.1", 0, process_request=process_request, process_response=process_response
        ) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            async with gen_client.connect_remote(RecordingClient(), f"ws://127.0.0.1:{port}/acp", cookies=jar) as agent:
                answer = await agent.proxy.initialize(protocol_version=1, timeout=5)
                await asyncio.sleep(0.4)
                return answer.protocol_version, agent.connection_id, remote_cookies.cookie_header(jar, "ws://127.0.0.1/")

    version, connection_id, cookies = run(scenario())
    assert (version, connection_id) == (1, "conn-7")
    assert cookies is not None and sorted(cookies.split("; ")) == ["lb=b2", "seed=1"]
    assert seen["cookie"] == "seed=1"
    assert seen["answered"] is None
