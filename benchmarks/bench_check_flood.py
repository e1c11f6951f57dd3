#!/usr/bin/env python3
"""The conformance kit against a flood: an agent whose prompt turn streams N session/update
notifications (issue 30 §2: 100,000 in 0.08 s made prompt-turn "not testable" while the kit
spent 9.2 s reading them, about 11k msgs/s of strict decoding).

Measured in one run, as ratios:
- schema-strict (`conformance_messages.strict`) over N recorded updates, against `json.loads`
  of the same lines and against the package's own decoding of them (the target: about the
  package's own decode speed);
- a whole `check_agent` run selecting prompt-turn, on an in-process agent streaming N updates:
  its verdict (it must pass) and its wall time.

    python benchmarks/bench_check_flood.py [--updates 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import _common  # noqa: F401  # generated/ on sys.path
from agent import Agent, types
from agent.helpers import update_agent_message_text
from agent.methods import METHODS
from agent.testing import Options, check_agent, compile_selection
from agent.testing.conformance_messages import strict
from agent.testing.scripted import Line


def _lines(n: int) -> list[bytes]:
    message = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s",
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "chunk"}},
        },
    }
    return [json.dumps(message).encode()] * n


class _Client:
    def __init__(self, lines: list[Line]) -> None:
        self.received = lines

    def sent_method(self, msg_id: object) -> str | None:
        return None


class _Run:
    def __init__(self, lines: list[Line]) -> None:
        self.client = _Client(lines)


def bench_strict(n: int) -> dict[str, float]:
    raw = _lines(n)
    lines = [Line(i, line, json.loads(line)) for i, line in enumerate(raw)]
    began = time.perf_counter()
    outcome = strict([_Run(lines)])  # type: ignore[list-item]  # the two attributes it reads
    kit = time.perf_counter() - began
    assert outcome[0] == "passed", outcome
    began = time.perf_counter()
    for line in raw:
        json.loads(line)
    parse = time.perf_counter() - began
    decode_params = METHODS["session/update"].decode_params
    began = time.perf_counter()
    for line in lines:
        decode_params(line.message["params"], types.DecodeContext(strict=True))
    decode = time.perf_counter() - began
    return {"kit": n / kit, "json.loads": n / parse, "decode": n / decode}


class Flood(Agent):
    """Streams `updates` chunks in every prompt turn, then ends it."""

    updates = 100_000

    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        return types.InitializeResponse(protocol_version=1, agent_info=types.Implementation(name="flood", version="1"))

    async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
        return types.AuthenticateResponse()

    async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
        return types.NewSessionResponse(session_id=f"flood-{os.urandom(4).hex()}")

    async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
        update = update_agent_message_text("chunk")
        for _ in range(self.updates):
            await self.peer.session_update(session_id=params.session_id, update=update)
        return types.PromptResponse(stop_reason="end_turn")

    async def session_cancel(self, params: types.CancelNotification) -> None:
        return None


def bench_check(n: int) -> tuple[str, float]:
    Flood.updates = n
    began = time.perf_counter()
    report = check_agent(Flood, Options(select=compile_selection("prompt-turn")))
    return report.result("prompt-turn").status, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=100_000)
    args = parser.parse_args()
    rates = bench_strict(args.updates)
    print(f"schema-strict over {args.updates:,} updates: {rates['kit']:,.0f} msgs/s")
    print(f"  json.loads of the same lines: {rates['json.loads']:,.0f}/s ({rates['kit'] / rates['json.loads']:.2f}x)")
    print(f"  the package's strict decode: {rates['decode']:,.0f}/s ({rates['kit'] / rates['decode']:.2f}x)")
    status, took = bench_check(args.updates)
    print(f"check_agent -k prompt-turn, an agent streaming {args.updates:,} updates: {status} in {took:.1f} s")


if __name__ == "__main__":
    main()
