# Ported from the official Python SDK's examples/client.py (agent-client-protocol 0.12.1,
# Apache-2.0: see LICENSE and README.md here) to the generated client package (--unstable:
# elicitation is unstable in ACP 1.21.0). fs/* and terminal/* are optional methods, which the
# base class already answers with -32601 (the SDK example raises that in each by hand), as it
# does unknown extension methods.
import asyncio
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "generated" / "unstable"))  # the golden package

from client import PROTOCOL_VERSION, AgentProxy, Client, RequestError, spawn_agent, types  # noqa: E402
from client.helpers import text_block  # noqa: E402


class ExampleClient(Client):
    async def session_request_permission(
        self, params: types.RequestPermissionRequest
    ) -> types.RequestPermissionResponse:
        raise RequestError.method_not_found("session/request_permission")

    async def elicitation_create(self, params: types.CreateElicitationRequest) -> types.CreateElicitationResponse:
        print(f"| Agent requested input: {getattr(params, 'message', '')} ({type(params).__name__})")
        return types.CreateElicitationResponseDecline()

    async def elicitation_complete(self, params: types.CompleteElicitationNotification) -> None:
        print(f"| Agent completed elicitation: {params.elicitation_id}")

    async def session_update(self, params: types.SessionNotification) -> None:
        if not isinstance(params.update, types.SessionUpdateAgentMessageChunk):
            return

        content = params.update.content
        text: str
        if isinstance(content, types.TextContent):
            text = content.text
        elif isinstance(content, types.ImageContent):
            text = "<image>"
        elif isinstance(content, types.AudioContent):
            text = "<audio>"
        elif isinstance(content, types.ResourceLink):
            text = content.uri or "<resource>"
        elif isinstance(content, types.EmbeddedResource):
            text = "<resource>"
        else:
            text = "<content>"

        print(f"| Agent: {text}")


async def read_console(prompt: str) -> str:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: input(prompt))


async def interactive_loop(conn: AgentProxy, session_id: str) -> None:
    while True:
        try:
            line = await read_console("> ")
        except EOFError:
            break
        except KeyboardInterrupt:
            print("", file=sys.stderr)
            break

        if not line:
            continue

        try:
            await conn.session_prompt(session_id=session_id, prompt=[text_block(line)])
        except Exception as exc:
            logging.error("Prompt failed: %s", exc)  # noqa: TRY400


async def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO)

    if len(argv) < 2:
        print("Usage: python examples/from-sdk/client.py AGENT_PROGRAM [ARGS...]", file=sys.stderr)
        return 2

    program, args = argv[1], argv[2:]
    if Path(program).exists() and not os.access(program, os.X_OK):
        program, args = sys.executable, [program, *args]

    # spawn_agent starts the agent with pipes and, on leaving, stops it and what it started.
    async with spawn_agent(ExampleClient(), [program, *args]) as agent:
        await agent.proxy.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=types.ClientCapabilities(),
            client_info=types.Implementation(name="example-client", title="Example Client", version="0.1.0"),
        )
        session = await agent.proxy.session_new(mcp_servers=[], cwd=os.getcwd())

        await interactive_loop(agent.proxy, session.session_id)

    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv)))
