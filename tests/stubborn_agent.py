"""An ACP agent (generated `agent` package) that is hard to stop, for tests/test_runtime_process.py.

    python tests/stubborn_agent.py PIDFILE MODE [STDERR_BYTES]

It first starts a grandchild that holds the agent's stdout open, ignores EOF and SIGTERM and
sleeps forever, and writes the grandchild's pid to PIDFILE. Then it serves ACP on stdio until
EOF (writing STDERR_BYTES of stderr lines before answering `initialize`). MODE decides what
happens at EOF:

- `exit`: the agent exits (like a node wrapper whose native child lingers);
- `stubborn`: the agent itself ignores SIGTERM and keeps sleeping;
- `detached`: as `exit`, but the grandchild leaves the process group first (`setsid`, what
  node's `spawn(..., {detached: true})` does);
- `clean`: no grandchild; the agent exits with status 3.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated"))

from agent import Agent, run_agent, types  # noqa: E402

GRANDCHILD = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    time.sleep(1)\n"


class StubbornAgent(Agent):
    def __init__(self, stderr_bytes: int) -> None:
        self.stderr_bytes = stderr_bytes

    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        line = b"x" * 99 + b"\n"
        for _ in range(self.stderr_bytes // len(line)):
            sys.stderr.buffer.write(line)  # blocks if nobody drains the pipe
        sys.stderr.buffer.write(b"stderr done\n")
        sys.stderr.flush()
        return types.InitializeResponse(protocol_version=1)

    async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
        return types.AuthenticateResponse()

    async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
        return types.NewSessionResponse(session_id="s")

    async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
        return types.PromptResponse(stop_reason="end_turn")

    async def session_cancel(self, params: types.CancelNotification) -> None:
        return None


def main() -> None:
    pidfile, mode = sys.argv[1], sys.argv[2]
    stderr_bytes = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    if mode != "clean":
        # It inherits our stdout (and holds it open).
        grandchild = subprocess.Popen([sys.executable, "-c", GRANDCHILD], start_new_session=mode == "detached")
        Path(pidfile + ".tmp").write_text(str(grandchild.pid))
        os.replace(pidfile + ".tmp", pidfile)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    asyncio.run(run_agent(StubbornAgent(stderr_bytes)))
    if mode == "stubborn":
        while True:
            time.sleep(1)
    sys.exit(3 if mode == "clean" else 0)


if __name__ == "__main__":
    main()
