"""The wire tap (`tap=`, ACP_WIRE_LOG) and request timeouts of the generated runtime."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import agent
import client
import pytest
from agent import types as at
from client import types as ct
from test_runtime_connection import TIMEOUT, Pipe, RawPeer, RecordingClient, TestAgent, prompt, run

INIT = ct.InitializeRequest(protocol_version=1, client_capabilities=ct.ClientCapabilities())
Record = list[tuple[str, bytes]]


def taps() -> tuple[Record, Any]:
    seen: Record = []

    def tap(direction: str, line: bytes) -> None:
        assert isinstance(line, bytes) and not line.endswith(b"\n")
        seen.append((direction, line))

    return seen, tap


def pair(
    client_obj: client.Client, agent_obj: agent.Agent, *, client_tap: Any = None, agent_tap: Any = None
) -> tuple[client.AgentProxy, client.Connection, asyncio.Future[None], asyncio.Future[None]]:
    up, down = Pipe(), Pipe()
    proxy, connection = client.connect(client_obj, down.reader, up, tap=client_tap)
    serving_client = asyncio.ensure_future(connection.run())
    serving_agent = asyncio.ensure_future(agent.run_agent(agent_obj, up.reader, down, tap=agent_tap))
    return proxy, connection, serving_client, serving_agent


async def finish(connection: client.Connection, *serving: asyncio.Future[None]) -> None:
    await connection.close()
    await asyncio.wait_for(asyncio.gather(*serving), TIMEOUT)


def test_both_ends_tap_every_line_in_order() -> None:
    client_seen, client_tap = taps()
    agent_seen, agent_tap = taps()

    async def scenario() -> None:
        proxy, connection, *serving = pair(RecordingClient(), TestAgent(), client_tap=client_tap, agent_tap=agent_tap)
        await proxy.initialize(INIT)
        await proxy.session_prompt(prompt("s1", "5"))
        await finish(connection, *serving)

    run(scenario())
    out = [line for d, line in client_seen if d == "out"]
    assert out == [line for d, line in agent_seen if d == "in"]
    assert [line for d, line in agent_seen if d == "out"] == [line for d, line in client_seen if d == "in"]
    messages = [(d, json.loads(line)) for d, line in client_seen]
    methods = [(d, m.get("method", "response")) for d, m in messages]
    assert methods == [
        ("out", "initialize"),
        ("in", "response"),
        ("out", "session/prompt"),
        *[("in", "session/update")] * 5,
        ("in", "response"),
    ]
    texts = [m["params"]["update"]["content"]["text"] for _, m in messages if m.get("method") == "session/update"]
    assert texts == ["0", "1", "2", "3", "4"]


def test_taps_keep_the_wire_order_under_concurrency() -> None:
    """20 prompts at once, their updates interleaved: each end's taps list the lines exactly
    in the order the other end's taps saw them, i.e. the order on the wire."""
    client_seen, client_tap = taps()
    agent_seen, agent_tap = taps()

    async def scenario() -> None:
        recorder = RecordingClient(slow=True)
        proxy, connection, *serving = pair(recorder, TestAgent(), client_tap=client_tap, agent_tap=agent_tap)
        await proxy.initialize(INIT)
        await asyncio.gather(*(proxy.session_prompt(prompt(f"s{i}", "30")) for i in range(20)))
        assert len(recorder.updates) == 600
        await finish(connection, *serving)

    run(scenario())
    sent = [line for d, line in client_seen if d == "out"]
    assert sent == [line for d, line in agent_seen if d == "in"] and len(sent) == 21
    answered = [line for d, line in agent_seen if d == "out"]
    assert answered == [line for d, line in client_seen if d == "in"] and len(answered) == 621
    ids = [json.loads(line).get("id") for line in sent]
    assert ids == sorted(ids)  # ids are given in call order, and written in that order


def test_tap_sees_raw_lines_before_decoding() -> None:
    seen, tap = taps()

    async def body(peer: RawPeer, handler: TestAgent) -> None:
        error = await peer.call(b"not json\n")
        assert error["error"]["code"] == -32700
        peer.send(b"\n")
        peer.send(b'{"jsonrpc":"2.0","id":"x","method":"_ext","params":{"k":"\\u00e9"}}\n')
        assert (await peer.recv())["result"]["params"] == {"k": "é"}

    handler = TestAgent()

    async def scenario() -> None:
        peer = RawPeer(handler, tap=tap)
        await body(peer, handler)
        peer.send(b'{"jsonrpc":"2.0","method":"_last"}')  # no newline: served at EOF, tapped too
        await peer.close()

    run(scenario())
    assert [d for d, _ in seen] == ["in", "out", "in", "in", "out", "in"]
    assert seen[0] == ("in", b"not json")
    assert seen[2] == ("in", b"")
    assert seen[3][1] == b'{"jsonrpc":"2.0","id":"x","method":"_ext","params":{"k":"\\u00e9"}}'
    assert json.loads(seen[4][1])["id"] == "x"
    assert seen[5] == ("in", b'{"jsonrpc":"2.0","method":"_last"}')


def test_a_tap_that_raises_is_logged_and_the_connection_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def broken(direction: str, line: bytes) -> None:
        calls.append(direction)
        raise RuntimeError("tap bug")

    async def scenario() -> None:
        recorder = RecordingClient()
        proxy, connection, *serving = pair(recorder, TestAgent(), client_tap=broken, agent_tap=broken)
        await proxy.initialize(INIT)
        response = await proxy.session_prompt(prompt("s1", "3"))
        assert response.stop_reason == "end_turn" and recorder.updates == ["0", "1", "2"]
        await finish(connection, *serving)

    with caplog.at_level(logging.DEBUG):
        run(scenario())
    assert len(calls) == 2 * (2 + 2 + 3)  # every line, on both ends
    failures = [r for r in caplog.records if "wire tap failed" in r.getMessage()]
    assert [r.levelno for r in failures].count(logging.ERROR) == 2  # once per connection
    assert len(failures) == len(calls)


def test_acp_wire_log_appends_json_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "wire.jsonl"
    log.write_text('{"earlier": true}\n')
    monkeypatch.setenv("ACP_WIRE_LOG", str(log))
    client_seen, client_tap = taps()

    async def scenario() -> None:
        proxy, connection, *serving = pair(RecordingClient(), TestAgent(), client_tap=client_tap)
        await proxy.initialize(INIT)
        await proxy.session_prompt(prompt("s1", "2"))
        await finish(connection, *serving)

    run(scenario())
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[0] == '{"earlier": true}'  # appended, not truncated
    records = [json.loads(line) for line in lines[1:]]
    assert all(set(r) == {"ts", "dir", "pid", "line"} and isinstance(r["ts"], float) for r in records)
    # Both ends (here in one process) log; each line appears once "out" and once "in".
    assert sorted(r["line"] for r in records if r["dir"] == "out") == sorted(
        r["line"] for r in records if r["dir"] == "in"
    )
    assert len(records) == 2 * len(client_seen)  # the explicit tap still sees everything too
    assert {line.decode() for _, line in client_seen} == {r["line"] for r in records}
    assert log.stat().st_mode & 0o777 in (0o600, 0o644)


def test_acp_wire_log_unset_or_unwritable_is_harmless(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ACP_WIRE_LOG", str(tmp_path / "no-such-dir" / "wire.jsonl"))

    async def scenario() -> None:
        proxy, connection, *serving = pair(RecordingClient(), TestAgent())
        assert (await proxy.initialize(INIT)).protocol_version == 1
        await finish(connection, *serving)

    run(scenario())
    assert sum("cannot open the wire log" in r.getMessage() for r in caplog.records) == 2
    monkeypatch.delenv("ACP_WIRE_LOG")

    async def unset() -> None:
        proxy, connection, *serving = pair(RecordingClient(), TestAgent())
        assert connection._taps == ()  # off by default: nothing on the hot path
        await finish(connection, *serving)

    run(unset())


def test_timeout_sends_cancel_drops_pending_and_raises_timeout_error(caplog: pytest.LogCaptureFixture) -> None:
    handler = TestAgent()

    async def scenario() -> None:
        proxy, connection, *serving = pair(RecordingClient(), handler)
        with pytest.raises(TimeoutError) as raised:
            await connection.request("session/new", {"cwd": "/wait", "mcpServers": []}, timeout=0.05)
        assert type(raised.value) is TimeoutError  # the builtin, on 3.10 too
        assert connection.stats()["pending"] == 0
        await asyncio.wait_for(handler.cancelled.wait(), TIMEOUT)  # $/cancel_request reached it
        # The agent answers -32800 for the cancelled id: a late answer, ignored quietly.
        await proxy.initialize(INIT)  # a round trip: the late answer has arrived by now
        assert all(v == 0 for v in connection.stats().values()), connection.stats()
        await finish(connection, *serving)

    with caplog.at_level(logging.WARNING):
        run(scenario())
    assert caplog.records == []


class LateAgent(TestAgent):
    """Answers session/new only after the client gave up, ignoring `$/cancel_request`."""

    async def session_new(self, params: at.NewSessionRequest) -> at.NewSessionResponse:
        async def answer() -> at.NewSessionResponse:
            await asyncio.sleep(0.1)
            return at.NewSessionResponse(session_id="late")

        return await asyncio.shield(asyncio.ensure_future(answer()))


def test_late_result_after_timeout_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        proxy, connection, *serving = pair(RecordingClient(), LateAgent())
        with pytest.raises(TimeoutError):
            await proxy.connection.request("session/new", {"cwd": "/", "mcpServers": []}, timeout=0.01)
        await asyncio.sleep(0.2)
        assert (await proxy.initialize(INIT)).protocol_version == 1
        assert all(v == 0 for v in connection.stats().values()), connection.stats()
        await finish(connection, *serving)

    with caplog.at_level(logging.WARNING):
        run(scenario())
    assert caplog.records == []


def test_answer_within_the_timeout_is_returned() -> None:
    async def scenario() -> None:
        proxy, connection, *serving = pair(RecordingClient(), TestAgent())
        result = await connection.request("session/new", {"cwd": "/slow", "mcpServers": []}, timeout=TIMEOUT)
        assert result == {"sessionId": "sess-0"}
        assert all(v == 0 for v in connection.stats().values())
        await finish(connection, *serving)

    run(scenario())


def test_unknown_response_id_still_warns(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        peer = RawPeer(TestAgent())
        peer.send({"jsonrpc": "2.0", "id": 99, "error": {"code": -1, "message": "never asked"}})
        assert (await peer.call({"jsonrpc": "2.0", "id": 1, "method": "_x"}))["id"] == 1
        await peer.close()

    run(scenario())
    assert any("unknown id 99" in r.getMessage() for r in caplog.records)
