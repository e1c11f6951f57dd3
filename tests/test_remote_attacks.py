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

- slowloris: half-sent request heads, even trickled byte by byte, are closed within
  `--head-timeout` on both servers; a POST body trickled byte by byte gets 408 at
  `--body-timeout` on both, and the server goes on serving;
- large deflated frames: permessage-deflate is not negotiated, a deflated frame (15 MiB that
  shrink to 15 KB) is refused, and so is a frame over the message limit; the server's RSS stays;
- large messages from many WebSockets at once: the server's RSS stays under a bound computed from
  its budgets (its own server, to measure), while a legitimate 7 MiB prompt goes through;
- a connection flood of bare `initialize` POSTs (more than the per-client cap) locks nobody out;
- an SSE stream flood (429 past the cap), a session flood and a pending-handler flood (-32000 past
  the cap, under each request's id): each connection goes on serving;
- a Streamable HTTP client that vanished while the agent waited on its permission answer is reaped;
- half-open connections: a WebSocket that stops answering pings is closed; every accepted socket
  of both servers has TCP keepalive on (a peer that vanished without a FIN is found by the kernel).

The loopback-only default without a token (a non-loopback client address) is in
test_remote_auth.py, in-process, since this test can only connect from loopback; the ConnectionClosed
that a reaped client's pending request raises in the agent is in test_remote_limits.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgi_serving import listening_echo_agent, port_of, ws_frame

TIMEOUT = 10.0
A, B = "token-of-alice-1", "token-of-bob-2"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
CID = "acp-connection-id"
NEW = {"cwd": "/tmp", "mcpServers": []}
HEAD_TIMEOUT, PING, HTTP_IDLE, BODY = 1.0, 2.0, 3.0, 1.0  # the server's, short so the attacks end soon

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tokens = tmp_path_factory.mktemp("attacks") / "tokens"
    tokens.write_text(f"alice {A}\nbob {B}\n")
    timeouts = ("--head-timeout", str(HEAD_TIMEOUT), "--ping", str(PING), "--http-idle-timeout", str(HTTP_IDLE))
    # The floods below are about the caps (a thousand sessions on one connection): the rates of
    # sessions and connections, which would only slow them down, are test_remote_fairness.py's.
    options = (*timeouts, "--body-timeout", str(BODY), "--rate-limits", "off")
    with listening_echo_agent("--token-file", str(tokens), *options) as urls:
        yield urls


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


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


# -- resource attacks --------------------------------------------------------------------------
def rss_kib(pid: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def raw_websocket(
    url: str, extra: dict[str, str] | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    """An upgraded raw socket (with alice's token): reader, writer, the response head."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port_of(url)), TIMEOUT)
    lines = [
        "GET /acp HTTP/1.1",
        f"Host: {local_host(url)}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        f"Authorization: Bearer {A}",
        *(f"{k}: {v}" for k, v in (extra or {}).items()),
    ]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)).decode("latin-1")
    assert head.startswith("HTTP/1.1 101"), head
    return reader, writer, head


async def frames_until_eof(reader: asyncio.StreamReader, limit: float) -> list[int]:
    """The opcodes of the server's frames until it closes the socket (within `limit` seconds)."""
    opcodes: list[int] = []

    async def read() -> None:
        while True:
            first = await reader.read(2)
            if len(first) < 2:
                return
            n = first[1] & 0x7F
            if n == 126:
                n = int.from_bytes(await reader.readexactly(2), "big")
            elif n == 127:
                n = int.from_bytes(await reader.readexactly(8), "big")
            await reader.readexactly(n)
            opcodes.append(first[0] & 0x0F)

    await asyncio.wait_for(read(), limit)
    return opcodes


def test_slowloris_heads_are_closed_within_the_head_timeout(server: dict[str, str]) -> None:
    """20 half-sent heads per server, each trickling a byte every 0.2 s: all closed at the head
    timeout (the bound allows for a loaded machine), and a good client is served meanwhile."""
    import httpx

    async def loris(url: str) -> bool:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port_of(url)), TIMEOUT)
        writer.write(f"POST /acp HTTP/1.1\r\nHost: {local_host(url)}\r\nX-Slow: ".encode())
        try:
            for _ in range(int(TIMEOUT / 0.2)):
                writer.write(b"a")
                await writer.drain()
                try:
                    if await asyncio.wait_for(reader.read(1024), 0.2) == b"":
                        return True
                except asyncio.TimeoutError:
                    continue
            return False
        except ConnectionError:
            return True  # closed under the writer
        finally:
            writer.close()

    async def main() -> None:
        lorises = [loris(url) for url in (server["ws"], server["http"]) for _ in range(20)]
        waiting = asyncio.gather(*lorises)
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            ok = await client.post(server["http"], json=INIT, headers=bearer(A))
            assert ok.status_code == 200
            await client.delete(
                server["http"], headers={**bearer(A), "acp-connection-id": ok.headers["acp-connection-id"]}
            )
        assert all(await waiting)

    asyncio.run(main())


def test_deflated_and_oversize_frames_are_refused_and_the_server_stays_small(server: dict[str, str]) -> None:
    import websockets

    bomb = zlib.compressobj(wbits=-15)
    deflated = bomb.compress(b" " * (15 * 1024 * 1024)) + bomb.flush(zlib.Z_SYNC_FLUSH)
    deflated = deflated[:-4]  # permessage-deflate drops the sync flush's 00 00 ff ff
    assert len(deflated) < 32 * 1024

    async def main() -> None:
        before = rss_kib(server["pid"])
        # the client offers deflate (websockets does by default): the server does not take it
        async with websockets.connect(server["ws"], additional_headers=bearer(A), open_timeout=TIMEOUT) as ws:
            assert ws.response is not None and "sec-websocket-extensions" not in ws.response.headers
        for _ in range(5):  # a compressed frame anyway: a protocol error, never inflated
            offer = {"Sec-WebSocket-Extensions": "permessage-deflate; client_max_window_bits"}
            reader, writer, head = await raw_websocket(server["ws"], offer)
            assert "sec-websocket-extensions" not in head.lower()
            writer.write(ws_frame(0x1, deflated, rsv1=True))
            assert 0x8 in await frames_until_eof(reader, TIMEOUT)  # a close frame, then EOF
            writer.close()
        for _ in range(3):  # over the 8 MiB message limit: refused (close 1009) as it comes
            async with websockets.connect(
                server["ws"], additional_headers=bearer(A), open_timeout=TIMEOUT, max_size=None
            ) as ws:
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    await ws.send("x" * (9 * 1024 * 1024))
                    await asyncio.wait_for(ws.recv(), TIMEOUT)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        grown = rss_kib(server["pid"]) - before
        assert grown < 64 * 1024, f"the server grew by {grown} KiB"

    asyncio.run(main())


async def http_turn(client: Any, url: str, token: str) -> str:
    """A well-behaved Streamable HTTP client's whole turn: initialize, the connection's stream,
    session/new, a prompt; its stop reason."""
    first = await client.post(url, json=INIT, headers=bearer(token))
    assert first.status_code == 200, first.text
    a = {**bearer(token), "acp-connection-id": first.headers["acp-connection-id"]}
    new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}
    try:
        async with client.stream("GET", url, headers={**a, "accept": "text/event-stream"}) as stream:
            assert (await client.post(url, json=new, headers=a)).status_code == 202
            lines = stream.aiter_lines()
            session = str((await answer_from(lines, 1))["result"]["sessionId"])
            prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt"}
            prompt["params"] = {"sessionId": session, "prompt": [text("hello")]}
            assert (await client.post(url, json=prompt, headers={**a, "acp-session-id": session})).status_code == 202
            return str((await answer_from(lines, 2))["result"]["stopReason"])
    finally:
        await client.delete(url, headers=a)


async def answer_from(lines: Any, msg_id: int) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for line in lines:
            if line.startswith("data: "):
                message: dict[str, Any] = json.loads(line[6:])
                if message.get("id") == msg_id and "method" not in message:
                    return message
        raise AssertionError("the stream ended")

    return await asyncio.wait_for(first(), TIMEOUT)


def test_a_flood_of_bare_initialize_posts_locks_nobody_out(server: dict[str, str]) -> None:
    """264 bare `initialize` POSTs from one address, past its 256-connection cap: each evicts the
    oldest never-used one (never used for `Limits.evict_after`, 0.25 s, by then: the pause makes
    sure on a machine fast enough to make 256 in less), and a new client then does a whole turn."""
    import httpx

    async def main() -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            for i in range(264):
                if i == 256:
                    await asyncio.sleep(0.3)
                assert (await client.post(server["http"], json=INIT, headers=bearer(B))).status_code == 200
            assert await http_turn(client, server["http"], A) == "end_turn"

    asyncio.run(main())


def test_an_sse_stream_flood_gets_429_past_the_cap_and_the_connection_goes_on(server: dict[str, str]) -> None:
    """70 session streams on one HTTP/2 connection: the first 64 open, the rest get 429."""
    import httpx

    async def main() -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT, http1=False, http2=True) as client:
            url = server["http"]
            first = await client.post(url, json=INIT, headers=bearer(A))
            a = {**bearer(A), "acp-connection-id": first.headers["acp-connection-id"], "accept": "text/event-stream"}
            streams = []
            try:
                for i in range(70):
                    request = client.build_request("GET", url, headers={**a, "acp-session-id": f"s{i}"})
                    streams.append(await client.send(request, stream=True))
                assert [r.status_code for r in streams] == [200] * 64 + [429] * 6
                assert all(r.http_version == "HTTP/2" for r in streams)
                new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}
                assert (await client.post(url, json=new, headers=a)).status_code == 202
            finally:
                for response in streams:
                    await response.aclose()
                await client.delete(url, headers=a)

    asyncio.run(main())


def test_session_and_pending_handler_floods_are_capped_under_their_ids(server: dict[str, str]) -> None:
    """Over one WebSocket, 1,030 session/new in pipelined batches of 200 (6 past the 1,024 cap), and
    on a second one 300 permission prompts in 300 sessions, all pipelined (44 past the 256 pending
    handlers); every refusal is a -32000 under its own id, and each connection goes on serving."""
    import websockets

    async def answers(ws: Any, ids: set[int]) -> dict[int, dict[str, Any]]:
        got: dict[int, dict[str, Any]] = {}
        while not ids <= set(got):
            message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            if "method" not in message:
                got[message["id"]] = message
        return got

    def request(msg_id: int, method: str, params: dict[str, Any]) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    new = {"cwd": "/tmp", "mcpServers": []}

    async def main() -> None:
        connect = websockets.connect(server["ws"], additional_headers=bearer(A), open_timeout=TIMEOUT)
        async with connect as ws:
            await ws.send(request(0, "initialize", INIT["params"]))
            got = await answers(ws, {0})
            for start in range(1, 1031, 200):  # in batches under the pending-handler cap
                batch = set(range(start, min(start + 200, 1031)))
                for i in sorted(batch):
                    await ws.send(request(i, "session/new", new))
                got |= await answers(ws, batch)
            refused = [i for i, m in got.items() if "error" in m]
            assert len(refused) == 6 and all(got[i]["error"]["code"] == -32000 for i in refused), got[refused[0]]
            assert "max_sessions" in got[refused[0]]["error"]["data"]["details"]
            session = got[1]["result"]["sessionId"]
            await ws.send(request(2000, "session/prompt", {"sessionId": session, "prompt": [text("hi")]}))
            assert (await answers(ws, {2000}))[2000]["result"]["stopReason"] == "end_turn"
        async with websockets.connect(server["ws"], additional_headers=bearer(A), open_timeout=TIMEOUT) as ws:
            await ws.send(request(0, "initialize", INIT["params"]))
            opened = await answers(ws, {0})
            for start in (1, 151):  # in batches under the pending-handler cap, as above
                for i in range(start, start + 150):
                    await ws.send(request(i, "session/new", new))
                opened |= await answers(ws, set(range(start, start + 150)))
            sessions = [m["result"]["sessionId"] for _, m in sorted(opened.items())[1:]]
            for i, session in enumerate(sessions):
                await ws.send(
                    request(1000 + i, "session/prompt", {"sessionId": session, "prompt": [text("permission")]})
                )
            asks: list[dict[str, Any]] = []
            refused: list[dict[str, Any]] = []
            while len(asks) + len(refused) < 300:
                message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                if message.get("method") == "session/request_permission":
                    asks.append(message)
                elif "error" in message:
                    refused.append(message)
            assert len(asks) == 256 and len(refused) == 44
            assert all(m["error"]["code"] == -32000 and m["id"] >= 1000 for m in refused)
            for ask in asks:
                outcome = {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": ask["id"], "result": outcome}))
            done = await answers(ws, {1000 + i for i in range(300)} - {m["id"] for m in refused})
            assert {m["result"]["stopReason"] for m in done.values()} == {"end_turn"}

    asyncio.run(main())


def test_a_vanished_http_client_waiting_on_permission_is_reaped(server: dict[str, str]) -> None:
    """The agent asks for permission on the stream; the client drops the stream and never comes
    back (no DELETE): the connection is gone after `--http-idle-timeout` (its id answers 404)."""
    import httpx

    async def main() -> None:
        url = server["http"]
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            first = await client.post(url, json=INIT, headers=bearer(A))
            a = {**bearer(A), "acp-connection-id": first.headers["acp-connection-id"]}
            new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}
            async with client.stream("GET", url, headers={**a, "accept": "text/event-stream"}) as stream:
                assert (await client.post(url, json=new, headers=a)).status_code == 202
                lines = stream.aiter_lines()
                session = str((await answer_from(lines, 1))["result"]["sessionId"])
                prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt"}
                prompt["params"] = {"sessionId": session, "prompt": [text("permission")]}
                assert (
                    await client.post(url, json=prompt, headers={**a, "acp-session-id": session})
                ).status_code == 202

                async def asked() -> None:
                    async for line in lines:
                        if line.startswith("data: ") and '"session/request_permission"' in line:
                            return

                await asyncio.wait_for(asked(), TIMEOUT)
            # gone: the stream is dropped, nothing more is sent. The reaper looks every HTTP_IDLE / 4.
            await asyncio.sleep(HTTP_IDLE * 1.5 + 0.5)
            gone = await client.delete(url, headers=a)  # a probe that would itself count as activity
            assert gone.status_code == 404, gone.text

    asyncio.run(main())


def test_a_websocket_that_stops_answering_pings_is_closed(server: dict[str, str]) -> None:
    """Half-open as the server sees it: initialized, then silent, no pong. Closed after a ping
    and its deadline (2 x PING here), with a close frame before the EOF."""

    async def main() -> None:
        reader, writer, _ = await raw_websocket(server["ws"])
        writer.write(ws_frame(0x1, json.dumps(INIT).encode()))
        opcodes = await frames_until_eof(reader, PING * 2 + TIMEOUT)
        assert opcodes[0] == 0x1 and 0x9 in opcodes and opcodes[-1] == 0x8, opcodes  # answer, ping, close
        writer.close()

    asyncio.run(main())


def test_every_accepted_socket_has_tcp_keepalive(server: dict[str, str]) -> None:
    """A peer that vanished without a FIN (no FIN, no RST: the truly half-open, which loopback
    cannot make) is found by the kernel's keepalive probes, on both servers: `ss` shows the
    keepalive timer on the server's side of a fresh connection to each port."""
    import shutil

    if shutil.which("ss") is None:
        pytest.skip("needs ss (iproute2)")

    async def main() -> None:
        held = [await asyncio.open_connection("127.0.0.1", port_of(server[kind])) for kind in ("ws", "http")]
        try:
            for kind in ("ws", "http"):
                port = port_of(server[kind])
                shown = subprocess.run(
                    ["ss", "-tno", "state", "established", f"( sport = :{port} )"],
                    capture_output=True,
                    text=True,
                    timeout=TIMEOUT,
                ).stdout
                assert "keepalive" in shown, (kind, shown)
        finally:
            for _, writer in held:
                writer.close()

    asyncio.run(main())


def test_a_slow_post_body_gets_408_at_the_body_timeout_on_both_servers(server: dict[str, str]) -> None:
    """A whole head, then a body promised 400 bytes long and trickled a byte every 0.1 s: 408
    (with a JSON-RPC body) once `--body-timeout` has passed, on uvicorn and on hypercorn, the
    socket is closed, and a good client is served after it."""
    import httpx

    async def slow_body(url: str) -> bytes:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port_of(url)), TIMEOUT)
        head = (
            f"POST /acp HTTP/1.1\r\nHost: {local_host(url)}\r\nAuthorization: Bearer {A}\r\n"
            "Content-Type: application/json\r\nContent-Length: 400\r\n\r\n{"
        )
        writer.write(head.encode())
        answer = b""
        try:
            for _ in range(int(TIMEOUT / 0.1)):  # bounded: 10 s at most, the deadline is 1 s
                writer.write(b" ")
                await writer.drain()
                try:
                    chunk = await asyncio.wait_for(reader.read(4096), 0.1)
                except asyncio.TimeoutError:
                    continue
                if not chunk:
                    break
                answer += chunk
        except ConnectionError:
            pass
        finally:
            writer.close()
        return answer

    async def main() -> None:
        for url in (server["ws"].replace("ws://", "http://"), server["http"]):
            answer = await slow_body(url)
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b"did not arrive within 1 s" in answer, answer
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                assert (await client.post(url, json=INIT, headers=bearer(A))).status_code == 200

    asyncio.run(main())


def test_fragmented_messages_and_pings_between_frames_keep_the_receive_budget_in_step(server: dict[str, str]) -> None:
    """The receive budget (examples/ws_budget.py) finds each frame's header in the byte stream
    itself: a fragmented `initialize` with a ping between its fragments, trickled 7 bytes at a
    time (headers split across reads), then a request, a 100 KiB notification (over the budget's
    small-frame pass) and another request in one write: every request is answered, in order."""

    def part(opcode: int, payload: bytes, fin: bool) -> bytes:
        whole = ws_frame(opcode, payload)
        return bytes([whole[0] & 0x7F | (0x80 if fin else 0)]) + whole[1:]

    async def main() -> None:
        reader, writer, _ = await raw_websocket(server["ws"])
        init = json.dumps(INIT).encode()
        first = part(0x1, init[:10], False) + part(0x9, b"ping", True) + part(0x0, init[10:], True)
        for i in range(0, len(first), 7):
            writer.write(first[i : i + 7])
            await writer.drain()
            await asyncio.sleep(0.001)
        new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": NEW}
        pad = {"jsonrpc": "2.0", "method": "x/pad", "params": {"pad": "x" * 100_000}}
        writer.write(b"".join(ws_frame(0x1, json.dumps(m).encode()) for m in (new, pad, {**new, "id": 2})))
        ids, opcodes = [], []
        while len(ids) < 3:
            head = await asyncio.wait_for(reader.readexactly(2), TIMEOUT)
            n = head[1] & 0x7F
            if n >= 126:
                n = int.from_bytes(await reader.readexactly(2 if n == 126 else 8), "big")
            payload = await reader.readexactly(n)
            opcodes.append(head[0] & 0x0F)
            if head[0] & 0x0F == 0x1:
                ids.append(json.loads(payload).get("id"))
        assert ids == [0, 1, 2] and 0xA in opcodes, (ids, opcodes)  # the answers, and the pong
        writer.close()

    asyncio.run(main())


def test_websockets_are_refused_on_the_streamable_http_port(server: dict[str, str]) -> None:
    """hypercorn's port serves Streamable HTTP only: an upgrade there (with a valid token) gets
    403, not 101, so no WebSocket escapes uvicorn's receive budget."""
    import websockets

    async def main() -> None:
        url = server["http"].replace("http://", "ws://", 1)
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(url, additional_headers=bearer(A), open_timeout=TIMEOUT):
                pass
        assert refused.value.response.status_code == 403

    asyncio.run(main())


SENDERS, BIG_EACH = 24, 2  # large-message senders at once, and the messages each sends
BIG = 7 * 1024 * 1024  # just under the example's 8 MiB message limit
# What bounds the server's memory whatever the senders do (examples/ws_budget.py): the WebSocket
# bytes being received (WS_BUDGET) and the app's bytes in flight (Limits.max_inflight_bytes), each
# held about once, plus the copies of the few messages being converted or echoed at a time.
# Measured: 67-81 MiB (92-102 with a 32 MiB receive budget); 561 MiB before the receive budget,
# 230 MiB with it while websockets' parser still kept every connection's last frame.
WS_BUDGET, INFLIGHT, MAX_MESSAGE = 8 * 1024 * 1024, 64 * 1024 * 1024, 8 * 1024 * 1024
RSS_BOUND = WS_BUDGET + INFLIGHT + 8 * MAX_MESSAGE


def test_many_large_messages_at_once_stay_under_the_memory_bound(tmp_path: Path) -> None:
    """24 WebSockets each send two 7 MiB messages at once (336 MiB in all, which the server once
    held in two to four copies): the server grows by less than
    RSS_BOUND, a legitimate 7 MiB prompt from another client is echoed back whole meanwhile, and
    every sender's connection then answers a request. Its own server: the RSS is its alone. The
    bound is the receive budget's, not the byte rate's: at the default 4 MiB a second the 336 MiB
    from one address would take 80 s, so the rate is raised to 64 MiB (about 5 s)."""
    import websockets

    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {A}\n")
    pad = json.dumps({"jsonrpc": "2.0", "method": "x/big", "params": {"pad": "x" * BIG}})

    async def sender(url: str) -> dict[str, Any]:
        async with websockets.connect(url, additional_headers=bearer(A), max_size=None, compression=None) as ws:
            await ws.send(json.dumps(INIT))
            await ws.recv()
            for _ in range(BIG_EACH):
                await ws.send(pad)
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": NEW}))
            return dict(json.loads(await ws.recv()))  # answered after the large ones were read

    async def legitimate(url: str) -> str:
        async with websockets.connect(url, additional_headers=bearer(A), max_size=None, compression=None) as ws:
            peer = Ws(ws)
            await peer.request("initialize", INIT["params"])
            session = (await peer.request("session/new", NEW))["result"]["sessionId"]
            prompt = {"sessionId": session, "prompt": [text("y" * BIG)]}
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "session/prompt", "params": prompt}))
            echoed = ""
            while True:
                message = json.loads(await ws.recv())
                if message.get("method") == "session/update":
                    echoed += message["params"]["update"]["content"]["text"]
                elif message.get("id") == 99:
                    assert echoed == "y" * BIG
                    return str(message["result"]["stopReason"])

    with listening_echo_agent("--token-file", str(tokens), "--ws-rate", str(64 << 20)) as urls:

        async def main() -> None:
            before = peak = rss_kib(urls["pid"])
            work = asyncio.gather(legitimate(urls["ws"]), *(sender(urls["ws"]) for _ in range(SENDERS)))
            done = asyncio.ensure_future(asyncio.wait_for(work, 12 * TIMEOUT))
            while not done.done():
                peak = max(peak, rss_kib(urls["pid"]))
                await asyncio.sleep(0.02)
            stop, *answers = await done
            assert stop == "end_turn"
            assert all("sessionId" in answer.get("result", {}) for answer in answers), answers
            grown = (peak - before) * 1024
            assert grown < RSS_BOUND, f"the server grew by {grown >> 20} MiB (bound {RSS_BOUND >> 20} MiB)"

        asyncio.run(main())
