#!/usr/bin/env python3
"""The echo client of the echo contract, built only on the generated `client` package.

    python examples/echo_client.py <agent command...>
    python examples/echo_client.py python examples/echo_agent.py
    python examples/echo_client.py --url ws://127.0.0.1:8000/acp [--reconnect]
    python examples/echo_client.py --url http://127.0.0.1:8000/acp [--reconnect]
    python examples/echo_client.py --url https://host/acp --token-file tokens.txt --verify ca.pem

Spawns the agent (or, with `--url`, connects to one served remotely: WebSocket for ws://,
Streamable HTTP for http://), runs one scripted session against it (initialize, session/new,
an echo, a file read it serves, a permission request it grants, a slow turn it cancels, a
switch to the `code` mode and a prompt in it, and session/load if the agent supports it),
prints one line per step and a closing line `N passed, M failed`. Exits 0 when every step
passed. `--reconnect` (remote only) adds a last step: drop the connection, open a new one,
initialize again and session/load the session there (sessions outlive connections).
`--token-file FILE` sends the file's first token (the agent's format: `TOKEN` or `NAME TOKEN` a
line; blank and `#` lines skipped) as `Authorization: Bearer`; `--verify` is the TLS trust for
wss:// and https://: a CA file, or `no` to skip verification (default: the system's CAs, or
SSL_CERT_FILE / SSL_CERT_DIR).

Calls use the proxies' keyword form: `agent.session_prompt(session_id=..., prompt=[...])`.
The session's state is a `contrib.SessionAccumulator` (one per session): the steps read the
turns from its snapshot, and at the end the transcript it rendered goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

# The example imports the checked-in generated package, wherever it is run from.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated"))

from client import (
    GENERATOR_VERSION,
    PROTOCOL_VERSION,
    AgentProxy,
    Client,
    RemoteUnavailable,
    RequestError,
    connect_remote,
    contrib,
    spawn_agent,
    types,
)  # noqa: E402

STEP_TIMEOUT = 10.0
CODE_MODE = "code"
STEPS_AFTER_NEW = (
    "prompt hello",
    "prompt read",
    "prompt permission",
    "prompt slow + cancel",
    "session/set_mode",
    "prompt in code mode",
)
READ_FILE_CONTENT = "echo client test file\nline 2: héllo wörld\n"


class StepFailed(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


class EchoClient(Client):
    """Folds every session/update into its session's accumulator; serves the file system
    inside its sandbox directory."""

    def __init__(self, sandbox: Path) -> None:
        self.sandbox = sandbox.resolve()
        self.sessions: dict[str, contrib.SessionAccumulator] = {}
        self.updates_seen: dict[str, int] = {}  # notifications per session (a subscriber counts)
        self.update_arrived = asyncio.Event()
        self.permission_requests: list[types.RequestPermissionRequest] = []
        self.file_reads: list[types.ReadTextFileRequest] = []

    def session(self, session_id: str) -> contrib.SessionAccumulator:
        if session_id not in self.sessions:
            accumulator = self.sessions[session_id] = contrib.SessionAccumulator()
            self.updates_seen[session_id] = 0
            accumulator.subscribe(self._arrived)
        return self.sessions[session_id]

    def _arrived(self, snapshot: contrib.SessionSnapshot, notification: types.SessionNotification) -> None:
        self.updates_seen[snapshot.session_id] += 1
        self.update_arrived.set()

    async def session_update(self, params: types.SessionNotification) -> None:
        self.session(params.session_id).apply(params)

    async def session_request_permission(
        self, params: types.RequestPermissionRequest
    ) -> types.RequestPermissionResponse:
        self.permission_requests.append(params)
        if not params.options:
            return types.RequestPermissionResponse(outcome=types.RequestPermissionOutcomeCancelled())
        return types.RequestPermissionResponse(
            outcome=types.SelectedPermissionOutcome(option_id=params.options[0].option_id)
        )

    async def fs_read_text_file(self, params: types.ReadTextFileRequest) -> types.ReadTextFileResponse:
        self.file_reads.append(params)
        path = self._inside(params.path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RequestError(-32002, "Resource not found", {"path": params.path}) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise RequestError(-32603, "Internal error", {"details": str(exc)}) from None
        line = params.line if isinstance(params.line, int) else 1  # 1-based
        limit = params.limit if isinstance(params.limit, int) else None
        if line > 1 or limit is not None:
            first = max(line - 1, 0)
            text = "".join(text.splitlines(keepends=True)[first : None if limit is None else first + limit])
        return types.ReadTextFileResponse(content=text)

    async def fs_write_text_file(self, params: types.WriteTextFileRequest) -> types.WriteTextFileResponse:
        self._inside(params.path).write_text(params.content, encoding="utf-8")
        return types.WriteTextFileResponse()

    def _inside(self, raw: str) -> Path:
        # An agent is not trusted with the whole disk: only the sandbox is served.
        if not os.path.isabs(raw):
            raise RequestError.invalid_params("path must be absolute", "params.path")
        path = Path(raw).resolve()
        if path != self.sandbox and self.sandbox not in path.parents:
            raise RequestError.invalid_params("path is outside the session directory", "params.path")
        return path


def text_of(chunk: types.SessionUpdateAgentMessageChunk) -> str | None:
    return chunk.content.text if isinstance(chunk.content, types.TextContent) else None


def transcript(snapshot: contrib.SessionSnapshot) -> list[str]:
    """The conversation as a UI would show it: one line per message, from the snapshot."""
    return [f"{message.role}: {message.text!r}" for message in snapshot.messages]


class Script:
    def __init__(
        self,
        agent: AgentProxy,
        client: EchoClient,
        sandbox: Path,
        reconnect: Callable[[], Awaitable[AgentProxy]] | None = None,
    ) -> None:
        self.agent = agent
        self.reconnect = reconnect
        self.client = client
        self.sandbox = sandbox
        self.passed = 0
        self.failed = 0
        self.session_id = ""
        self.load_session = False
        self.mode: str | None = None  # set by session/set_mode

    async def step(self, name: str, body: Callable[[], Awaitable[str]]) -> bool:
        try:
            detail = await asyncio.wait_for(body(), STEP_TIMEOUT)
        except StepFailed as exc:
            return self._report(False, name, str(exc))
        except RequestError as exc:
            data = "" if exc.data is None else f" {exc.data!r}"  # most errors carry none
            return self._report(False, name, f"error {exc.code} {exc.message}{data}")
        except (asyncio.TimeoutError, TimeoutError):  # distinct types before Python 3.11
            return self._report(False, name, f"no answer within {STEP_TIMEOUT:g} s")
        except Exception as exc:  # a broken agent must not stop the report
            return self._report(False, name, f"{type(exc).__name__}: {exc}")
        return self._report(True, name, detail)

    def _report(self, ok: bool, name: str, detail: str) -> bool:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
        return ok

    def skip(self, name: str, why: str) -> None:
        self._report(False, name, f"not run: {why}")

    async def prompt(self, text: str) -> tuple[types.PromptResponse, tuple[types.SessionUpdateAgentMessageChunk, ...]]:
        """One prompt turn; returns the response and the agent's chunks of the turn."""
        block = types.TextContent(text=text)
        # A UI shows the user's own message too: it goes into the session state like the agent's.
        own = types.SessionUpdateUserMessageChunk(content=block)
        state = self.client.session(self.session_id)
        seen = len(state.apply(types.SessionNotification(session_id=self.session_id, update=own)).agent_messages)
        updates = self.client.updates_seen[self.session_id]
        response = await self.agent.session_prompt(session_id=self.session_id, prompt=[block])
        # The runtime hands us the response only after the updates sent before it.
        chunks = state.snapshot().agent_messages[seen:]
        others = self.client.updates_seen[self.session_id] - updates - len(chunks)
        check(others == 0, f"{others} update(s) other than agent_message_chunk in the turn")
        return response, chunks

    # -- the steps -------------------------------------------------------------------
    async def initialize(self) -> str:
        response = await self.agent.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=types.ClientCapabilities(
                fs=types.FileSystemCapabilities(read_text_file=True, write_text_file=True)
            ),
            client_info=types.Implementation(
                name="acp-codegen-echo-client", title="Echo client", version=GENERATOR_VERSION
            ),
            timeout=STEP_TIMEOUT,  # per call: TimeoutError (and $/cancel_request) when it expires
        )
        check(
            response.protocol_version == PROTOCOL_VERSION,
            f"protocolVersion {response.protocol_version}, expected {PROTOCOL_VERSION}",
        )
        self.load_session = response.agent_capabilities.load_session
        info = response.agent_info
        name = f"{info.name} {info.version}" if isinstance(info, types.Implementation) else "unnamed agent"
        return f"protocolVersion {response.protocol_version}, {name}, loadSession {str(self.load_session).lower()}"

    async def new_session(self) -> str:
        response = await self.agent.session_new(cwd=str(self.sandbox), mcp_servers=[])
        check(bool(response.session_id), "empty sessionId")
        self.session_id = response.session_id
        modes = response.modes
        if isinstance(modes, types.SessionModeState):
            mode_ids = [mode.id for mode in modes.available_modes]
            return f"session {self.session_id}, mode {modes.current_mode_id} of {', '.join(mode_ids)}"
        return f"session {self.session_id}"

    async def echo(self) -> str:
        response, updates = await self.prompt("hello")
        texts = [text_of(update) for update in updates]
        check(texts == ["hello"], f"expected one agent_message_chunk 'hello', got {texts!r}")
        check(response.stop_reason == "end_turn", f"stopReason {response.stop_reason}")
        return "'hello' echoed, end_turn"

    async def read(self) -> str:
        path = self.sandbox / "echo-client.txt"
        path.write_text(READ_FILE_CONTENT, encoding="utf-8")
        reads = len(self.client.file_reads)
        response, updates = await self.prompt(f"read {path}")
        check(len(self.client.file_reads) == reads + 1, "the agent did not call fs/read_text_file")
        texts = [text_of(update) for update in updates]
        check(texts == [READ_FILE_CONTENT], f"expected the file content verbatim, got {texts!r}")
        check(response.stop_reason == "end_turn", f"stopReason {response.stop_reason}")
        return f"served fs/read_text_file {path.name}, content returned verbatim"

    async def permission(self) -> str:
        asked = len(self.client.permission_requests)
        response, updates = await self.prompt("permission")
        check(len(self.client.permission_requests) == asked + 1, "the agent did not call session/request_permission")
        options = self.client.permission_requests[-1].options
        check(bool(options), "the permission request has no options")
        chosen = options[0].option_id
        texts = [text_of(update) for update in updates]
        check(texts == [f"permission: selected {chosen}"], f"got {texts!r}")
        check(response.stop_reason == "end_turn", f"stopReason {response.stop_reason}")
        return f"granted {chosen}, agent confirmed"

    async def slow_cancel(self) -> str:
        self.client.session(self.session_id)
        updates = self.client.updates_seen
        seen = updates[self.session_id]
        turn = asyncio.ensure_future(self.prompt("slow"))
        try:
            # Cancel midway: once a few chunks have streamed (after the turn's own user chunk).
            while updates[self.session_id] < seen + 4 and not turn.done():
                self.client.update_arrived.clear()
                arrived = asyncio.ensure_future(self.client.update_arrived.wait())
                await asyncio.wait([arrived, turn], return_when=asyncio.FIRST_COMPLETED)
                arrived.cancel()
            check(not turn.done(), "the slow turn ended before it could be cancelled")
            await self.agent.session_cancel(session_id=self.session_id)
            response, turn_updates = await turn
        finally:
            turn.cancel()
        check(response.stop_reason == "cancelled", f"stopReason {response.stop_reason}, expected cancelled")
        texts = [text_of(update) for update in turn_updates]
        check(0 < len(texts) < 20, f"{len(texts)} chunks before the cancel took effect")
        check(texts == [f"slow {i}/20\n" for i in range(1, len(texts) + 1)], f"unexpected chunks {texts!r}")
        after = updates[self.session_id]
        await asyncio.sleep(0.2)
        late = updates[self.session_id] - after
        check(late == 0, f"{late} update(s) after the cancelled turn's response")
        return f"cancelled after {len(texts)} of 20 chunks, stopReason cancelled, nothing after"

    async def load(self) -> str:
        # The replay must repeat the transcript so far, chunk for chunk: user blocks, agent chunks.
        # As a UI would, the state starts afresh and the replay rebuilds it.
        state = self.client.session(self.session_id)
        history = [chunk.to_dict() for message in state.snapshot().messages for chunk in message.chunks]
        state.reset()
        updates = self.client.updates_seen[self.session_id]
        response = await self.agent.session_load(session_id=self.session_id, cwd=str(self.sandbox), mcp_servers=[])
        if self.mode is not None and isinstance(response.modes, types.SessionModeState):
            mode = response.modes.current_mode_id
            check(mode == self.mode, f"the loaded session is in mode {mode!r}, expected {self.mode!r}")
        messages = state.snapshot().messages if state.session_id is not None else ()
        replay = [chunk.to_dict() for message in messages for chunk in message.chunks]
        others = self.client.updates_seen[self.session_id] - updates - len(replay)
        check(others == 0, f"{others} replayed update(s) other than message chunks")
        if replay != history:
            for i, (got, want) in enumerate(zip(replay, history, strict=False)):
                if got != want:
                    raise StepFailed(f"replay item {i}: got {got!r}, expected {want!r}")
            raise StepFailed(f"replayed {len(replay)} updates, expected {len(history)}")
        return f"replayed {len(replay)} updates in order"

    async def reconnect_and_load(self) -> str:
        assert self.reconnect is not None
        self.agent = await self.reconnect()
        await self.initialize()
        detail = await self.load()
        return f"new connection, initialized, {detail}"

    async def set_mode(self) -> str:
        await self.agent.session_set_mode(session_id=self.session_id, mode_id=CODE_MODE)
        self.mode = CODE_MODE
        return f"switched to {CODE_MODE!r}"

    async def prompt_in_mode(self) -> str:
        response, updates = await self.prompt("hello again")
        texts = [text_of(update) for update in updates]
        check(texts == ["hello again"], f"expected one agent_message_chunk 'hello again', got {texts!r}")
        check(response.stop_reason == "end_turn", f"stopReason {response.stop_reason}")
        return f"'hello again' echoed in {CODE_MODE!r} mode, end_turn"

    async def run(self) -> None:
        if not await self.step("initialize", self.initialize):
            self.skip("session/new", "initialize failed")
            return
        if not await self.step("session/new", self.new_session):
            for name in STEPS_AFTER_NEW:
                self.skip(name, "no session")
            return
        await self.step("prompt hello", self.echo)
        await self.step("prompt read", self.read)
        await self.step("prompt permission", self.permission)
        await self.step("prompt slow + cancel", self.slow_cancel)
        if await self.step("session/set_mode", self.set_mode):
            await self.step("prompt in code mode", self.prompt_in_mode)
        else:
            self.skip("prompt in code mode", "session/set_mode failed")
        if self.load_session:
            await self.step("session/load", self.load)
            if self.reconnect is not None:
                await self.step("reconnect + session/load", self.reconnect_and_load)
        else:
            print("skip session/load: the agent does not advertise loadSession", flush=True)


@asynccontextmanager
async def remote(
    client: EchoClient, url: str, reconnect: bool, headers: dict[str, str], verify: bool | str
) -> AsyncIterator[Script]:
    async with connect_remote(client, url, headers=headers, verify=verify, open_timeout=STEP_TIMEOUT) as agent:
        yield Script(agent.proxy, client, client.sandbox, agent.reconnect if reconnect else None)


def first_token(path: str) -> str:
    """The first token of a token file in the agent's format (`BearerTokens.from_file`: one a
    line, `TOKEN` or `NAME TOKEN`; blank lines and `#` comments skipped), so that one file
    serves both ends."""
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) > 2:
            raise ValueError(f"{path}:{number}: expected `TOKEN` or `NAME TOKEN`, got {len(fields)} fields")
        return fields[-1]
    raise ValueError(f"{path} holds no token (one a line; blank and # lines are skipped)")


async def amain(
    command: list[str],
    url: str | None = None,
    reconnect: bool = False,
    *,
    headers: dict[str, str] | None = None,
    verify: bool | str = True,
) -> int:
    with tempfile.TemporaryDirectory(prefix="acp-echo-client-") as tmp:
        sandbox = Path(tmp).resolve()
        client = EchoClient(sandbox)
        try:
            if url is not None:
                async with remote(client, url, reconnect, headers or {}, verify) as script:
                    await script.run()
            else:
                async with spawn_agent(client, command) as agent:
                    script = Script(agent.proxy, client, sandbox)
                    await script.run()
            for session_id, state in client.sessions.items():  # stdout is for the steps alone
                if state.session_id is not None:
                    print(f"transcript of session {session_id}:", file=sys.stderr)
                    for line in transcript(state.snapshot()):
                        print(f"  {line}", file=sys.stderr)
        except RemoteUnavailable as exc:
            print(f"FAIL connect: {exc}", flush=True)
            print("0 passed, 1 failed", flush=True)
            return 1
        except OSError as exc:
            print(f"FAIL spawn: cannot start {command[0]!r}: {exc}", flush=True)
            print("0 passed, 1 failed", flush=True)
            return 1
    print(f"{script.passed} passed, {script.failed} failed", flush=True)
    return 0 if script.failed == 0 and script.passed > 0 else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a remote agent's endpoint: ws://, wss://, http:// or https://")
    parser.add_argument("--reconnect", action="store_true", help="with --url: also reconnect and session/load")
    parser.add_argument("--token-file", help="with --url: send this file's first token as Authorization: Bearer")
    parser.add_argument("--verify", default=None, help="with --url: a CA file to trust, or 'no' (wss://, https://)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the agent command line")
    args = parser.parse_args()
    if args.url is None and (args.token_file or args.verify):
        parser.error("--token-file and --verify need --url")
    headers: dict[str, str] = {}
    if args.token_file:
        try:
            headers["Authorization"] = f"Bearer {first_token(args.token_file)}"
        except (OSError, ValueError) as exc:
            parser.error(f"--token-file: {exc}")
    verify: bool | str = True if args.verify is None else (False if args.verify == "no" else args.verify)
    if args.url is not None and args.command:
        parser.error("give either --url or an agent command, not both")
    if args.url is None and args.reconnect:
        parser.error("--reconnect needs --url")
    if args.url is None and not args.command:
        parser.error("give the agent command, e.g.: python examples/echo_client.py python examples/echo_agent.py")
    sys.exit(asyncio.run(amain(args.command, args.url, args.reconnect, headers=headers, verify=verify)))


if __name__ == "__main__":
    main()
