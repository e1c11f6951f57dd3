#!/usr/bin/env python3
"""One prompt turn, end to end: the agent streams N `session/update` notifications, then answers.

Two processes joined by OS pipes (the client spawns the agent on its stdio), measured as
messages per second received by the client (N updates + the response, each decoded into
its typed object and handed to the handler), for:

    generated client <-> generated agent   (generated/client, generated/agent)
    SDK client       <-> SDK agent         (agent-client-protocol, the official Python SDK)

Both are measured in the same run and printed side by side with their ratio. The generated
code is stdlib-only; it uses orjson when that happens to be installed, so the headline row
blocks orjson in both processes, and a second row (when orjson is installed) shows it on.
Every measurement runs in fresh processes: the client, which spawns its agent.

    python benchmarks/bench_turn.py [--updates 1000] [--turns 20] [--rounds 3]

(`--drive STACK` runs one client and prints its timings as JSON; `--serve STACK` is the agent.)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))
NO_ORJSON = "ACP_BENCH_NO_ORJSON"
if os.environ.get(NO_ORJSON):
    sys.modules["orjson"] = None  # type: ignore[assignment]  # makes `import orjson` fail: stdlib json


# -- the agents -------------------------------------------------------------------------------
def serve_generated() -> None:
    import agent
    from agent import types

    class BenchAgent(agent.Agent):
        async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
            return types.InitializeResponse(
                protocol_version=1, agent_capabilities=types.AgentCapabilities(), auth_methods=[]
            )

        async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
            return types.AuthenticateResponse()

        async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
            return types.NewSessionResponse(session_id="sess_bench")

        async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
            block = params.prompt[0]
            count = int(block.text) if isinstance(block, types.TextContent) else 0
            for i in range(count):
                chunk = types.SessionUpdateAgentMessageChunk(content=types.TextContent(text=f"token {i} "))
                await self.peer.session_update(types.SessionNotification(session_id=params.session_id, update=chunk))
            return types.PromptResponse(stop_reason="end_turn")

        async def session_cancel(self, params: types.CancelNotification) -> None:
            return None

    asyncio.run(agent.run_agent(BenchAgent()))


def serve_sdk() -> None:
    import acp
    from acp.schema import AgentCapabilities, InitializeResponse, NewSessionResponse, PromptResponse

    class SdkBenchAgent:
        conn: Any = None

        def on_connect(self, conn: Any) -> None:
            self.conn = conn

        async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
            return InitializeResponse(protocol_version=1, agent_capabilities=AgentCapabilities(), auth_methods=[])

        async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
            return NewSessionResponse(session_id="sess_bench")

        async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
            count = int(prompt[0].text)
            for i in range(count):
                await self.conn.session_update(
                    session_id=session_id, update=acp.update_agent_message_text(f"token {i} ")
                )
            return PromptResponse(stop_reason="end_turn")

        async def cancel(self, session_id: str, **kwargs: Any) -> None:
            return None

    asyncio.run(acp.run_agent(SdkBenchAgent()))


# -- the clients ------------------------------------------------------------------------------
def agent_command(kind: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--serve", kind]  # inherits ACP_BENCH_NO_ORJSON


async def drive_generated(updates: int, turns: int) -> list[float]:
    import client
    from client import types

    class BenchClient(client.Client):
        def __init__(self) -> None:
            self.count = 0

        async def session_update(self, params: types.SessionNotification) -> None:
            self.count += 1

        async def session_request_permission(
            self, params: types.RequestPermissionRequest
        ) -> types.RequestPermissionResponse:
            return types.RequestPermissionResponse(outcome=types.RequestPermissionOutcomeCancelled())

    bench = BenchClient()
    times: list[float] = []
    async with client.spawn_agent(bench, agent_command("generated")) as spawned:
        peer = spawned.proxy
        await peer.initialize(
            types.InitializeRequest(protocol_version=1, client_capabilities=types.ClientCapabilities())
        )
        session = await peer.session_new(types.NewSessionRequest(cwd=str(ROOT), mcp_servers=[]))
        request = types.PromptRequest(session_id=session.session_id, prompt=[types.TextContent(text=str(updates))])
        for _ in range(turns + 1):  # the first turn warms up
            bench.count = 0
            start = time.perf_counter()
            response = await peer.session_prompt(request)
            times.append(time.perf_counter() - start)
            assert response.stop_reason == "end_turn" and bench.count == updates, bench.count
    return times[1:]


async def drive_sdk(updates: int, turns: int) -> list[float]:
    import acp
    from acp.schema import ClientCapabilities, RequestPermissionResponse

    class SdkBenchClient:
        def __init__(self) -> None:
            self.count = 0

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            self.count += 1

        async def request_permission(self, *args: Any, **kwargs: Any) -> RequestPermissionResponse:
            raise acp.RequestError.method_not_found("session/request_permission")

    bench = SdkBenchClient()
    times: list[float] = []
    command = agent_command("sdk")
    async with acp.spawn_agent_process(bench, command[0], *command[1:], transport_kwargs={"stderr": None}) as (
        conn,
        _process,
    ):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        session = await conn.new_session(cwd=str(ROOT), mcp_servers=[])
        prompt = [acp.text_block(str(updates))]
        for _ in range(turns + 1):
            bench.count = 0
            start = time.perf_counter()
            response = await conn.prompt(session_id=session.session_id, prompt=prompt)
            times.append(time.perf_counter() - start)
            assert response.stop_reason == "end_turn" and bench.count == updates, bench.count
    return times[1:]


def measure(stack: str, updates: int, turns: int, orjson: bool) -> list[float]:
    env = dict(os.environ)
    env.pop(NO_ORJSON, None)
    if not orjson:
        env[NO_ORJSON] = "1"
    command = [sys.executable, str(Path(__file__).resolve()), "--drive", stack]
    command += ["--updates", str(updates), "--turns", str(turns)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{stack} run failed:\n{result.stdout}{result.stderr}")
    times: list[float] = json.loads(result.stdout)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description="prompt-turn throughput: generated bindings vs the official SDK")
    parser.add_argument("--updates", type=int, default=1000, help="session/update notifications per turn")
    parser.add_argument("--turns", type=int, default=20, help="measured turns per round (after one warm-up turn)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the stacks")
    parser.add_argument("--serve", choices=["generated", "sdk"], help=argparse.SUPPRESS)
    parser.add_argument("--drive", choices=["generated", "sdk"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve == "generated":
        return serve_generated()
    if args.serve == "sdk":
        return serve_sdk()
    if args.drive:
        drive = drive_generated if args.drive == "generated" else drive_sdk
        print(json.dumps(asyncio.run(drive(args.updates, args.turns))))
        return None

    from importlib.metadata import version

    have_orjson = importlib.util.find_spec("orjson") is not None
    runs = [("generated", False, "generated client <-> generated agent")]
    if have_orjson:
        runs.append(("generated", True, "  same, with orjson installed"))
    runs.append(("sdk", False, "SDK client <-> SDK agent"))
    results: dict[str, list[float]] = {label: [] for _, _, label in runs}
    for _ in range(args.rounds):  # alternate, so machine noise hits every stack alike
        for stack, orjson, label in runs:
            results[label] += measure(stack, args.updates, args.turns, orjson)

    messages = args.updates + 1  # the updates and the response
    print(f"prompt turn: {args.updates} session/update notifications + the response, agent -> client over OS pipes")
    print(
        f"{args.rounds} rounds x {args.turns} turns per stack, fresh processes each round, after a warm-up turn; "
        f"Python {sys.version.split()[0]}, agent-client-protocol {version('agent-client-protocol')}"
    )
    print()
    print(f"{'':38}{'median msgs/s':>15}{'best msgs/s':>14}{'median turn':>14}")
    rates: dict[str, float] = {}
    for _, _, label in runs:
        median = statistics.median(results[label])
        rates[label] = messages / median
        print(f"{label:38}{messages / median:>15,.0f}{messages / min(results[label]):>14,.0f}{median * 1000:>11.1f} ms")
    print()
    sdk = rates["SDK client <-> SDK agent"]
    print(f"ratio generated / SDK, stdlib json, median: {rates[runs[0][2]] / sdk:.2f}x  (target >= 1.5x)")
    if have_orjson:
        print(f"ratio generated / SDK, with orjson, median: {rates[runs[1][2]] / sdk:.2f}x")
    return None


if __name__ == "__main__":
    main()
