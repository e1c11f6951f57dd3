# Ported from the official Python SDK's examples/duet.py (agent-client-protocol 0.12.1,
# Apache-2.0: see LICENSE and README.md here): client.py drives agent.py, both ported.
import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def _load_client_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("examples_client", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"Unable to load client module from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("examples_client", module)
    spec.loader.exec_module(module)
    return module


async def main() -> int:
    root = Path(__file__).resolve().parent
    agent_path = root / "agent.py"

    client_module = _load_client_module(root / "client.py")
    client = client_module.ExampleClient()

    # The agent inherits this environment (env= would replace it, where the SDK merges).
    async with client_module.spawn_agent(client, [sys.executable, str(agent_path)]) as agent:
        await agent.proxy.initialize(protocol_version=client_module.PROTOCOL_VERSION)
        session = await agent.proxy.session_new(mcp_servers=[], cwd=str(root))
        await client_module.interactive_loop(agent.proxy, session.session_id)

    return agent.returncode or 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
