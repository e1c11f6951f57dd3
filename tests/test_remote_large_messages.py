"""Large WebSocket messages: the byte rate per client address that paces them (examples/ws_budget.py,
`--ws-rate`), and the connection parsing a whole large line in place (no split copy) with every
answer the same as on the stream path."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import agent
import pytest
from agent import types as at
from agent.jsonline import HELD_FROM, loads
from agent.remote_link import Link
from agent.remote_rate import Paces
from agent.remote_wire import frame
from asgi_serving import listening_echo_agent

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from ws_budget import BURST, RATE, ReceiveBudget, budgeted  # noqa: E402

TIMEOUT = 20.0
MiB = 1024 * 1024
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
NEW = {"cwd": "/tmp", "mcpServers": []}


# -- the byte rate ------------------------------------------------------------------------------
def test_a_byte_rate_lets_its_burst_through_then_spaces_frames_by_size_per_key() -> None:
    """ws_budget's byte rate is remote_rate's bucket, a frame's size its cost, never refused (the
    same values as the ByteRate it replaced: its formula, written out, is the same)."""
    rate = Paces(1000.0, 3000, wait=None)
    assert [rate.admit("a", 1000, now=10.0) for _ in range(3)] == [0.0, 0.0, 0.0]  # the burst
    assert rate.admit("a", 1000, now=10.0) == pytest.approx(1.0)  # booked behind it: its turn in 1 s
    assert rate.admit("a", 500, now=10.0) == pytest.approx(1.5)  # and the next behind that one
    assert rate.admit("b", 3000, now=10.0) == 0.0  # another address has its own bucket
    assert rate.admit("a", 1000, now=20.0) == 0.0  # caught up: full again
    assert rate.admit("c", 5000, now=10.0) == pytest.approx(2.0)  # larger than the burst: waits its excess
    assert rate.admit("d", 10**9, now=10.0) == pytest.approx(10**6 - 3)  # however far: waits, never refused


def test_a_byte_rate_forgets_caught_up_addresses_when_many_are_held() -> None:
    rate = Paces(1000.0, 10, wait=None)
    for i in range(5000):
        rate.admit(f"10.0.{i // 256}.{i % 256}", 1, now=0.0)
    assert rate.admit("late", 1, now=1.0) == 0.0
    assert len(rate) < 5000  # the caught-up ones went


@pytest.mark.parametrize("bad", [(0.0, 1), (-1.0, 1), (1.0, -1)])
def test_a_byte_rate_refuses_nonsense(bad: tuple[float, int]) -> None:
    with pytest.raises(ValueError, match="byte rate"):
        ReceiveBudget(MiB, rate=bad[0], burst=bad[1])


def test_budgeted_takes_the_rate_or_none() -> None:
    assert budgeted(8 * MiB).budget.rates is not None and (RATE, BURST) == (4 * MiB, 16 * MiB)
    assert budgeted(8 * MiB, rate=None).budget.rates is None


def test_large_frames_from_one_address_are_paced_and_small_ones_are_not(tmp_path: Path) -> None:
    """`--ws-rate 8 MiB`: one WebSocket sends five 7 MiB notifications (35 MiB: the 16 MiB burst,
    then 19 MiB at 8 MiB a second, about 2.4 s) and then a request. Meanwhile another WebSocket from
    the same address is answered at once: its frames are small, never paced. The sender's request
    comes back only after the pace let its large frames in. With `--ping 0.5` the hold outlasts
    several pong deadlines: the held socket is not closed for it (its pong is behind the frame)."""
    import websockets

    tokens = tmp_path / "tokens"
    tokens.write_text("alice tok-a\n")
    auth = {"authorization": "Bearer tok-a"}
    pad = json.dumps({"jsonrpc": "2.0", "method": "x/big", "params": {"pad": "x" * (7 * MiB)}})

    async def sender(url: str) -> float:
        async with websockets.connect(url, additional_headers=auth, max_size=None, compression=None) as ws:
            await ws.send(json.dumps(INIT))
            await ws.recv()
            start = time.monotonic()
            for _ in range(5):
                await ws.send(pad)
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": NEW}))
            assert "sessionId" in json.loads(await ws.recv())["result"]
            return time.monotonic() - start

    async def small(url: str) -> list[float]:
        await asyncio.sleep(0.5)  # the sender's frames are waiting for their turn by then
        async with websockets.connect(url, additional_headers=auth) as ws:
            took = []
            for i in range(5):
                start = time.monotonic()
                await ws.send(json.dumps({**INIT, "id": i}))
                assert json.loads(await ws.recv())["id"] == i
                took.append(time.monotonic() - start)
            return took

    with listening_echo_agent("--token-file", str(tokens), "--ws-rate", str(8 * MiB), "--ping", "0.5") as urls:

        async def main() -> tuple[float, list[float]]:
            paced, quick = await asyncio.wait_for(asyncio.gather(sender(urls["ws"]), small(urls["ws"])), TIMEOUT)
            return paced, quick

        paced, quick = asyncio.run(main())
    assert paced >= (35 - 16) / 8 * 0.9, paced  # held to the rate (a little slack for the clocks)
    assert max(quick) < paced / 2, (quick, paced)  # the small ones did not wait behind the pace


# -- a whole large line parsed in place ---------------------------------------------------------
class Recorder(agent.Agent):
    """Records the extension notifications; the ACP methods are not called here."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, Any]] = []

    async def initialize(self, params: at.InitializeRequest) -> at.InitializeResponse:
        raise NotImplementedError

    async def authenticate(self, params: at.AuthenticateRequest) -> at.AuthenticateResponse:
        raise NotImplementedError

    async def session_new(self, params: at.NewSessionRequest) -> at.NewSessionResponse:
        raise NotImplementedError

    async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
        raise NotImplementedError

    async def session_cancel(self, params: at.CancelNotification) -> None:
        raise NotImplementedError

    async def ext_notification(self, method: str, params: Any) -> None:
        self.notes.append((method, params))


async def deliver_all(lines: list[bytes], max_message_size: int = 8 * MiB) -> tuple[Recorder, list[Any]]:
    """Each line delivered whole, as a WebSocket message is; what the agent answered, in order."""
    handler, out = Recorder(), []
    link = Link(
        handler, out.append, ctx=None, max_message_size=max_message_size, send_buffer=64 * MiB, shutdown_grace=1
    )
    for line in lines:
        assert await link.deliver(frame(line))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(link.close(), TIMEOUT)
    return handler, [json.loads(line) for line in out]


def test_a_whole_large_line_is_served_as_on_the_stream_path() -> None:
    pad = "y" * (HELD_FROM + 10)
    note = json.dumps({"jsonrpc": "2.0", "method": "_x/big", "params": {"pad": pad}}).encode()
    request = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "x/big", "params": {"pad": pad}}).encode()
    broken = request[:-2]  # truncated: not JSON
    handler, answers = asyncio.run(deliver_all([note, request, broken]))
    assert [params for _, params in handler.notes] == [{"pad": pad}]
    by_id = {answer["id"]: answer["error"] for answer in answers}  # a request is served in its own task
    assert len(answers) == 2 and by_id[7]["code"] == -32601 and by_id[None]["code"] == -32700
    with pytest.raises(ValueError) as exc:
        loads(broken)
    assert by_id[None]["data"]["details"] == str(exc.value)[:200]  # its position without the newline


def test_a_whole_line_over_the_limit_is_refused() -> None:
    pad = "z" * (HELD_FROM * 2)
    request = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "x/big", "params": {"pad": pad}}).encode()
    _, answers = asyncio.run(deliver_all([request], max_message_size=HELD_FROM + 100))
    assert answers[0]["id"] == 3 and answers[0]["error"]["code"] == -32600
    assert "larger than the maximum" in answers[0]["error"]["data"]["details"]


# -- freed memory kept for the next large message (examples/malloc_keep.py) --------------------
FAULTS = """
import resource, sys
sys.path.insert(0, sys.argv[1])
from malloc_keep import keep_freed_memory
kept = keep_freed_memory(int(sys.argv[2]))
text = "x" * (7 * 1024 * 1024)
text.encode()  # the first time faults its pages in, whatever the setting
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):  # a message's copies alive at once (28 MiB), then freed
    copies = [text.encode() for _ in range(4)]
    del copies
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="page-fault counts and glibc")
def test_kept_freed_memory_serves_the_next_large_copy_without_faulting_its_pages_in_again() -> None:
    import platform
    import subprocess

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    examples = str(Path(__file__).resolve().parent.parent / "examples")

    def faults(keep: int) -> tuple[bool, int]:
        out = subprocess.run([sys.executable, "-c", FAULTS, examples, str(keep)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        kept, count = out.stdout.split()
        return kept == "True", int(count)

    (off, faulted), (on, kept) = faults(0), faults(128 * MiB)
    assert not off and on
    assert faulted >= 20 * 1792, faulted  # glibc gave the copies back: their pages faulted in afresh
    assert kept < faulted / 10, (kept, faulted)  # the freed block is reused


def test_keep_freed_memory_refuses_a_negative_size() -> None:
    from malloc_keep import keep_freed_memory

    with pytest.raises(ValueError, match="keep"):
        keep_freed_memory(-1)
