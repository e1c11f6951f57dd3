"""`examples/echo_agent.py --listen --token-file F` with every rate at its default (the other
attack tests turn the rates off, or set their own): a concurrent flood of `initialize` POSTs
from one address is paced (`connection_rate` 50 a second, a burst of 100, `rate_wait` 5 s),
what it cannot take within `rate_wait` is refused with 429, `Retry-After` and a JSON-RPC error
body (when the flood opens fast enough for some to be), and afterwards the echo client, over
each profile, runs its whole scenario.

Bounded: 400 requests, on 127.0.0.1; the agent is stopped by its PID."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from asgi_serving import listening_echo_agent, port_of

ROOT = Path(__file__).resolve().parent.parent
ECHO_CLIENT = ROOT / "examples" / "echo_client.py"
TOKEN = "token-of-the-flood-test-1"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
FLOOD, AT_ONCE = 400, 400  # more at once than burst + rate x rate_wait (350)
RATE, BURST, RATE_WAIT = 50.0, 100, 5.0  # remote_limits.Limits' defaults

pytestmark = pytest.mark.slow


def test_an_initialize_flood_at_the_default_rates_is_paced_refused_and_locks_nobody_out(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {TOKEN}\n")
    statuses: list[int] = []
    refusals: list[tuple[dict[str, str], bytes]] = []

    async def post(port: int) -> tuple[int, dict[str, str], bytes]:
        """One `initialize` POST on its own raw socket (httpx would be the bottleneck here)."""
        body = json.dumps(INIT).encode()
        head = (
            f"POST /acp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(head.encode() + body)
            status_line, _, rest = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").partition("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in rest.split("\r\n") if h)}
            raw = await reader.read()  # Connection: close, so the body ends at EOF
            if headers.get("transfer-encoding") == "chunked":
                body, raw = b"", raw
                while True:
                    size, _, raw = raw.partition(b"\r\n")
                    if not int(size, 16):
                        break
                    body, raw = body + raw[: int(size, 16)], raw[int(size, 16) + 2 :]
                raw = body
            return int(status_line.split()[1]), headers, raw
        finally:
            writer.close()

    async def flood(url: str) -> float:
        port = port_of(url)

        async def one() -> None:
            status, headers, body = await post(port)
            statuses.append(status)
            if status == 429:
                refusals.append((headers, body))

        start = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*(one() for _ in range(FLOOD))), RATE_WAIT * 4)
        return time.monotonic() - start

    with listening_echo_agent("--token-file", str(tokens)) as urls:
        took = asyncio.run(flood(urls["http"]))
        assert set(statuses) <= {200, 429}, sorted(set(statuses))
        accepted = statuses.count(200)
        # Paced, not all at once: beyond the burst, at most RATE a second for the flood's duration
        # (+1 s of slack for the requests in flight when it ended).
        assert accepted <= BURST + RATE * (took + 1.0), (accepted, took)
        # ... and no faster than RATE beyond the burst: the pacing is on, at its default.
        assert took >= (accepted - BURST) / RATE * 0.8, (accepted, took)
        # What would wait longer than rate_wait is refused (how many depends on how fast the
        # flood's connections open: the bucket fills meanwhile); all the rest gets in.
        assert accepted >= BURST + RATE * RATE_WAIT * 0.6, (accepted, took)
        for headers, raw in refusals[:5]:
            assert int(headers["retry-after"]) >= 1, headers
            body = json.loads(raw)
            assert body["jsonrpc"] == "2.0" and body["error"]["code"] == -32000, body
        for url in (urls["ws"], urls["http"]):
            done = subprocess.run(
                [sys.executable, str(ECHO_CLIENT), "--url", url, "--token-file", str(tokens)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0 and " 0 failed" in done.stdout, (url, done.stdout, done.stderr[-2000:])
