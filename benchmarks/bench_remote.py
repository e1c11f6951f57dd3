#!/usr/bin/env python3
"""Remote agents at scale: the generated agent's `asgi_app` against the official Python SDK's
`acp.http` ASGI app (agent-client-protocol 0.12.1), both on uvicorn (WebSocket,
websockets-sansio), in the same run, with the same raw WebSocket clients:

1. busy: CONNS concurrent connections, one session each, every one doing TURNS prompt turns
   of UPDATES `session/update` notifications (~60 characters of text each): messages/s (updates
   received by the clients over the busy phase's wall time), p50/p99 turn latency, and RSS per
   connection: the marginal cost, the server's RSS with every connection open less its RSS
   with the first half open, over the second half. (Not "less its RSS before any": the heap
   that start-up leaves free, which compiling from source without cached bytecode makes
   several MB larger, was reused by the first connections and hid their cost; generated/ is
   compiled to bytecode first, as pip compiles an installed package);
2. idle: IDLE connections, each initialized with one session, then held: RSS per connection,
   measured the same way;
3. ours on 2 uvicorn workers, clients spread over both: every update a client receives must
   name its own session and come from the worker that made the session (nothing crosses
   wires, each session stays on its worker); the connections per worker are printed.

    python benchmarks/bench_remote.py [--conns 1000] [--turns 1] [--updates 100] [--idle 10000]

Clients run in `--client-procs` processes (default 2) so that the clients are not the
bottleneck. The open-file limit is raised to its hard limit (resource.setrlimit); if that is
below what a phase needs, the phase runs with as many connections as fit, and says so.
`--compare-servers` runs only the busy phase of ours, on uvicorn and on hypercorn (WebSocket).
`--ab DIR` runs only the busy phase, `--rounds` times: the SDK, ours from DIR (another checkout,
e.g. `git archive <commit> generated | tar -x -C DIR`) and ours from this one, in an order that
alternates each round, so that the machine's load falls on all alike; each round prints the
messages/s ratio to that round's SDK and the server's CPU time per message (user + system, read
from /proc: less moved by other jobs than wall time). Ours from DIR is served with the checks
its code has (authentication only where its `asgi_app` takes `authenticate`).
(`--serve STACK` is the server process, `--client` one client process.)
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import inspect
import json
import os
import resource
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The agent package served as "ours": this checkout's, or another's (`--ab`), through the
# environment because uvicorn imports this module again by name in the server process.
AGENT_ROOT = Path(os.environ.get("BENCH_AGENT_ROOT", str(ROOT)))
sys.path.insert(0, str(AGENT_ROOT / "generated"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TEXT = "the quick brown fox jumps over the lazy dog, again and again"
PID = os.getpid()
TOKEN = "bench-token-0123456789abcdef"
AUTH = {"authorization": f"Bearer {TOKEN}"}  # sent to both stacks; the SDK's app ignores it


# -- the two agents: a prompt sends UPDATES chunks "PID:i TEXT", then ends the turn ------------
def make_ours() -> Any:
    import agent
    from agent import types as at

    class Ours(agent.Agent):
        async def initialize(self, params: at.InitializeRequest) -> at.InitializeResponse:
            return at.InitializeResponse(protocol_version=1)

        async def authenticate(self, params: at.AuthenticateRequest) -> at.AuthenticateResponse:
            return at.AuthenticateResponse()

        async def session_new(self, params: at.NewSessionRequest) -> at.NewSessionResponse:
            return at.NewSessionResponse(session_id=f"{PID}-{uuid.uuid4().hex}")

        async def session_cancel(self, params: at.CancelNotification) -> None:
            return None

        async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
            block = params.prompt[0]
            count = int(block.text) if isinstance(block, at.TextContent) else 0
            for i in range(count):
                chunk = at.SessionUpdateAgentMessageChunk(content=at.TextContent(text=f"{PID}:{i} {TEXT}"))
                await self.peer.session_update(session_id=params.session_id, update=chunk)
            return at.PromptResponse(stop_reason="end_turn")

    if "authenticate" not in inspect.signature(agent.asgi_app).parameters:  # code before issue 28
        return agent.asgi_app(Ours, max_connections=None, idle_timeout=None)
    if os.environ.get("BENCH_CHECKS") == "off":  # --ab's "off": this code, no hook, every cap off
        from agent.remote_limits import Limits as Caps

        caps = Caps(
            max_pending=None,
            max_sessions=None,
            max_streams=None,
            max_per_client=None,
            initialize_timeout=None,
            http_idle_timeout=None,
            body_timeout=None,
            max_inflight_bytes=None,
            max_running=None,
            connection_rate=None,
            session_rate=None,
            client_session_rate=None,
        )
        return agent.asgi_app(Ours, max_connections=None, idle_timeout=None, limits=caps, allowed_hosts=["*"])
    # Authentication and the Host/Origin checks on, as a deployment has them (issue 28). Every client
    # comes from 127.0.0.1, so the per-address cap (256) is off, as the connection cap is.
    from agent.remote_limits import Limits

    tokens = agent.BearerTokens({TOKEN: "bench"})
    # Every client comes from 127.0.0.1: the per-address limits (a cap, the rates of connections
    # and sessions) would measure the pacing, not the server.
    limits = Limits(max_per_client=None, connection_rate=None, client_session_rate=None)
    return agent.asgi_app(Ours, max_connections=None, idle_timeout=None, authenticate=tokens, limits=limits)


def make_sdk() -> Any:
    from acp import InitializeResponse, NewSessionResponse, PromptResponse, text_block, update_agent_message
    from acp.http.asgi import create_asgi_app

    class Sdk:
        def on_connect(self, conn: Any) -> None:
            self.conn = conn

        async def initialize(self, protocol_version: int, **kwargs: Any) -> Any:
            return InitializeResponse(protocol_version=1)

        async def new_session(self, cwd: str, **kwargs: Any) -> Any:
            return NewSessionResponse(session_id=f"{PID}-{uuid.uuid4().hex}")

        async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
            for i in range(int(prompt[0].text)):
                update = update_agent_message(text_block(f"{PID}:{i} {TEXT}"))
                await self.conn.session_update(session_id=session_id, update=update)
            return PromptResponse(stop_reason="end_turn")

        async def cancel(self, session_id: str, **kwargs: Any) -> None:
            return None

    return create_asgi_app(lambda conn: Sdk())


def serve(stack: str, port: int, workers: int, asgi: str) -> None:
    factory = {"ours": "make_ours", "sdk": "make_sdk"}[stack]
    if asgi == "hypercorn":
        from hypercorn.asyncio import serve as hypercorn_serve
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.backlog = 4096
        config.loglevel = "WARNING"
        config.accesslog = None
        app = make_ours() if stack == "ours" else make_sdk()
        asyncio.run(hypercorn_serve(app, config))  # type: ignore[arg-type]
        return
    import uvicorn

    uvicorn.run(
        f"bench_remote:{factory}",
        factory=True,
        host="127.0.0.1",
        port=port,
        workers=workers,
        ws="websockets-sansio",
        log_level="warning",
        lifespan="off",
        backlog=4096,
        ws_per_message_deflate=False,
    )


# -- one client process -----------------------------------------------------------------------
def rpc(msg_id: int, method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})


async def client(args: argparse.Namespace) -> None:
    import websockets

    ready = asyncio.Event()
    established = 0
    latencies: list[float] = []
    updates = 0
    crossed = 0
    pids: dict[str, int] = {}
    gate = asyncio.Semaphore(100)  # connections being opened at once

    async def answer(ws: Any) -> dict[str, Any]:
        while True:
            frame = await ws.recv()
            if '"method":"session/update"' not in frame:
                message: dict[str, Any] = json.loads(frame)
                return message

    async def one() -> None:
        nonlocal established, updates, crossed
        async with gate:
            ws = await websockets.connect(
                args.url, max_size=None, compression=None, open_timeout=60, additional_headers=AUTH
            )
            await ws.send(rpc(0, "initialize", {"protocolVersion": 1}))
            await answer(ws)
            await ws.send(rpc(1, "session/new", {"cwd": "/", "mcpServers": []}))
            session = (await answer(ws))["result"]["sessionId"]
        pid = session.split("-")[0]
        pids[pid] = pids.get(pid, 0) + 1
        established += 1
        if established == args.conns:
            ready.set()
        try:
            await go.wait()  # all connected, the driver has measured the server's RSS
            for turn in range(args.turns):
                start = time.perf_counter()
                await ws.send(
                    rpc(
                        2 + turn,
                        "session/prompt",
                        {"sessionId": session, "prompt": [{"type": "text", "text": str(args.updates)}]},
                    )
                )
                while True:
                    frame = await ws.recv()
                    if '"method":"session/update"' in frame:
                        updates += 1
                        if args.check:
                            params = json.loads(frame)["params"]
                            text = params["update"]["content"]["text"]
                            if params["sessionId"] != session or text.split(":")[0] != pid:
                                crossed += 1
                        continue
                    if json.loads(frame).get("id") == 2 + turn:
                        break
                latencies.append(time.perf_counter() - start)
        finally:
            await ws.close()

    go = asyncio.Event()
    tasks = [asyncio.ensure_future(one()) for _ in range(args.conns)]
    # Bounded: no connection ends before "go", so one that ends first failed (a server gone).
    waiting = asyncio.ensure_future(ready.wait())
    done, _ = await asyncio.wait([waiting, *tasks], timeout=600, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        failed = next((t for t in done if t is not waiting and t.exception() is not None), None)
        why = "timed out" if failed is None else repr(failed.exception())
        print(json.dumps({"ready": False, "error": f"{established} of {args.conns} connected: {why}"}), flush=True)
        os._exit(1)
    print(json.dumps({"ready": True}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # "go"
    started = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - started
    result = {"latencies": latencies, "updates": updates, "crossed": crossed, "pids": pids, "wall": wall}
    print(json.dumps(result), flush=True)


# -- the driver ---------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def rss_kib(pid: int) -> int:
    """The RSS of `pid` and its children (uvicorn's workers)."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for one in pids:
        for line in Path(f"/proc/{one}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` and its children (uvicorn's workers), from /proc."""
    total = 0.0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for one in pids:
        fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return total


class Server:
    def __init__(
        self, stack: str, workers: int = 1, asgi: str = "uvicorn", agent_root: Path | None = None, checks: bool = True
    ) -> None:
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}/acp"
        cmd = [sys.executable, __file__, "--serve", stack, "--port", str(self.port), "--workers", str(workers)]
        cmd += ["--asgi", asgi]
        env = dict(os.environ, BENCH_AGENT_ROOT=str(agent_root or ROOT), BENCH_CHECKS="on" if checks else "off")
        self.proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    raise SystemExit(f"the {stack} server did not start (exit code {self.proc.poll()})") from None
                time.sleep(0.1)
        time.sleep(0.5 * workers)  # every worker imported and serving

    def rss(self) -> int:
        return rss_kib(self.proc.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def run_clients(
    url: str,
    conns: int,
    procs: int,
    *,
    turns: int,
    updates: int,
    check: bool = False,
    on_half: Any = None,
    on_ready: Any = None,
    on_done: Any = None,
) -> list[dict[str, Any]]:
    """Open `conns` connections in two waves of `procs` client processes each (`on_half` runs
    once the first half is open, `on_ready` once all are), then let every client do its turns."""
    half = conns // 2
    waves = [half, conns - half] if on_half is not None and half else [conns]
    clients: list[subprocess.Popen[str]] = []
    for number, wave in enumerate(waves):
        started = []
        for share in [wave // procs + (1 if i < wave % procs else 0) for i in range(procs)]:
            if not share:
                continue
            cmd = [sys.executable, __file__, "--client", "--url", url, "--conns", str(share)]
            cmd += ["--turns", str(turns), "--updates", str(updates)] + (["--check"] if check else [])
            started.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        clients += started
        for proc in started:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line or not json.loads(line)["ready"]:
                for other in clients:
                    other.kill()
                raise SystemExit(f"the clients could not connect to {url}: {line.strip() or 'no answer'}")
        if number == 0 and len(waves) == 2:
            on_half()
    if on_ready is not None:
        on_ready()
    for proc in clients:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in clients:
        assert proc.stdout is not None
        results.append(json.loads(proc.stdout.readline()))
    if on_done is not None:  # every client has its answers (their sockets are being closed)
        on_done()
    for proc in clients:
        proc.wait(60)
    return results


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def busy(
    stack: str, args: argparse.Namespace, asgi: str = "uvicorn", agent_root: Path | None = None, checks: bool = True
) -> dict[str, float]:
    server = Server(stack, asgi=asgi, agent_root=agent_root, checks=checks)
    seen: dict[str, float] = {}
    results = run_clients(
        server.url,
        args.conns,
        args.client_procs,
        turns=args.turns,
        updates=args.updates,
        on_half=lambda: seen.update(half=server.rss()),
        on_ready=lambda: seen.update(rss=server.rss(), cpu=server.cpu()),
        on_done=lambda: seen.update(cpu_end=server.cpu()),
    )
    server.stop()
    latencies = [x for r in results for x in r["latencies"]]
    received = sum(r["updates"] for r in results)
    wall = max(r["wall"] for r in results)
    assert received == args.conns * args.turns * args.updates, (received, stack)
    return {
        "msgs": received / wall,
        "p50": pct(latencies, 0.5) * 1000,
        "p99": pct(latencies, 0.99) * 1000,
        "rss": (seen["rss"] - seen["half"]) / (args.conns - args.conns // 2),
        "cpu_us": (seen["cpu_end"] - seen["cpu"]) / received * 1e6,  # the server's, per update sent
    }


def idle(stack: str, conns: int, args: argparse.Namespace, agent_root: Path | None = None) -> float:
    server = Server(stack, agent_root=agent_root)
    seen: dict[str, int] = {}
    run_clients(
        server.url,
        conns,
        args.client_procs,
        turns=0,
        updates=0,
        on_half=lambda: seen.update(half=server.rss()),
        on_ready=lambda: seen.update(rss=server.rss()),
    )
    server.stop()
    return (seen["rss"] - seen["half"]) / (conns - conns // 2)


def workers(args: argparse.Namespace) -> None:
    server = Server("ours", workers=2)
    conns = min(args.conns, 200)
    results = run_clients(server.url, conns, args.client_procs, turns=2, updates=args.updates, check=True)
    server.stop()
    pids: dict[str, int] = {}
    for r in results:
        for pid, n in r["pids"].items():
            pids[pid] = pids.get(pid, 0) + n
    crossed = sum(r["crossed"] for r in results)
    received = sum(r["updates"] for r in results)
    print(f"\n2 uvicorn workers (ours), {conns} connections x 2 turns: {received} updates, {crossed} crossed wires")
    print(f"  sessions per worker pid: {dict(sorted(pids.items()))}")
    if crossed or len(pids) != 2 or received != conns * 2 * args.updates:
        print("  FAILED: an update reached the wrong session or worker, or a worker got no connection")
        sys.exit(1)
    print("  ok: every update named its own session and came from the worker that made it")


def ab(args: argparse.Namespace) -> None:
    """The busy phase of the SDK, ours from `args.ab` ("before"), ours from here with the checks
    off ("off": no hook, every cap and deadline off, any Host) and on ("after"), `args.rounds`
    times, the order reversed every other round: ratios to the SDK of the same round."""
    before = Path(args.ab).resolve()
    names = ("sdk", "before", "off", "after")
    print(f"busy: {args.conns} connections x {args.turns} turns x {args.updates} updates; before = {before}")
    print(f"{'round':>5} {'load':>5} |{'msg/s:':>7}", "".join(f"{n:>8}" for n in names), end=" |")
    print(" ratio:", "".join(f"{n:>7}" for n in names[1:]), end=" |")
    print(" CPU us/msg:", "".join(f"{n:>7}" for n in names))
    rows: list[dict[str, dict[str, float]]] = []
    for n in range(args.rounds):
        order = names if n % 2 == 0 else names[::-1]
        load = os.getloadavg()[0]
        got: dict[str, dict[str, float]] = {}
        for name in order:
            root = before if name == "before" else ROOT
            got[name] = busy("sdk" if name == "sdk" else "ours", args, agent_root=root, checks=name != "off")
        rows.append(got)
        print(f"{n + 1:>5} {load:>5.2f} |{'':>7}", "".join(f"{got[k]['msgs']:>8,.0f}" for k in names), end=" |")
        print(" " * 7, "".join(f"{got[k]['msgs'] / got['sdk']['msgs']:>7.2f}" for k in names[1:]), end=" |")
        print(" " * 12, "".join(f"{got[k]['cpu_us']:>7.1f}" for k in names), flush=True)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    ratio = {k: mean([r[k]["msgs"] / r["sdk"]["msgs"] for r in rows]) for k in names[1:]}
    cpu = {k: mean([r[k]["cpu_us"] for r in rows]) for k in names}
    print("mean ratio to the SDK:", ", ".join(f"{k} {ratio[k]:.2f}" for k in names[1:]), end="")
    vs_before, vs_off = ratio["after"] / ratio["before"] - 1, ratio["after"] / ratio["off"] - 1
    print(f" (after/before {vs_before:+.1%}, after/off {vs_off:+.1%})")
    print("mean server CPU us/msg:", ", ".join(f"{k} {cpu[k]:.1f}" for k in names), end="")
    print(f" (after/before {cpu['after'] / cpu['before']:.3f}, after/off {cpu['after'] / cpu['off']:.3f})")
    print("SDK CPU / ours CPU:", ", ".join(f"{k} {cpu['sdk'] / cpu[k]:.2f}" for k in names[1:]))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def ab_rss(args: argparse.Namespace) -> None:
    """RSS per connection, busy and idle, of ours from `args.ab_rss` ("before"), ours from here
    ("after") and the SDK, `args.rounds` times, the order reversed every other round."""
    before = Path(args.ab_rss).resolve()
    runs = (("before", "ours", before), ("after", "ours", ROOT), ("sdk", "sdk", ROOT))
    print(f"RSS KiB/conn: busy {args.conns}, idle {args.idle} connections; before = {before}")
    for n in range(args.rounds):
        load = os.getloadavg()[0]
        got: dict[str, tuple[float, float]] = {}
        for name, stack, root in runs if n % 2 == 0 else runs[::-1]:
            got[name] = (busy(stack, args, agent_root=root)["rss"], idle(stack, args.idle, args, agent_root=root))
        sdk = got["sdk"]
        cells = [f"{k} {b:.1f} / {i:.1f} ({b / sdk[0]:.2f}x / {i / sdk[1]:.2f}x)" for k, (b, i) in got.items()]
        print(f"round {n + 1} (load {load:.2f}): busy / idle:", ", ".join(sorted(cells)), flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conns", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=1)
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--client-procs", type=int, default=2)
    parser.add_argument("--serve", choices=["ours", "sdk"])
    parser.add_argument("--port", type=int)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--client", action="store_true")
    parser.add_argument("--url")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--asgi", choices=["uvicorn", "hypercorn"], default="uvicorn")
    parser.add_argument(
        "--compare-servers", action="store_true", help="only the busy phase of ours, on uvicorn and on hypercorn"
    )
    parser.add_argument("--ab", metavar="DIR", help="A/B: ours from DIR/generated against ours from here")
    parser.add_argument("--ab-rss", metavar="DIR", help="A/B of RSS per connection: ours from DIR against here")
    parser.add_argument("--rounds", type=int, default=3, help="--ab and --ab-rss rounds")
    args = parser.parse_args()
    limit = raise_fd_limit()
    if not args.serve and not args.client:
        # Bytecode in a known state, as an installed package has it (pip compiles what it
        # installs): a server compiling generated/ from source leaves megabytes of its heap free,
        # which the first connections reuse, and their cost would not show.
        for root in {ROOT, AGENT_ROOT} | {Path(d) for d in (args.ab, args.ab_rss) if d}:
            compileall.compile_dir(root / "generated", quiet=2)
    if args.serve:
        serve(args.serve, args.port, args.workers, args.asgi)
        return
    if args.compare_servers:
        args.conns = min(args.conns, limit - 200)
        print(f"ours, busy: {args.conns} connections x {args.turns} turns x {args.updates} updates")
        for asgi in ("uvicorn", "hypercorn"):
            got = busy("ours", args, asgi)
            print(f"  {asgi:10} {got['msgs']:>8,.0f} msgs/s  p50 {got['p50']:.0f} ms  p99 {got['p99']:.0f} ms")
            print(f"  {'':10} RSS {got['rss']:.1f} KiB/conn")
        return
    if args.client:
        asyncio.run(client(args))
        return
    if args.ab:
        args.conns = min(args.conns, limit - 200)
        ab(args)
        return
    if args.ab_rss:
        args.conns, args.idle = min(args.conns, limit - 200), min(args.idle, limit - 200)
        ab_rss(args)
        return
    # Each connection costs the server one descriptor and its client process one.
    fit = limit - 200
    conns = min(args.conns, fit)
    idle_conns = min(args.idle, fit)
    for wanted, got, name in ((args.conns, conns, "busy"), (args.idle, idle_conns, "idle")):
        if got < wanted:
            print(f"note: the open-file limit ({limit}) allows {got} {name} connections, not {wanted}")
    args.conns = conns
    print(f"busy: {conns} WebSocket connections x {args.turns} turns x {args.updates} updates (uvicorn, 1 worker)")
    figures: dict[str, dict[str, float]] = {}
    for stack in ("ours", "sdk"):
        start = time.perf_counter()
        figures[stack] = busy(stack, args)
        print(f"  {stack}: {time.perf_counter() - start:.0f} s")
    print(f"idle: {idle_conns} connections, one session each")
    for stack in ("ours", "sdk"):
        start = time.perf_counter()
        figures[stack]["idle"] = idle(stack, idle_conns, args)
        print(f"  {stack}: {time.perf_counter() - start:.0f} s")
    ours, sdk = figures["ours"], figures["sdk"]
    rows = [
        ("messages/s (busy)", "msgs", "{:,.0f}"),
        ("turn latency p50 ms", "p50", "{:.1f}"),
        ("turn latency p99 ms", "p99", "{:.1f}"),
        ("RSS KiB/conn (busy)", "rss", "{:.1f}"),
        ("RSS KiB/conn (idle)", "idle", "{:.1f}"),
    ]
    print(f"\n{'':24}{'ours':>12}{'SDK':>12}{'ours/SDK':>10}")
    for label, key, fmt in rows:
        ratio = ours[key] / sdk[key] if sdk[key] else float("nan")
        print(f"{label:24}{fmt.format(ours[key]):>12}{fmt.format(sdk[key]):>12}{ratio:>10.2f}")
    print("goals: messages/s ratio >= 2.00, RSS/conn ratio <= 0.50")
    workers(args)


if __name__ == "__main__":
    main()
