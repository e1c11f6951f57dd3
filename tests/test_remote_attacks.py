"""Issue 28's exposure attacks on real servers: `examples/echo_agent.py --listen 127.0.0.1:0
--token-file F` (uvicorn for WebSocket, hypercorn for Streamable HTTP), one process for the
module, stopped by SIGTERM (asgi_serving.listening_echo_agent). Each attack is a handful of
requests, each bounded by TIMEOUT, on 127.0.0.1 only:

- a foreign Host and a DNS-rebinding Host (a name that resolves to 127.0.0.1), Origin `null`
  and a foreign Origin, on the WebSocket upgrade and on POST: 403 before any upgrade;
- a missing and a wrong token: 401 with `WWW-Authenticate`, a JSON-RPC body on HTTP;
- a session hijack: principal B, knowing principal A's session id (and, over HTTP, A's
  connection id), can neither load, prompt nor change the mode of A's session, nor use A's
  connection; A's session is untouched and A still uses it.

The loopback-only default without a token (a non-loopback client address) is in
test_remote_auth.py, in-process, since this test can only connect from loopback.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgi_serving import listening_echo_agent

TIMEOUT = 10.0
A, B = "token-of-alice-1", "token-of-bob-2"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tokens = tmp_path_factory.mktemp("attacks") / "tokens"
    tokens.write_text(f"alice {A}\nbob {B}\n")
    with listening_echo_agent("--token-file", str(tokens)) as urls:
        yield urls


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


async def upgrade(url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """A raw WebSocket upgrade request (headers as given, Host included): the status, the
    response headers and the body the server answered with."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port_of(url)), TIMEOUT)
    try:
        lines = [
            "GET /acp HTTP/1.1",
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version: 13",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        got = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
        body = b""
        if int(status_line.split()[1]) != 101 and "content-length" in got:
            body = await asyncio.wait_for(reader.readexactly(int(got["content-length"])), TIMEOUT)
        return int(status_line.split()[1]), got, body
    finally:
        writer.close()


def local_host(url: str) -> str:
    return f"127.0.0.1:{port_of(url)}"


@pytest.mark.parametrize(
    ("extra", "status", "word"),
    [
        ({"Host": "evil.example"}, 403, "Host"),
        ({"Host": "rebind.attacker.example:{port}"}, 403, "Host"),  # DNS rebinding: resolves to 127.0.0.1
        ({"Origin": "null"}, 403, "Origin"),
        ({"Origin": "https://evil.example"}, 403, "Origin"),
        ({}, 401, "credentials"),  # no token
        ({"Authorization": "Bearer not-a-token"}, 401, "credentials"),
        ({"Authorization": f"Bearer {A}x"}, 401, "credentials"),
    ],
)
def test_websocket_upgrades_are_refused_before_the_upgrade(
    server: dict[str, str], extra: dict[str, str], status: int, word: str
) -> None:
    async def main() -> None:
        url = server["ws"]
        headers = {"Host": local_host(url), **({} if "Authorization" in extra or status == 401 else bearer(A))}
        headers.update({k: v.format(port=port_of(url)) for k, v in extra.items()})
        got, response_headers, body = await upgrade(url, headers)
        assert got == status, (got, body)
        message = json.loads(body)
        assert message["error"]["code"] == -32600 and word in message["error"]["data"]["details"]
        if status == 401:
            assert response_headers["www-authenticate"] == 'Bearer realm="acp"'
        good, _, _ = await upgrade(url, {"Host": local_host(url), **bearer(A)})
        assert good == 101  # and the server still serves

    asyncio.run(main())


@pytest.mark.parametrize(
    ("extra", "status", "word"),
    [
        ({"host": "evil.example"}, 403, "Host"),
        ({"host": "rebind.attacker.example:{port}"}, 403, "Host"),
        ({"origin": "null"}, 403, "Origin"),
        ({"origin": "http://evil.example:{port}"}, 403, "Origin"),
        ({}, 401, "credentials"),
        ({"authorization": "Bearer not-a-token"}, 401, "credentials"),
        ({"authorization": f"Basic {A}"}, 401, "credentials"),
    ],
)
def test_http_posts_are_refused_before_the_body(
    server: dict[str, str], extra: dict[str, str], status: int, word: str
) -> None:
    import httpx

    async def main() -> None:
        url = server["http"]
        headers = {} if "authorization" in extra or status == 401 else bearer(A)
        headers.update({k: v.format(port=port_of(url)) for k, v in extra.items()})
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            response = await client.post(url, json=INIT, headers=headers)
            assert response.status_code == status, response.text
            assert response.json()["error"]["code"] == -32600
            assert word in response.json()["error"]["data"]["details"]
            if status == 401:
                assert response.headers["www-authenticate"] == 'Bearer realm="acp"'
            ok = await client.post(url, json=INIT, headers={**bearer(A), "origin": f"http://localhost:{port_of(url)}"})
            assert ok.status_code == 200 and "acp-connection-id" in ok.headers
            await client.delete(url, headers={**bearer(A), "acp-connection-id": ok.headers["acp-connection-id"]})

    asyncio.run(main())


class Ws:
    """A raw JSON-RPC peer over one WebSocket: requests by id, notifications kept."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 1
        self.notes: list[dict[str, Any]] = []

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        msg_id, self.next_id = self.next_id, self.next_id + 1
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
        while True:
            message = json.loads(await asyncio.wait_for(self.ws.recv(), TIMEOUT))
            if message.get("id") == msg_id and "method" not in message:
                return message
            self.notes.append(message)


def test_principal_b_cannot_use_principal_as_session_over_websocket(server: dict[str, str]) -> None:
    import websockets

    async def main() -> None:
        url = server["ws"]
        async with websockets.connect(url, additional_headers=bearer(A), open_timeout=TIMEOUT) as raw_a:
            alice = Ws(raw_a)
            await alice.request("initialize", INIT["params"])
            session = (await alice.request("session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]["sessionId"]
            assert (await alice.request("session/prompt", {"sessionId": session, "prompt": [text("alice's secret")]}))[
                "result"
            ]["stopReason"] == "end_turn"
            async with websockets.connect(url, additional_headers=bearer(B), open_timeout=TIMEOUT) as raw_b:
                bob = Ws(raw_b)
                await bob.request("initialize", INIT["params"])
                for method, params in (
                    ("session/load", {"sessionId": session, "cwd": "/tmp", "mcpServers": []}),
                    ("session/prompt", {"sessionId": session, "prompt": [text("bob was here")]}),
                    ("session/set_mode", {"sessionId": session, "modeId": "code"}),
                ):
                    answer = await bob.request(method, params)
                    assert answer.get("error", {}).get("code") == -32002, (method, answer)
                assert not any("alice's secret" in json.dumps(note) for note in bob.notes)  # nothing replayed
            # alice's session is hers, unchanged: her history has no trace of bob
            async with websockets.connect(url, additional_headers=bearer(A), open_timeout=TIMEOUT) as raw_a2:
                again = Ws(raw_a2)
                await again.request("initialize", INIT["params"])
                loaded = await again.request("session/load", {"sessionId": session, "cwd": "/tmp", "mcpServers": []})
                assert loaded["result"]["modes"]["currentModeId"] == "ask"
                replay = json.dumps(again.notes)
                assert "alice's secret" in replay and "bob was here" not in replay

    asyncio.run(main())


def test_principal_b_cannot_use_principal_as_connection_or_session_over_http(server: dict[str, str]) -> None:
    import httpx

    async def main() -> None:
        url = server["http"]
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            first = await client.post(url, json=INIT, headers=bearer(A))
            cid = first.headers["acp-connection-id"]
            a = {**bearer(A), "acp-connection-id": cid}
            new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}
            async with client.stream("GET", url, headers={**a, "accept": "text/event-stream"}) as stream:
                assert (await client.post(url, json=new, headers=a)).status_code == 202
                session = await session_id_from(stream)
            # bob with alice's connection id (and her session id): the unknown-connection 404
            b = {**bearer(B), "acp-connection-id": cid, "acp-session-id": session}
            prompt = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [text("bob was here")]},
            }
            for method, kwargs in (
                ("POST", {"json": prompt}),
                ("GET", {"headers": {**b, "accept": "text/event-stream"}}),
                ("DELETE", {}),
            ):
                response = await client.request(method, url, **{"headers": b, **kwargs})
                assert response.status_code == 404, (method, response.text)
                assert "unknown Acp-Connection-Id" in response.json()["error"]["data"]["details"]
            # alice's connection still works after all that
            assert (
                await client.post(url, json=prompt | {"id": 3}, headers={**a, "acp-session-id": session})
            ).status_code == 202
            assert (await client.delete(url, headers=a)).status_code == 202

    asyncio.run(main())


async def session_id_from(stream: Any) -> str:
    async def first() -> str:
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                message = json.loads(line[6:])
                if "result" in message:
                    return str(message["result"]["sessionId"])
        raise AssertionError("the stream ended")

    return await asyncio.wait_for(first(), TIMEOUT)


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}
