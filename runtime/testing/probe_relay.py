"""The probe agent's process: what a client under test spawns as its agent.

    python probe_relay.py --channel /tmp/acp-check-client-xyz/probe.sock

It connects to the checker's Unix socket (the side channel the checker owns), says which
process it is on one first line (`{"probe": PID}`), then relays bytes both ways unchanged:
its stdin to the socket, the socket to its stdout. The checker plays the agent (the scenario,
the recording, the strict decoding) on the other end, so every line is seen exactly as the
client wrote it. It exits when either side closes (the client's EOF, as an agent should), so
it never outlives the checker.

A standalone script on purpose: run by path, it imports nothing of its package, so it works
whatever the client's environment and working directory. Standard library only; POSIX.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

_CHUNK = 64 * 1024


def _stdin_to_socket(sock: socket.socket) -> None:
    try:
        while True:
            data = os.read(0, _CHUNK)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_WR)  # the checker sees the client's EOF
    except OSError:
        pass
    # An agent exits at EOF: the client is done with it (and may be waiting for it to end).
    os._exit(0)


def _socket_to_stdout(sock: socket.socket) -> None:
    while True:
        data = sock.recv(_CHUNK)
        if not data:
            return
        view = memoryview(data)
        while view:
            view = view[os.write(1, view) :]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "--channel":
        sys.stderr.write("usage: probe_relay.py --channel SOCKET (started by check-client)\n")
        return 2
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(argv[1])
        sock.sendall(json.dumps({"probe": os.getpid()}).encode() + b"\n")
    except OSError as exc:
        sys.stderr.write(f"probe agent: cannot reach the checker at {argv[1]}: {exc}\n")
        return 2
    threading.Thread(target=_stdin_to_socket, args=(sock,), daemon=True).start()
    try:
        _socket_to_stdout(sock)
    except OSError:
        pass  # the client closed our stdout, or the checker went away
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # the stdin thread may be blocked in read(): do not wait for it
