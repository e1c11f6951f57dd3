"""Who may use `asgi_app` (issue 28 §1-§3), driven in-process through ASGI messages: Host and
Origin checks (403 before any upgrade or body), the loopback-only default without an
authentication hook (a fake non-loopback client address), bearer tokens (401 with
`WWW-Authenticate` and a JSON-RPC body), the principal reaching the connection's agent, and a
Streamable HTTP connection id that is useless to another principal. The same attacks on real
servers (uvicorn, hypercorn) are in test_remote_attacks.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import agent
import pytest
from agent import types as at
from agent.principal import LOCAL_PRINCIPAL, Principal

T = TypeVar("T")
TIMEOUT = 10.0
JSON = (b"content-type", b"application/json")
INIT = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}).encode()


def run(coro: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro(), TIMEOUT)

    return asyncio.run(bounded())


class Who(agent.Agent):
    """Records the principal it had when its first message arrived."""

    seen: list[Principal] = []

    async def initialize(self, params: at.InitializeRequest) -> at.InitializeResponse:
        Who.seen.append(self.principal)
        return at.InitializeResponse(protocol_version=1)

    async def authenticate(self, params: at.AuthenticateRequest) -> at.AuthenticateResponse:
        return at.AuthenticateResponse()

    async def session_new(self, params: at.NewSessionRequest) -> at.NewSessionResponse:
        return at.NewSessionResponse(session_id="s1")

    async def session_cancel(self, params: at.CancelNotification) -> None:
        return None

    async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
        return at.PromptResponse(stop_reason="end_turn")


def scope(
    kind: str,
    headers: dict[str, str],
    client: tuple[str, int] | None = ("127.0.0.1", 50000),
    method: str = "POST",
) -> dict[str, Any]:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    out: dict[str, Any] = {"type": kind, "path": "/acp", "headers": raw, "query_string": b""}
    if kind == "http":
        out["method"] = method
    else:
        out["extensions"] = {"websocket.http.response": {}}
        out["subprotocols"] = []
    if client is not None:
        out["client"] = client
    return out


async def call(app: agent.AsgiApp, sc: dict[str, Any], body: bytes = INIT) -> tuple[list[dict[str, Any]], bool]:
    """Run one ASGI call; returns what the app sent and whether it read the request body."""
    sent: list[dict[str, Any]] = []
    read = False
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal read, first
        if sc["type"] == "websocket":
            if first:
                first = False
                return {"type": "websocket.connect"}
            await asyncio.sleep(TIMEOUT)  # a client that says nothing more
            return {"type": "websocket.disconnect", "code": 1000}
        if not read:
            read = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(TIMEOUT)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    task = asyncio.ensure_future(app(sc, receive, send))
    if sc["type"] == "websocket":  # an accepted socket stays open: stop once it answered
        while not sent:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        await app.aclose()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    else:
        await task
    return sent, read


def answer(sent: list[dict[str, Any]]) -> tuple[int, dict[str, str], Any]:
    start, body = sent[0], sent[1]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, json.loads(body["body"]) if body["body"] else None


LOOPBACK = {"host": "127.0.0.1:8000", "content-type": "application/json"}


@pytest.mark.parametrize(
    ("headers", "word"),
    [
        ({"host": "evil.example"}, "Host"),
        ({"host": "rebound.attacker.example:8000"}, "Host"),  # a DNS-rebinding name for 127.0.0.1
        ({"host": "127.0.0.1.evil.example:8000"}, "Host"),
        ({"host": "localhost:8000", "origin": "null"}, "Origin"),
        ({"host": "localhost:8000", "origin": "https://evil.example"}, "Origin"),
        ({"host": "localhost:8000", "origin": "http://localhost.evil.example:8000"}, "Origin"),
    ],
)
@pytest.mark.parametrize("kind", ["http", "websocket"])
def test_foreign_host_and_origin_get_403_before_any_upgrade_or_body(
    kind: str, headers: dict[str, str], word: str
) -> None:
    async def main() -> None:
        app = agent.asgi_app(Who)
        sent, read = await call(app, scope(kind, {**headers, "content-type": "application/json"}))
        prefix = "websocket.http.response" if kind == "websocket" else "http.response"
        assert [m["type"] for m in sent] == [f"{prefix}.start", f"{prefix}.body"]
        status, _, body = answer(sent)
        assert status == 403
        assert body["error"]["code"] == -32600 and word in body["error"]["data"]["details"]
        assert ("allowed_hosts" if word == "Host" else "allowed_origins") in body["error"]["data"]["details"]
        assert not read and app.connections == 0

    run(main)


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "127.0.0.1:8000"},
        {"host": "localhost"},
        {"host": "[::1]:9"},
        {"host": "localhost:8000", "origin": "http://localhost:3000"},
        {"host": "127.0.0.1:1", "origin": "https://127.0.0.1"},
        {},  # no Host at all (an in-process caller)
    ],
)
def test_loopback_hosts_and_origins_pass(headers: dict[str, str]) -> None:
    async def main() -> None:
        app = agent.asgi_app(Who)
        sent, _ = await call(app, scope("http", {**headers, "content-type": "application/json"}))
        assert answer(sent)[0] == 200
        await app.aclose()

    run(main)


def test_allowed_hosts_and_origins_are_configurable_with_port_wildcards() -> None:
    async def main() -> None:
        app = agent.asgi_app(Who, allowed_hosts=["agent.example:*"], allowed_origins=["https://ide.example:8443"])
        ok = {"host": "agent.example:443", "origin": "https://ide.example:8443", **LOOPBACK}
        ok["host"] = "agent.example:443"
        assert answer((await call(app, scope("http", ok)))[0])[0] == 200
        for bad in (
            {**ok, "host": "127.0.0.1:8000"},  # the list replaces the loopback default
            {**ok, "origin": "https://ide.example:9999"},
            {**ok, "host": "agent.example:x"},
        ):
            assert answer((await call(app, scope("http", bad)))[0])[0] == 403, bad
        await app.aclose()

    run(main)


@pytest.mark.parametrize("kind", ["http", "websocket"])
def test_without_a_hook_only_loopback_clients_are_served(kind: str) -> None:
    async def main() -> None:
        app = agent.asgi_app(Who)
        sent, read = await call(app, scope(kind, LOOPBACK, client=("203.0.113.7", 4242)))
        status, _, body = answer(sent)
        assert status == 403 and not read
        assert "allow_unauthenticated=True" in body["error"]["data"]["details"]
        assert "authenticate=" in body["error"]["data"]["details"]
        # IPv4-mapped loopback is loopback; the switch lets anyone in
        for client, app2 in (
            (("::ffff:127.0.0.1", 1), agent.asgi_app(Who)),
            (("203.0.113.7", 4242), agent.asgi_app(Who, allow_unauthenticated=True)),
        ):
            sent, _ = await call(app2, scope(kind, LOOPBACK, client=client))
            assert sent[0]["type"] in ("http.response.start", "websocket.accept"), sent
            if kind == "http":
                assert answer(sent)[0] == 200
            await app2.aclose()

    run(main)


def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text("# who may connect\nalice s3cret-a\nalice s3cret-a2\n\nbob s3cret-b\nanon-token-xyz\n")
    return path


def test_bearer_tokens_from_a_file_each_its_own_principal_never_named_by_its_secret(tmp_path: Path) -> None:
    tokens = agent.BearerTokens.from_file(tokens_file(tmp_path))

    def who(header: str | None) -> Principal | None:
        headers = {} if header is None else {"authorization": header}
        return tokens(agent.AuthRequest("http", "POST", "/acp", headers, {}, None, ()))

    alice, bob, anon = who("Bearer s3cret-a"), who("bearer s3cret-b"), who("Bearer anon-token-xyz")
    assert alice is not None and alice.id == "token:alice"
    assert who("Bearer s3cret-a2") == alice  # rotation: the old and the new token, one principal
    assert bob is not None and bob.id == "token:bob"
    assert anon is not None and anon.id.startswith("token:sha256:") and "anon-token-xyz" not in anon.id
    for bad in (None, "Bearer", "Bearer s3cret", "Basic s3cret-a", "s3cret-a", "Bearer S3CRET-A", "Bearer s3cret-ab"):
        assert who(bad) is None, bad


def test_bearer_tokens_refuse_a_bad_file_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n\n")
    with pytest.raises(ValueError, match="holds no token"):
        agent.BearerTokens.from_file(empty)
    with pytest.raises(ValueError, match="cannot read the token file"):
        agent.BearerTokens.from_file(tmp_path / "missing")
    three = tmp_path / "three"
    three.write_text("a b c\n")
    with pytest.raises(ValueError, match=r"three:1: expected `TOKEN` or `NAME TOKEN`"):
        agent.BearerTokens.from_file(three)
    monkeypatch.setenv("ACP_TOKENS", "t1, t2")
    tokens = agent.BearerTokens.from_env()
    request = agent.AuthRequest("http", "POST", "/acp", {"authorization": "Bearer t2"}, {}, None, ())
    assert tokens(request) is not None
    monkeypatch.setenv("ACP_TOKENS", "")
    with pytest.raises(ValueError, match="ACP_TOKENS holds no token"):
        agent.BearerTokens.from_env()


@pytest.mark.parametrize("kind", ["http", "websocket"])
@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic YWxpY2U6cw=="])
def test_missing_or_wrong_token_gets_401_with_a_challenge_before_any_body(
    kind: str, header: str | None, tmp_path: Path
) -> None:
    async def main() -> None:
        app = agent.asgi_app(Who, authenticate=agent.BearerTokens.from_file(tokens_file(tmp_path)))
        headers = dict(LOOPBACK) if header is None else {**LOOPBACK, "authorization": header}
        sent, read = await call(app, scope(kind, headers))
        status, response_headers, body = answer(sent)
        assert status == 401 and response_headers["www-authenticate"] == 'Bearer realm="acp"'
        assert body == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": "Invalid request",
                "data": {"details": "missing or invalid credentials"},
            },
        }
        assert not read and app.connections == 0

    run(main)


@pytest.mark.parametrize("kind", ["http", "websocket"])
def test_the_principal_is_the_agents_before_its_first_message(kind: str, tmp_path: Path) -> None:
    async def main() -> None:
        Who.seen = []
        app = agent.asgi_app(Who, authenticate=agent.BearerTokens.from_file(tokens_file(tmp_path)))
        sc = scope(kind, {**LOOPBACK, "authorization": "Bearer s3cret-b"}, client=("198.51.100.2", 1))
        if kind == "http":
            sent, _ = await call(app, sc)
            assert answer(sent)[0] == 200
        else:
            sent: list[dict[str, Any]] = []
            inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            inbox.put_nowait({"type": "websocket.connect"})
            inbox.put_nowait({"type": "websocket.receive", "text": INIT.decode()})

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            task = asyncio.ensure_future(app(sc, inbox.get, send))
            while len(sent) < 2:
                await asyncio.sleep(0.01)
            assert sent[0]["type"] == "websocket.accept" and '"result"' in sent[1]["text"]
            inbox.put_nowait({"type": "websocket.disconnect", "code": 1000})
            await task
        assert [p.id for p in Who.seen] == ["token:bob"]
        await app.aclose()

    run(main)


def test_async_hooks_and_failing_hooks() -> None:
    async def hook(request: agent.AuthRequest) -> Principal | None:
        await asyncio.sleep(0)
        return Principal("team:x") if request.query.get("key") == ["k"] else None

    def broken(request: agent.AuthRequest) -> Principal | None:
        raise RuntimeError("the identity service is down")

    async def main() -> None:
        app = agent.asgi_app(Who, authenticate=hook)
        sc = scope("http", LOOPBACK)
        sc["query_string"] = b"key=k"
        assert answer((await call(app, sc))[0])[0] == 200
        sc["query_string"] = b"key=no"
        assert answer((await call(app, sc))[0])[0] == 401
        await app.aclose()
        sent, read = await call(agent.asgi_app(Who, authenticate=broken), scope("http", LOOPBACK))
        status, _, body = answer(sent)
        assert status == 500 and body["error"]["code"] == -32603 and not read

    run(main)


def test_a_connection_id_is_useless_to_another_principal(tmp_path: Path) -> None:
    """B knows A's Acp-Connection-Id: POST, GET and DELETE on it get the unknown-id 404, and
    A's connection goes on."""

    async def main() -> None:
        app = agent.asgi_app(Who, authenticate=agent.BearerTokens.from_file(tokens_file(tmp_path)))
        a = {**LOOPBACK, "authorization": "Bearer s3cret-a"}
        sent, _ = await call(app, scope("http", a))
        status, headers, _ = answer(sent)
        assert status == 200
        cid = headers["acp-connection-id"]
        new = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
        b = {**LOOPBACK, "authorization": "Bearer s3cret-b", "acp-connection-id": cid}
        for method, extra in (("POST", {}), ("GET", {"accept": "text/event-stream"}), ("DELETE", {})):
            sent, _ = await call(app, scope("http", {**b, **extra}, method=method), new.encode())
            status, _, body = answer(sent)
            assert status == 404 and "unknown Acp-Connection-Id" in body["error"]["data"]["details"], method
        # alice's rotated token is alice: her connection is hers with either token
        a2 = {**LOOPBACK, "authorization": "Bearer s3cret-a2", "acp-connection-id": cid}
        sent, _ = await call(app, scope("http", a2), new.encode())
        assert answer(sent)[0] == 202 and app.connections == 1
        await app.aclose()

    run(main)


def test_unauthenticated_loopback_connections_belong_to_the_local_user() -> None:
    async def main() -> None:
        Who.seen = []
        app = agent.asgi_app(Who)
        assert answer((await call(app, scope("http", LOOPBACK)))[0])[0] == 200
        assert Who.seen == [LOCAL_PRINCIPAL]
        await app.aclose()

    run(main)
