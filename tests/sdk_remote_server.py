"""The SDK echo agent (tests/sdk_echo_agent.py) served remotely by the official SDK's
`acp.http.AcpServer` (its ASGI adapter), for the remote client's interop tests:

    python tests/sdk_remote_server.py uvicorn|hypercorn [--port N] [--store FILE]

uvicorn serves WebSocket (HTTP/1.1), hypercorn Streamable HTTP over HTTP/2 (h2c) and WebSocket.
Binds 127.0.0.1 (port 0: a free one) and prints `listening PORT` once it is ready; stops on
SIGTERM. Sessions live in one store for every connection (sessions outlive connections), kept in
`--store` across restarts. A middleware sets an affinity cookie, as a load balancer would, and
counts the requests that came back without it: `GET /stats` answers them as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import signal
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from acp.http.asgi import create_asgi_app  # noqa: E402
from asgi_serving import COOKIE, Affinity, bound_socket, serving  # noqa: E402, F401 - re-exported for the tests
from sdk_echo_agent import SdkEchoAgent, Session  # noqa: E402

SESSIONS: dict[str, Session] = {}


class SharedSessionsAgent(SdkEchoAgent):
    """The echo agent, one per connection, all with the same sessions."""

    def __init__(self) -> None:
        super().__init__()
        self.sessions = SESSIONS


def make_app() -> Affinity:
    return Affinity(create_asgi_app(lambda conn: SharedSessionsAgent()))


async def serve(server: str, sock: socket.socket) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with serving(server, sock, make_app()):
        print(f"listening {sock.getsockname()[1]}", flush=True)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("server", choices=["uvicorn", "hypercorn"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--store", type=Path)
    args = parser.parse_args()
    if args.store is not None and args.store.exists():
        SESSIONS.update(pickle.loads(args.store.read_bytes()))
    sock = bound_socket(args.port)
    try:
        asyncio.run(serve(args.server, sock))
    finally:
        if args.store is not None:
            for session in SESSIONS.values():
                session.cancelled = None  # an asyncio.Event does not pickle
            args.store.write_bytes(pickle.dumps(SESSIONS))


if __name__ == "__main__":
    main()
