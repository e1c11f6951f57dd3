"""Ours against ours, remotely (issue 21): the generated client's `connect_remote` against the
generated agent's `asgi_app`.

One `examples/echo_agent.py --listen 127.0.0.1:0` process for the module (uvicorn for
WebSocket, hypercorn for Streamable HTTP) runs `examples/echo_client.py --url` (with and
without `--reconnect`) and the conformance checks of `acp-codegen check-agent --url`, on
both URLs. Then the echo agent's `asgi_app`, in this event loop behind a middleware that sets
an affinity cookie and records every request (tests/asgi_serving.py), shows what the client
sends: HTTP/2 on every Streamable HTTP request, the cookie back on each request and upgrade,
reconnects included, and no hang with the connection and several session streams open.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import io
import json
import sys
from collections.abc import Awaitable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import client as gen_client
import pytest
from client import types

sys.path.insert(0, str(Path(__file__).resolve().parent))
from asgi_serving import (  # noqa: E402
    Affinity,
    bound_socket,
    cancelled_then_permission_turn,
    listening_echo_agent,
    serving,
)

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 30.0
T = TypeVar("T")

pytestmark = [
    pytest.mark.slow,
    # hypercorn 0.18, stopped with streams open, leaves an idle-timeout coroutine unawaited.
    pytest.mark.filterwarnings("ignore:coroutine 'TCPServer._idle_timeout' was never awaited"),
]


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, TIMEOUT)

    return asyncio.run(bounded())


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_e2e", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the echo agent's dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def listening() -> Iterator[dict[str, str]]:
    """`echo_agent.py --listen 127.0.0.1:0`: its URLs by profile; stopped by SIGTERM, cleanly."""
    with listening_echo_agent() as urls:
        yield urls


async def echo_scenario(url: str, reconnect: bool) -> tuple[int, str]:
    """`echo_client.py --url URL [--reconnect]`: its exit code and output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = await load_example("echo_client").amain([], url, reconnect=reconnect)
    return code, out.getvalue()


# -- against echo_agent.py --listen ------------------------------------------------------------
@pytest.mark.parametrize("reconnect", [False, True], ids=["once", "reconnect"])
@pytest.mark.parametrize("profile", ["ws", "http"])
def test_echo_client_passes_against_echo_agent_listen(listening: dict[str, str], profile: str, reconnect: bool) -> None:
    code, out = run(echo_scenario(listening[profile], reconnect))
    assert code == 0, out
    assert out.strip().splitlines()[-1] == ("10 passed, 0 failed" if reconnect else "9 passed, 0 failed"), out
    assert ("ok   reconnect + session/load: new connection, initialized, replayed" in out) == reconnect, out


@pytest.mark.parametrize(("profile", "name"), [("ws", "WebSocket"), ("http", "Streamable HTTP")])
def test_check_agent_url_finds_no_failure(listening: dict[str, str], profile: str, name: str) -> None:
    """What `acp-codegen check-agent --url URL --cancel-prompt slow` runs: no failure, every MUST
    exercised; skipped only the stdio rules and what the echo agent does not advertise."""
    from client.testing import Options, conformance_remote

    report = run(conformance_remote.check_url_async(listening[profile], Options(cancel_prompt="slow")))
    assert report.ok() and report.exit_code() == 0, str(report)
    assert not [r for r in report.results if r.status in ("failed", "not testable", "not exercised")], str(report)
    for check_id in conformance_remote.STDIO_ONLY:
        # the restart check is not applicable over any URL (the kit cannot restart a served agent)
        over = "a URL" if check_id == "info-load-after-restart" else name
        assert report.result(check_id).detail.startswith(f"not applicable over {over}"), str(report)
    assert report.result("cancel").detail.endswith("stopReason cancelled"), str(report)
    for check_id in ("session-load", "session-load-fresh", "session-modes", "prompt-resource"):
        assert report.result(check_id).status == "passed", str(report)


# -- the echo agent's asgi_app behind a recording middleware, in this event loop ---------------
@pytest.fixture(scope="module")
def echo_agent() -> ModuleType:
    return load_example("echo_agent")


@contextlib.asynccontextmanager
async def recorded(echo_agent: ModuleType, server: str) -> Any:
    """The echo agent's `asgi_app` (sessions shared by all connections) served by `server`
    behind `Affinity`; yields the middleware (its `requests`) and the port."""
    from agent.session_store import MemoryStore

    store = MemoryStore()
    inner = echo_agent.asgi_app(lambda: echo_agent.EchoAgent(store))
    app = Affinity(inner)
    sock = bound_socket()
    try:
        async with serving(server, sock, app):
            yield app, sock.getsockname()[1]
            # The client closed its connections (WebSocket close, DELETE): the server keeps none.
            for _ in range(100):
                if inner.connections == 0:
                    break
                await asyncio.sleep(0.01)
            assert inner.connections == 0
    finally:
        sock.close()
        await inner.aclose()


def test_websocket_upgrades_return_the_affinity_cookie_on_reconnect(echo_agent: ModuleType) -> None:
    async def scenario() -> tuple[int, str, Any]:
        async with recorded(echo_agent, "uvicorn") as (app, port):
            code, out = await echo_scenario(f"ws://127.0.0.1:{port}/acp", reconnect=True)
        return code, out, app

    code, out, app = run(scenario())
    assert code == 0, out
    assert [r["what"] for r in app.requests] == ["WS websocket", "WS websocket"]
    assert app.without_cookie() == ["WS websocket"]  # the first upgrade only: the cookie came on its answer


def test_streamable_http_is_http2_and_returns_the_cookie_on_every_request(echo_agent: ModuleType) -> None:
    """h2c to hypercorn on every POST, GET and DELETE; the cookie back from the second request
    on (reconnect included); per connection the connection stream, then the session's (before
    `session/load` on the new connection, which our server accepts); `Acp-Session-Id` on every
    POST about a session, our answers to the agent's requests included."""

    async def scenario() -> tuple[int, str, Any]:
        async with recorded(echo_agent, "hypercorn") as (app, port):
            code, out = await echo_scenario(f"http://127.0.0.1:{port}/acp", reconnect=True)
        return code, out, app

    code, out, app = run(scenario())
    assert code == 0 and out.strip().endswith("10 passed, 0 failed"), out
    assert {r["http_version"] for r in app.requests} == {"2"}
    assert app.without_cookie() == ["POST http"]  # initialize, before any Set-Cookie
    gets = [r for r in app.requests if r["method"] == "GET"]
    assert all(r["accept"] == "text/event-stream" and r["connection_id"] for r in gets)
    assert [(r["session_id"] is not None, r["status"]) for r in gets] == [(False, 200), (True, 200)] * 2
    assert [r["status"] for r in app.requests if r["method"] == "DELETE"] == [202, 202]
    sent = [(json.loads(r["body"]), r) for r in app.requests if r["method"] == "POST"]
    assert all(r["status"] in (200, 202) and r["content_type"] == "application/json" for _, r in sent)
    scoped = {"session/prompt", "session/cancel", "session/set_mode", "session/load"}
    for message, request in sent:
        if message.get("method") in scoped or "method" not in message:
            assert request["session_id"] == message.get("params", {}).get("sessionId", request["session_id"])
            assert request["session_id"] is not None, message
    assert sum("method" not in message for message, _ in sent) == 2  # fs/read_text_file, permission


class Recording(gen_client.Client):
    """Grants every permission with its first option."""

    async def session_update(self, params: types.SessionNotification) -> None:
        pass

    async def session_request_permission(
        self, params: types.RequestPermissionRequest
    ) -> types.RequestPermissionResponse:
        return types.RequestPermissionResponse(
            outcome=types.SelectedPermissionOutcome(option_id=params.options[0].option_id)
        )


def test_http2_with_session_streams_open_and_concurrent_turns_does_not_hang(echo_agent: ModuleType) -> None:
    """Three sessions (four SSE streams) and, at once on each, a slow turn that is cancelled,
    then a permission turn (the agent's request, our POSTed answer)."""

    async def scenario() -> list[tuple[str, str]]:
        async with recorded(echo_agent, "hypercorn") as (app, port):
            async with gen_client.connect_remote(Recording(), f"http://127.0.0.1:{port}/acp") as agent:
                proxy = agent.proxy
                await proxy.initialize(protocol_version=1, timeout=5)
                sessions = [(await proxy.session_new(cwd="/", mcp_servers=[], timeout=5)).session_id for _ in range(3)]

                results = await asyncio.gather(
                    *(cancelled_then_permission_turn(proxy, session) for session in sessions)
                )
            assert {r["http_version"] for r in app.requests} == {"2"}
            return results

    assert run(scenario()) == [("cancelled", "end_turn")] * 3
