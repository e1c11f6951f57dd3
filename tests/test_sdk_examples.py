"""examples/from-sdk/: the official Python SDK's examples (0.12.1) ported to the generated packages.

The originals are in tests/fixtures/sdk-examples/ (verbatim, with the SDK's LICENSE). Each port
is no longer than its original in non-blank lines, and runs against the original as its peer:
the SDK's client drives our agent, our client drives the SDK's agent, our echo agent puts the
same updates on the wire as the SDK's, and our duet runs as the SDK's does.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PORTS = ROOT / "examples" / "from-sdk"
ORIGINALS = Path(__file__).resolve().parent / "fixtures" / "sdk-examples"
EXAMPLES = ("agent.py", "client.py", "echo_agent.py", "duet.py")
TIMEOUT = 30
# What the example client prints for the prompt "hello" to the example agent (`> ` is its prompt).
HELLO = "> | Agent: Client sent:\n| Agent: hello\n> "


def non_blank(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


@pytest.mark.parametrize("name", EXAMPLES)
def test_port_is_no_longer_than_the_original(name: str) -> None:
    port, original = non_blank(PORTS / name), non_blank(ORIGINALS / name)
    assert port <= original, f"{name}: port {port} non-blank lines, original {original}"
    assert "Ported from the official Python SDK's examples/" + name in (PORTS / name).read_text()


def test_the_license_and_the_line_counts_are_given() -> None:
    assert (PORTS / "LICENSE").read_text() == (ORIGINALS / "LICENSE").read_text()
    assert "Apache License" in (PORTS / "LICENSE").read_text()
    readme = (PORTS / "README.md").read_text()
    for name in EXAMPLES:  # the README's table states both counts
        assert re.search(rf"`{name}` \| {non_blank(ORIGINALS / name)} \| {non_blank(PORTS / name)} \|", readme), name


def run(*command: Path, stdin: str = "hello\n") -> str:
    result = subprocess.run(
        [sys.executable, *map(str, command)], input=stdin, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_sdk_client_drives_our_agent() -> None:
    assert run(ORIGINALS / "client.py", PORTS / "agent.py") == HELLO


@pytest.mark.slow
def test_our_client_drives_the_sdk_agent() -> None:
    assert run(PORTS / "client.py", ORIGINALS / "agent.py") == HELLO


@pytest.mark.slow
def test_our_duet_runs_as_the_sdks() -> None:
    assert run(PORTS / "duet.py") == HELLO


async def _echo_wire(agent: Path) -> list[Any]:
    """initialize, session/new, one prompt of two blocks: every message the agent sends,
    with the session id replaced (both make a random one)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(agent), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None
    sent: list[Any] = []

    async def call(msg_id: int, method: str, params: dict[str, Any]) -> Any:
        line = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        process.stdin.write(json.dumps(line).encode() + b"\n")  # type: ignore[union-attr]
        while True:
            message = json.loads(await asyncio.wait_for(process.stdout.readline(), TIMEOUT))  # type: ignore[union-attr]
            sent.append(message)
            if message.get("id") == msg_id:
                return message["result"]

    try:
        await call(0, "initialize", {"protocolVersion": 1})
        session = (await call(1, "session/new", {"cwd": "/", "mcpServers": []}))["sessionId"]
        prompt = [{"type": "text", "text": "hello"}, {"type": "resource_link", "name": "a", "uri": "file:///a"}]
        await call(2, "session/prompt", {"sessionId": session, "prompt": prompt})
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), TIMEOUT)
    return json.loads(json.dumps(sent).replace(session, "SESSION"))


@pytest.mark.slow
def test_echo_agent_sends_what_the_sdks_sends() -> None:
    async def both() -> tuple[list[Any], list[Any]]:
        return await asyncio.gather(_echo_wire(PORTS / "echo_agent.py"), _echo_wire(ORIGINALS / "echo_agent.py"))

    ours, theirs = asyncio.run(both())
    updates = [m for m in ours if m.get("method") == "session/update"]
    assert len(updates) == 2 and updates[0]["params"]["_meta"] == {"source": "echo_agent"}
    assert updates[0]["params"]["update"]["content"] == {"type": "text", "text": "hello", "_meta": {"echo": True}}
    assert ours[2:] == theirs[2:]  # after initialize and session/new (whose results differ in defaults)
    assert ours[0]["result"]["protocolVersion"] == theirs[0]["result"]["protocolVersion"] == 1
