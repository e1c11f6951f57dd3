#!/usr/bin/env python3
"""A well-behaved client's prompt turns while each of issue 28's attacks runs against
`examples/echo_agent.py --listen 127.0.0.1:0 --token-file F` (uvicorn WebSocket, hypercorn
Streamable HTTP, the example's server settings), on loopback only: the good client connects from
127.0.0.1, the attackers from 127.0.0.2 (`--attacker-address`), so that per-address limits meet them
as they would on a network.

The good client (this process) does one WebSocket prompt turn after another (a session, the
echo of one text block) and records each turn's latency. Each attack runs in its own process
(`--attack NAME --seconds S`, bounded in connections and time) so that it does not share the
good client's event loop. Per phase: the good client's p50/p99 turn latency and the server's
RSS (VmRSS) before the phase and its peak during it. Goals (issue 28): p99 <= 3x the quiet
p99 during every attack, and server RSS <= 512 MiB whatever the attackers send.

    python benchmarks/bench_attacks.py [--seconds 12] [--server-arg=--ws-rate=8388608] [--attacks slowloris,deflate,...]

Attacks: slowloris (400 half-sent heads trickling a byte a second, both servers), deflate
(deflated frames of 15 MiB that shrink to 15 KB, refused), big (40 connections sending 7 MiB
messages, just under the 8 MiB limit, as fast as the server takes them), conn-flood (bare
`initialize` POSTs as fast as they go), sse-flood (connections holding 70 SSE streams each,
HTTP/2), session-flood (session/new in batches on 4 WebSockets), pending-flood (unanswered
permission prompts on 4 WebSockets, 256 pending each), vanish (HTTP clients that start a
permission turn and drop their stream), half-open (200 WebSockets that initialize, then never
read nor answer pings).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from asgi_serving import port_of, ws_frame  # noqa: E402  (what the attack tests send too)

ECHO_AGENT = ROOT / "examples" / "echo_agent.py"
TOKEN = "bench-token-1"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
NEW = {"cwd": "/tmp", "mcpServers": []}
AUTH = {"authorization": f"Bearer {TOKEN}"}
ATTACKS = (
    "slowloris",
    "deflate",
    "big",
    "conn-flood",
    "sse-flood",
    "session-flood",
    "pending-flood",
    "vanish",
    "half-open",
)


def rpc(msg_id: int, method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the attacks (each in its own process, until `deadline`) ------------------------------------
# The attackers' source address (--attacker-address): by default not the good client's, as on a
# real network, so the per-address rates and caps meet the attacker, not everyone on 127.0.0.1.
SOURCE = {"addr": "127.0.0.2"}


def local() -> tuple[str, int]:
    return (SOURCE["addr"], 0)


def http_client(**options: Any) -> Any:
    """An httpx client whose connections come from the attackers' address."""
    import httpx

    http2 = options.pop("http2", False)
    transport = httpx.AsyncHTTPTransport(local_address=SOURCE["addr"], http1=not http2, http2=http2)
    return httpx.AsyncClient(transport=transport, **options)


async def raw_ws(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url), local_addr=local())
    head = (
        f"GET /acp HTTP/1.1\r\nHost: 127.0.0.1:{port_of(url)}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Extensions: permessage-deflate\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    )
    writer.write(head.encode())
    await reader.readuntil(b"\r\n\r\n")
    return reader, writer


async def forever(deadline: float, job: Any, *args: Any) -> None:
    """`job(*args)` again and again until the deadline, errors ignored (the server may refuse)."""
    while time.monotonic() < deadline:
        try:
            await asyncio.wait_for(job(*args), max(0.1, deadline - time.monotonic()))
        except Exception:
            await asyncio.sleep(0.05)


async def slowloris(urls: dict[str, str], deadline: float) -> None:
    async def one(url: str) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url), local_addr=local())
        writer.write(b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        try:
            while not reader.at_eof():
                writer.write(b"a")
                await writer.drain()
                try:
                    await asyncio.wait_for(reader.read(1024), 1.0)
                except asyncio.TimeoutError:
                    pass
        finally:
            writer.close()

    await asyncio.gather(*(forever(deadline, one, urls[k]) for k in ("ws", "http") for _ in range(200)))


async def deflate(urls: dict[str, str], deadline: float) -> None:
    bomb = zlib.compressobj(wbits=-15)
    payload = (bomb.compress(b" " * (15 * 1024 * 1024)) + bomb.flush(zlib.Z_SYNC_FLUSH))[:-4]

    async def one() -> None:
        reader, writer = await raw_ws(urls["ws"])
        writer.write(ws_frame(0x1, payload, rsv1=True))
        await writer.drain()
        await reader.read()  # the server closes it
        writer.close()

    await asyncio.gather(*(forever(deadline, one) for _ in range(20)))


async def big(urls: dict[str, str], deadline: float) -> None:
    import websockets

    message = json.dumps({"jsonrpc": "2.0", "method": "x/big", "params": {"pad": "x" * (7 * 1024 * 1024)}})

    async def one() -> None:
        async with websockets.connect(
            urls["ws"], additional_headers=AUTH, max_size=None, compression=None, local_addr=local()
        ) as ws:
            while time.monotonic() < deadline:
                await ws.send(message)

    await asyncio.gather(*(forever(deadline, one) for _ in range(40)))


async def conn_flood(urls: dict[str, str], deadline: float) -> None:
    import httpx

    async def one(client: httpx.AsyncClient) -> None:
        await client.post(urls["http"], json=INIT, headers=AUTH)

    async with http_client(timeout=5) as client:
        await asyncio.gather(*(forever(deadline, one, client) for _ in range(8)))


async def sse_flood(urls: dict[str, str], deadline: float) -> None:
    async def one() -> None:
        async with http_client(timeout=5, http2=True) as client:
            first = await client.post(urls["http"], json=INIT, headers=AUTH)
            a = {**AUTH, "acp-connection-id": first.headers["acp-connection-id"], "accept": "text/event-stream"}
            streams = []
            try:
                for i in range(70):
                    request = client.build_request("GET", urls["http"], headers={**a, "acp-session-id": f"s{i}"})
                    streams.append(await client.send(request, stream=True))
                await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            finally:
                for response in streams:
                    await response.aclose()

    await asyncio.gather(*(forever(deadline, one) for _ in range(10)))


async def session_flood(urls: dict[str, str], deadline: float) -> None:
    import websockets

    async def one() -> None:
        async with websockets.connect(urls["ws"], additional_headers=AUTH, local_addr=local()) as ws:
            await ws.send(json.dumps(INIT))
            await ws.recv()
            n = 1
            while time.monotonic() < deadline:
                for _ in range(200):
                    n += 1
                    await ws.send(rpc(n, "session/new", NEW))
                for _ in range(200):
                    await ws.recv()

    await asyncio.gather(*(forever(deadline, one) for _ in range(4)))


async def pending_flood(urls: dict[str, str], deadline: float) -> None:
    import websockets

    async def one() -> None:
        async with websockets.connect(urls["ws"], additional_headers=AUTH, local_addr=local()) as ws:
            await ws.send(json.dumps(INIT))
            await ws.recv()
            for i in range(1, 301):
                await ws.send(rpc(i, "session/new", NEW))
            sessions = [json.loads(await ws.recv())["result"]["sessionId"] for _ in range(300)]
            for i, session in enumerate(sessions):  # never answered: the permission requests pile up
                await ws.send(rpc(1000 + i, "session/prompt", {"sessionId": session, "prompt": [text("permission")]}))
            while time.monotonic() < deadline:
                await ws.recv()

    await asyncio.gather(*(forever(deadline, one) for _ in range(4)))


async def vanish(urls: dict[str, str], deadline: float) -> None:
    async def one() -> None:
        async with http_client(timeout=5) as client:
            first = await client.post(urls["http"], json=INIT, headers=AUTH)
            a = {**AUTH, "acp-connection-id": first.headers["acp-connection-id"]}
            async with client.stream("GET", urls["http"], headers={**a, "accept": "text/event-stream"}) as stream:
                await client.post(urls["http"], content=rpc(1, "session/new", NEW), headers={**a, **JSON})
                lines = stream.aiter_lines()
                session = ""
                async for line in lines:
                    if line.startswith("data: ") and '"sessionId"' in line:
                        session = json.loads(line[6:])["result"]["sessionId"]
                        break
                prompt = rpc(2, "session/prompt", {"sessionId": session, "prompt": [text("permission")]})
                await client.post(urls["http"], content=prompt, headers={**a, **JSON, "acp-session-id": session})
                async for line in lines:
                    if "session/request_permission" in line:
                        break
            # and gone: no DELETE, no answer

    await asyncio.gather(*(forever(deadline, one) for _ in range(8)))


JSON = {"content-type": "application/json"}


async def half_open(urls: dict[str, str], deadline: float) -> None:
    async def one() -> None:
        reader, writer = await raw_ws(urls["ws"])
        writer.write(ws_frame(0x1, json.dumps(INIT).encode()))
        await writer.drain()
        while not reader.at_eof() and time.monotonic() < deadline:
            await asyncio.sleep(0.5)  # never reads: no pong ever goes back
        writer.close()

    await asyncio.gather(*(forever(deadline, one) for _ in range(200)))


def attack(name: str, urls: dict[str, str], seconds: float) -> None:
    jobs = {
        "slowloris": slowloris,
        "deflate": deflate,
        "big": big,
        "conn-flood": conn_flood,
        "sse-flood": sse_flood,
        "session-flood": session_flood,
        "pending-flood": pending_flood,
        "vanish": vanish,
        "half-open": half_open,
    }
    deadline = time.monotonic() + seconds

    async def bounded() -> None:
        try:
            await asyncio.wait_for(jobs[name](urls, deadline), seconds + 5)
        except asyncio.TimeoutError:
            pass

    asyncio.run(bounded())


# -- the good client and the phases -------------------------------------------------------------
async def good_turns(url: str, seconds: float, pid: int) -> tuple[list[float], float]:
    """Prompt turns one after another for `seconds`: their latencies (s), and the server's peak RSS."""
    import websockets

    latencies: list[float] = []
    peak = rss_mib(pid)
    async with websockets.connect(url, additional_headers=AUTH, open_timeout=30) as ws:
        await ws.send(json.dumps(INIT))
        await ws.recv()
        await ws.send(rpc(1, "session/new", NEW))
        session = json.loads(await ws.recv())["result"]["sessionId"]
        end, n = time.monotonic() + seconds, 1
        while time.monotonic() < end:
            n += 1
            start = time.perf_counter()
            await ws.send(rpc(n, "session/prompt", {"sessionId": session, "prompt": [text(f"turn {n}")]}))
            while json.loads(await asyncio.wait_for(ws.recv(), 60)).get("id") != n:
                pass
            latencies.append(time.perf_counter() - start)
            peak = max(peak, rss_mib(pid))
            await asyncio.sleep(0.02)
    return latencies, peak


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # 12 s: a p99 is then the 6th slowest of ~540 turns, not the 3rd of ~270 (6 s moved the quiet p99 2-10 ms).
    parser.add_argument("--seconds", type=float, default=12.0, help="each phase's length")
    parser.add_argument("--attacks", default=",".join(ATTACKS))
    parser.add_argument(
        "--attacker-address",
        default=SOURCE["addr"],
        help="the attackers' source address (loopback; default %(default)s: not the good client's 127.0.0.1, as on a"
        " real network; 127.0.0.1 measures attackers behind the good client's own address, e.g. one NAT)",
    )
    parser.add_argument("--server-log", metavar="FILE", help="the server's stderr (ECHO_AGENT_LOG=INFO for more)")
    parser.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for echo_agent.py (repeat it), e.g. --server-arg=--ws-rate=4194304",
    )
    parser.add_argument("--attack", help=argparse.SUPPRESS)  # one attacker process
    parser.add_argument("--urls", help=argparse.SUPPRESS)
    args = parser.parse_args()
    SOURCE["addr"] = args.attacker_address
    if args.attack:
        attack(args.attack, json.loads(args.urls), args.seconds)
        return
    names = [name for name in args.attacks.split(",") if name]
    unknown = set(names) - set(ATTACKS)
    if unknown:
        parser.error(f"unknown attacks {sorted(unknown)}; known: {', '.join(ATTACKS)}")
    with tempfile.TemporaryDirectory() as tmp, open(args.server_log or os.devnull, "w") as log:
        tokens = Path(tmp) / "tokens"
        tokens.write_text(f"bench {TOKEN}\n")
        server = subprocess.Popen(
            [sys.executable, str(ECHO_AGENT), "--listen", "127.0.0.1:0", "--token-file", str(tokens), *args.server_arg],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            assert server.stdout is not None
            words = server.stdout.readline().split()
            urls = {"ws": words[1], "http": words[2]}
            print(
                f"load average before: {os.getloadavg()[0]:.2f}; each phase {args.seconds:g} s; attackers from"
                f" {args.attacker_address}; server {' '.join(args.server_arg) or 'as it is by default'}",
                flush=True,
            )
            print("| phase | turns | p50 ms | p99 ms | p99 / quiet | RSS before MiB | RSS peak MiB | server CPU % |")
            print("| --- | --- | --- | --- | --- | --- | --- | --- |")
            quiet_p99 = 0.0
            for name in ["quiet", *names]:
                before = rss_mib(server.pid)
                attacker = None
                if name != "quiet":
                    attacker = subprocess.Popen(
                        [sys.executable, __file__, "--attack", name, "--urls", json.dumps(urls)]
                        + ["--seconds", str(args.seconds + 1), "--attacker-address", args.attacker_address],
                    )
                    time.sleep(1.0)  # the attack under way before the good client starts measuring
                cpu_before, start = cpu_seconds(server.pid), time.monotonic()
                failed = ""
                try:
                    latencies, peak = asyncio.run(good_turns(urls["ws"], args.seconds, server.pid))
                except Exception as exc:  # refused or cut off: that is this phase's result
                    failed, latencies, peak = f"{type(exc).__name__}: {exc}", [], rss_mib(server.pid)
                busy = 100 * (cpu_seconds(server.pid) - cpu_before) / (time.monotonic() - start)
                if attacker is not None:
                    try:
                        attacker.wait(15)
                    except subprocess.TimeoutExpired:
                        attacker.kill()
                        attacker.wait()
                if failed:
                    print(f"| {name} | 0 | good client failed: {failed} | | | {before:.0f} | {peak:.0f} | {busy:.0f} |")
                    time.sleep(2.0)
                    continue
                p50, p99 = percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000
                if name == "quiet":
                    quiet_p99 = p99
                ratio = p99 / quiet_p99 if quiet_p99 else float("nan")
                print(
                    f"| {name} | {len(latencies)} | {p50:.1f} | {p99:.1f} | {ratio:.2f} | {before:.0f} | {peak:.0f} "
                    f"| {busy:.0f} |",
                    flush=True,
                )
                time.sleep(2.0)  # what the attack left is reaped or closed
            print(f"load average after: {os.getloadavg()[0]:.2f}")
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


if __name__ == "__main__":
    main()
