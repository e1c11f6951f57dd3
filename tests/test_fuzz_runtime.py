"""Fuzzing the generated runtime (dispatch.py + connection.py) with hypothesis.

Every hypothesis example pushes many hostile lines through ONE in-process connection (or one
dispatcher), then checks, line by line, against an independent JSON-RPC 2.0 oracle:

- nothing crashes: `run()` is still serving, and ends cleanly at EOF;
- the JSON-RPC error that is due, with the right id: -32700 (id null) for bytes that are not
  JSON, -32600 for JSON that is not a valid request (batches, non-objects, bad `jsonrpc`,
  odd ids, ...), -32601 for unknown methods, -32602 with `data.path` for bad params,
  -32800 for requests cancelled before they ran;
- no reply where none is due (notifications, responses, blank lines);
- the connection keeps serving: after every garbage case a valid `initialize` probe is sent
  and must be answered.

Both codecs are exercised: each example draws whether the connection uses orjson (when
installed) or the standard library.

Reproducible and bounded: `derandomize=True`, `database=None`, `deadline=None`. The
per-test full budgets are in BUDGET; their sum (TOTAL_CASES, 10,800) is asserted to be at
least 10,000 by test_the_budget_is_at_least_10000_cases. The `slow` hypothesis profile runs them
in full, the default `ci` profile a tenth of each (tests/budget.py).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import agent
import client
import flat_json
import pytest
from agent import jsonline as agent_jsonline
from agent import types as at
from agent.methods import AGENT_HANDLES
from agent.methods import METHODS as AGENT_METHODS
from budget import examples
from client import connection as client_connection
from client import jsonline as client_jsonline
from client import types as ct
from client.methods import CLIENT_HANDLES
from client.methods import METHODS as CLIENT_METHODS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

T = TypeVar("T")
TIMEOUT = 10.0

# The full max_examples per test (HYPOTHESIS_PROFILE=slow; a tenth under `ci`, tests/budget.py).
# TOTAL_CASES = 10,800 (>= 10,000: asserted below).
BUDGET: dict[str, int] = {
    "dispatcher_random_calls": 1800,
    "dispatcher_mutated_requests": 2400,
    "dispatcher_mutated_notifications": 900,
    "wire_names": 1200,
    "skim": 1000,
    "connection_garbage": 1200,
    "connection_mutated": 300,
    "connection_deep_nesting": 300,
    "connection_oversize": 500,
    "connection_responses": 400,
    "connection_eof": 400,
    "connection_cancel": 400,
}
TOTAL_CASES = sum(BUDGET.values())


def fuzz(name: str) -> settings:
    return settings(
        max_examples=examples(BUDGET[name]),
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def test_the_budget_is_at_least_10000_cases() -> None:
    assert TOTAL_CASES == 10_800
    assert TOTAL_CASES >= 10_000


# -- harness ----------------------------------------------------------------------------------
def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, TIMEOUT)

    return asyncio.run(bounded())


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the dispatcher with handlers that do not wait),
    without an event loop: fast enough for thousands of examples."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise AssertionError("the coroutine suspended")


@contextmanager
def codec(use_orjson: bool) -> Iterator[None]:
    """Run the connections with orjson (if installed) or with the standard library."""
    saved = [(module, module._orjson) for module in (agent_jsonline, client_jsonline)]
    if not use_orjson:
        for module, _ in saved:
            module._orjson = None
    try:
        yield
    finally:
        for module, value in saved:
            module._orjson = value


class ChunkReader:
    """The runtime's input: each fed chunk is what one `read()` returns (split at `n`)."""

    def __init__(self) -> None:
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._rest = b""
        self._eof = False

    def feed(self, data: bytes) -> None:
        if data:
            self._chunks.put_nowait(data)

    def feed_eof(self) -> None:
        self._chunks.put_nowait(b"")

    async def read(self, n: int = -1) -> bytes:
        if not self._rest:
            if self._eof:
                return b""
            self._rest = await self._chunks.get()
            if not self._rest:
                self._eof = True
                return b""
        if n < 0:
            n = len(self._rest)
        data, self._rest = self._rest[:n], self._rest[n:]
        return data


class Sink:
    """The runtime's output; drain() never yields, so replies are written in a fixed order."""

    def __init__(self) -> None:
        self.reader = asyncio.StreamReader(limit=1 << 26)
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("closed")
        self.reader.feed_data(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.reader.feed_eof()


class Peer:
    """The far end of one generated agent (or client) connection, speaking raw bytes."""

    def __init__(self, handler: Any, **options: Any) -> None:
        self.input = ChunkReader()
        self.output = Sink()
        self.handler = handler
        if isinstance(handler, agent.Agent):
            self.task = asyncio.ensure_future(agent.run_agent(handler, self.input, self.output, **options))
        else:
            self.proxy, self.connection = client.connect(handler, self.input, self.output, **options)
            self.task = asyncio.ensure_future(self.connection.run())

    def send(self, data: bytes) -> None:
        self.input.feed(data)

    async def recv(self) -> Any:
        line = await asyncio.wait_for(self.output.reader.readline(), TIMEOUT)
        assert line, "the connection closed its output"
        return json.loads(line)

    async def until(self, probe_id: str) -> list[Any]:
        """Every reply up to the one for `probe_id` (which is checked and left out)."""
        replies = []
        while True:
            reply = await self.recv()
            if reply.get("id") == probe_id:
                assert "result" in reply, reply
                assert not self.task.done(), "run() ended"
                return replies
            replies.append(reply)

    async def close(self) -> list[Any]:
        """EOF: run() must end cleanly; returns what was still written."""
        self.input.feed_eof()
        await asyncio.wait_for(self.task, TIMEOUT)  # raises if run() crashed
        rest = await asyncio.wait_for(self.output.reader.read(), TIMEOUT)
        return [json.loads(line) for line in rest.splitlines()]


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


INIT = {"protocolVersion": 1, "clientCapabilities": {}}


def probe(probe_id: str) -> bytes:
    return line({"jsonrpc": "2.0", "id": probe_id, "method": "initialize", "params": INIT})


def client_probe(probe_id: str) -> bytes:
    return line(
        {"jsonrpc": "2.0", "id": probe_id, "method": "fs/read_text_file", "params": {"sessionId": "s", "path": "/p"}}
    )


class FuzzAgent(agent.Agent):
    """Implements the baseline methods; none of its handlers ever waits."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def initialize(self, params: at.InitializeRequest) -> at.InitializeResponse:
        self.calls.append("initialize")
        return at.InitializeResponse(protocol_version=1)

    async def authenticate(self, params: at.AuthenticateRequest) -> at.AuthenticateResponse:
        return at.AuthenticateResponse()

    async def session_new(self, params: at.NewSessionRequest) -> at.NewSessionResponse:
        return at.NewSessionResponse(session_id="s")

    async def session_prompt(self, params: at.PromptRequest) -> at.PromptResponse:
        return at.PromptResponse(stop_reason="end_turn")

    async def session_cancel(self, params: at.CancelNotification) -> None:
        self.calls.append("session/cancel")

    async def ext_method(self, method: str, params: Any) -> Any:
        self.calls.append(method)
        return {"ok": True}

    async def ext_notification(self, method: str, params: Any) -> None:
        self.calls.append(method)


class FuzzClient(client.Client):
    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.calls: list[str] = []

    async def session_update(self, params: ct.SessionNotification) -> None:
        self.updates.append(params)

    async def session_request_permission(self, params: ct.RequestPermissionRequest) -> ct.RequestPermissionResponse:
        return ct.RequestPermissionResponse(outcome=ct.RequestPermissionOutcomeCancelled())

    async def fs_read_text_file(self, params: ct.ReadTextFileRequest) -> ct.ReadTextFileResponse:
        return ct.ReadTextFileResponse(content="x")

    async def ext_method(self, method: str, params: Any) -> Any:
        self.calls.append(method)
        return {"ok": True}

    async def ext_notification(self, method: str, params: Any) -> None:
        self.calls.append(method)


# -- the oracle: what JSON-RPC 2.0 says each line deserves ----------------------------------------
RESULT = 0  # "a result" in Want.codes
MISSING: Any = object()


def _reject(name: str) -> Any:
    raise ValueError(name)


def strict_json(data: bytes) -> Any:
    """RFC 8259 JSON in UTF-8: no NaN/Infinity, no out-of-range numbers, no BOM."""

    def finite(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError(text)
        return value

    return json.loads(data.decode("utf-8"), parse_constant=_reject, parse_float=finite)


def valid_id(value: Any) -> bool:
    return value is None or type(value) is str or type(value) is int


def id_key(value: Any) -> tuple[bool, Any]:
    return (type(value) is str, value)


@dataclass
class Want:
    """One reply that is due: its id, the codes allowed (RESULT for a result), the -32602 path."""

    id: Any
    codes: set[int]
    path: str | None = None

    def accepts(self, reply: dict[str, Any]) -> bool:
        if reply.get("jsonrpc") != "2.0" or "id" not in reply or reply["id"] != self.id:
            return False
        if type(reply["id"]) is not type(self.id):
            return False
        if "result" in reply:
            return RESULT in self.codes and "error" not in reply
        code = reply["error"]["code"]
        if code not in self.codes:
            return False
        if code == -32602 and self.path is not None:
            return bool(reply["error"]["data"]["path"] == self.path)
        return True


@dataclass
class Oracle:
    """Expected replies for the lines of one chunk (requests in one chunk are in flight together)."""

    methods: dict[str, Any]
    handles: frozenset[str]
    handler: Any
    base: type
    wants: list[Want] = field(default_factory=list)
    inflight: dict[tuple[bool, Any], Want] = field(default_factory=dict)

    def dispatch_outcome(self, method: str, params: Any) -> Want:
        spec = self.methods.get(method)
        if spec is None or method not in self.handles or spec.runtime or spec.kind != "request":
            return Want(None, {RESULT} if method.startswith("_") else {-32601})
        try:
            spec.decode_params({} if params is None else params, None)
        except at.DecodeError as exc:
            return Want(None, {-32602}, f"params.{exc.path}" if exc.path else "params")
        except ct.DecodeError as exc:
            return Want(None, {-32602}, f"params.{exc.path}" if exc.path else "params")
        except RecursionError:
            return Want(None, {-32602}, "params")
        implemented = getattr(type(self.handler), spec.handler) is not getattr(self.base, spec.handler)
        return Want(None, {RESULT} if implemented or not spec.optional else {-32601})

    def line(self, data: bytes, *, limit: int | None = None) -> None:
        if limit is not None and len(data) > limit:
            self.oversize(data)
            return
        if not data.strip():
            return
        try:
            message = strict_json(data)
        except (ValueError, RecursionError):
            self.wants.append(Want(None, {-32700}))
            return
        if type(message) is not dict:
            self.wants.append(Want(None, {-32600}))
            return
        method = message.get("method")
        if method is None and ("result" in message or "error" in message):
            return  # a response is never answered
        has_id = "id" in message
        reply_id = message["id"] if has_id and valid_id(message["id"]) else None
        params = message.get("params")
        if (
            message.get("jsonrpc") != "2.0"
            or type(method) is not str
            or (params is not None and type(params) not in (dict, list))
        ):
            self.wants.append(Want(reply_id, {-32600}))
            return
        if not has_id:
            if method == "$/cancel_request" and type(params) is dict and valid_id(params.get("requestId", MISSING)):
                target = self.inflight.get(id_key(params["requestId"]))
                if target is not None:
                    target.codes, target.path = {-32800}, None
            return
        if not valid_id(message["id"]):
            self.wants.append(Want(None, {-32600}))
            return
        key = id_key(message["id"])
        if key in self.inflight:
            self.wants.append(Want(message["id"], {-32600}))
            return
        want = self.dispatch_outcome(method, params)
        want.id = message["id"]
        self.inflight[key] = want
        self.wants.append(want)

    def oversize(self, data: bytes) -> None:
        """A line over the limit: only its top level decides (see jsonline.Skim)."""
        try:
            message = strict_json(data)
        except (ValueError, RecursionError):
            message = None
        if type(message) is not dict:  # (the generators damage such lines at their top level)
            self.wants.append(Want(None, {-32600}))
            return
        method = message.get("method")
        if method is None and ("result" in message or "error" in message):
            return
        if "id" not in message and type(method) is str:
            return
        reply_id = message["id"] if "id" in message and valid_id(message["id"]) else None
        self.wants.append(Want(reply_id, {-32600}))


def check_replies(replies: list[Any], wants: list[Want]) -> None:
    """Every reply answers one due Want, and every Want is answered exactly once."""
    open_wants = sorted(wants, key=lambda w: len(w.codes))  # the exact ones first
    for reply in replies:
        for i, want in enumerate(open_wants):
            if want.accepts(reply):
                del open_wants[i]
                break
        else:
            raise AssertionError(f"unexpected reply {reply!r}; still due: {open_wants!r}")
    assert not open_wants, f"no reply for {open_wants!r}"


def agent_oracle(handler: FuzzAgent) -> Oracle:
    return Oracle(AGENT_METHODS, AGENT_HANDLES, handler, agent.Agent)


def client_oracle(handler: FuzzClient) -> Oracle:
    return Oracle(CLIENT_METHODS, CLIENT_HANDLES, handler, client.Client)


# -- strategies -----------------------------------------------------------------------------------
BOOLEANS = st.booleans()
JSON_SCALARS = [
    flat_json.NULL,
    BOOLEANS,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
]
# json_scalars = st.none() | st.booleans() | ... as one_of branches, for flat_json.pick
JSON_SCALAR_BRANCHES = [flat_json.Just(None), *JSON_SCALARS[1:]]
# What st.recursive(json_scalars, lists(max_size=4) | dictionaries(text(max_size=8), max_size=4),
# max_leaves=10) draws, in half the time (tests/flat_json.py).
json_values = flat_json.json_values(JSON_SCALARS, st.text(max_size=8), max_size=4, max_leaves=10)
# Odd ids: the branches of a one_of, drawn with flat_json.pick in the composites below.
ODD_ID_BRANCHES: list[Any] = [
    flat_json.Just(None),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([0, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30]),
    st.text(max_size=10).filter(lambda s: not s.startswith("probe")),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([[], {}, [1], {"id": 1}, "", "1", "null"]),
    st.text(min_size=300, max_size=400, alphabet="ab"),
]
WEIRD_METHODS = [
    "__class__", "__init__", "__dict__", "__globals__", "__getattribute__", "_private", "_", "__",
    "initialize.__globals__", "initialize.__class__", "ext_method", "ext_notification", "on_connect",
    "peer", "session_new", "handler", "INITIALIZE", " initialize", "initialize ", "initialize\u0000",
    "session/new/", "session\\new", "", "$/cancel_request", "$/other", "_acme/ping", "_meta",
]  # fmt: skip
METHOD_NAME_BRANCHES: list[Any] = [
    st.sampled_from(sorted(AGENT_METHODS) + WEIRD_METHODS),
    st.text(max_size=16),
    st.text(max_size=8).map(lambda s: "_" + s),
]
method_names = st.one_of(METHOD_NAME_BRANCHES)


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def nested_text(depth: int) -> bytes:
    return b'{"k":[' * depth + b"1" + b"]}" * depth


VALID_PARAMS: dict[str, Any] = {
    "initialize": {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": False},
            "terminal": True,
            "_meta": {"x": [1]},
        },
        "clientInfo": {"name": "ed", "title": "Ed", "version": "1.0"},
    },
    "authenticate": {"methodId": "token"},
    "session/new": {
        "cwd": "/home/u/project",
        "mcpServers": [
            {"name": "fs", "command": "/bin/mcp", "args": ["-v", "--x"], "env": [{"name": "A", "value": "b"}]},
            {"type": "http", "name": "web", "url": "https://example.com/mcp", "headers": [{"name": "k", "value": "t"}]},
            {"type": "sse", "name": "events", "url": "https://example.com/sse", "headers": []},
        ],
    },
    "session/prompt": {
        "sessionId": "sess-1",
        "prompt": [
            {"type": "text", "text": "hello", "annotations": {"audience": ["user"], "priority": 0.5}},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///a.py", "name": "a.py", "size": 12},
            {"type": "resource", "resource": {"uri": "file:///b.py", "text": "print(1)", "mimeType": "text/x-python"}},
            {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AAEC"}},
        ],
    },
    "session/cancel": {"sessionId": "sess-1"},
}
CLIENT_VALID_PARAMS: dict[str, Any] = {
    "session/request_permission": {
        "sessionId": "s",
        "toolCall": {"toolCallId": "t1", "title": "Write"},
        "options": [
            {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
            {"optionId": "no", "name": "No", "kind": "reject_once"},
        ],
    },
    "fs/read_text_file": {"sessionId": "s", "path": "/a.py", "line": 1, "limit": 10},
}
SESSION_UPDATES: list[Any] = [
    {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}},
    {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Read",
            "kind": "read",
            "status": "pending",
            "locations": [{"path": "/a", "line": 3}],
            "content": [
                {"type": "content", "content": {"type": "text", "text": "x"}},
                {"type": "diff", "path": "/a", "oldText": "a", "newText": "b"},
            ],
            "rawInput": {"path": "/a"},
        },
    },
    {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
            "content": [{"type": "terminal", "terminalId": "term-1"}],
        },
    },
    {
        "sessionId": "s",
        "update": {"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "high", "status": "pending"}]},
    },
    {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "web", "description": "search", "input": {"hint": "query"}}],
        },
    },
    {"sessionId": "s", "update": {"sessionUpdate": "current_mode_update", "currentModeId": "code"}},
]

Path = tuple[Any, ...]


def all_paths(value: Any, prefix: Path = ()) -> list[Path]:
    paths = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            paths += all_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            paths += all_paths(item, (*prefix, index))
    return paths


def render(path: Path) -> str:
    out = "params"
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else f".{key}"
    return out


def related(error_path: str, near: str) -> bool:
    """`error_path` is `near`, an ancestor of it, or inside it."""

    def within(inner: str, outer: str) -> bool:
        return inner == outer or (inner.startswith(outer) and inner[len(outer)] in ".[")

    return within(near, error_path) or within(error_path, near)


WRONG_VALUES: list[Any] = [
    None, True, False, 0, -1, 1.5, 2**70, -(2**70), "", "x", "\u0000", [], [None], [[]], {}, {"unexpected": 1},
    {"type": "nope"}, nested(40), "y" * 3000,
]  # fmt: skip


@dataclass
class Mutation:
    params: Any
    path: Path  # where the change is
    near: str  # the rendered path the error must be related to


# Strategies are built once, here, not inside the draws: building one (validation, labels) cost
# more than drawing from it, thousands of times per test.
WRONG_OR_JSON = [st.sampled_from(WRONG_VALUES), json_values]  # one_of branches, for flat_json.pick
WRONG_OR_JSON_AT_ROOT = [st.sampled_from(WRONG_VALUES[:-2]), json_values]
MUTATION_KINDS = st.sampled_from(["replace", "replace", "replace", "delete", "insert"])
SHORT_TEXT = st.text(max_size=4)


def mutated(valid: Any) -> st.SearchStrategy[Mutation]:
    """`valid` with one change somewhere: a value replaced, a key or item deleted or inserted."""
    text = json.dumps(valid)
    paths = st.sampled_from(all_paths(valid))

    @st.composite
    def mutation(draw: st.DrawFn) -> Mutation:
        params = json.loads(text)  # a fresh copy to change
        path = draw(paths)
        kind = draw(MUTATION_KINDS)
        if path == ():
            if kind == "insert":
                params["unexpectedField"] = draw(json_values)
                return Mutation(params, ("unexpectedField",), "params")
            return Mutation(flat_json.pick(draw, WRONG_OR_JSON_AT_ROOT), (), "params")
        parent: Any = params
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        near = render(path[:-1])  # the object holding the change: tags and fallbacks are decided there
        if kind == "delete":
            del parent[last]
        elif kind == "insert" and isinstance(parent, dict):
            parent["unexpected" + draw(SHORT_TEXT)] = draw(json_values)
        elif kind == "insert" and isinstance(parent, list):
            parent.insert(last, flat_json.pick(draw, WRONG_OR_JSON))
        else:
            parent[last] = flat_json.pick(draw, WRONG_OR_JSON)
        return Mutation(params, path, near)

    return mutation()


def check_invalid_params(error: Any, near: str) -> None:
    assert error.code == -32602, (error.code, error.message, error.data)
    path = error.data["path"]
    assert isinstance(path, str) and (path == "params" or path.startswith(("params.", "params["))), path
    assert related(path, near), f"error at {path}, mutation near {near}"
    assert isinstance(error.data["message"], str) and error.data["message"]


# -- 1. the dispatcher, directly --------------------------------------------------------------
CALL_PARAMS: list[Any] = [flat_json.Just(None), json_values, st.sampled_from(list(VALID_PARAMS.values()))]


@st.composite
def random_call(draw: st.DrawFn) -> tuple[bool, str, Any]:
    """st.tuples(st.booleans(), method_names, st.none() | json_values | st.sampled_from(...)),
    with fewer draws (flat_json.pick)."""
    return draw(BOOLEANS), flat_json.pick(draw, METHOD_NAME_BRANCHES), flat_json.pick(draw, CALL_PARAMS)


@fuzz("dispatcher_random_calls")
@given(role=st.sampled_from(["agent", "client"]), calls=st.lists(random_call(), min_size=1, max_size=8))
def test_dispatcher_answers_any_call_with_a_result_or_a_json_rpc_error(role: str, calls: list[Any]) -> None:
    handler: Any = FuzzAgent() if role == "agent" else FuzzClient()
    dispatcher = (
        agent.Dispatcher(handler, AGENT_HANDLES) if role == "agent" else client.Dispatcher(handler, CLIENT_HANDLES)
    )
    oracle = agent_oracle(handler) if role == "agent" else client_oracle(handler)
    error_type = agent.RequestError if role == "agent" else client.RequestError
    for is_request, method, params in calls:
        if not is_request:
            assert drive(dispatcher.notification(method, params)) is None  # never raises
            continue
        want = oracle.dispatch_outcome(method, params)
        try:
            result = drive(dispatcher.request(method, params))
        except error_type as exc:
            assert exc.code in want.codes, (method, params, exc.code, want)
            if exc.code == -32602:
                assert exc.data["path"] == want.path
            if exc.code == -32601:
                assert exc.data == {"method": method}
            json.dumps(exc.to_dict())
        else:
            assert RESULT in want.codes, (method, params, result)
            json.dumps(result)


AGENT_MUTATED = [("agent", m, mutated(p)) for m, p in VALID_PARAMS.items() if m != "session/cancel"]
MUTATED_REQUESTS = AGENT_MUTATED + [("client", m, mutated(p)) for m, p in CLIENT_VALID_PARAMS.items()]


@st.composite
def mutated_request(draw: st.DrawFn) -> tuple[str, str, Mutation]:
    """st.one_of([st.tuples(st.just(role), st.just(method), mutated(valid)), ...]) with fewer
    draws: the request is picked as one_of picks its branch (flat_json.index), then mutated."""
    role, method, mutation = MUTATED_REQUESTS[draw(flat_json.index(len(MUTATED_REQUESTS)))]
    return role, method, draw(mutation)


@st.composite
def mutated_agent_request(draw: st.DrawFn) -> tuple[str, Mutation]:
    """The same over the agent's requests, as (method, mutation)."""
    _, method, mutation = AGENT_MUTATED[draw(flat_json.index(len(AGENT_MUTATED)))]
    return method, draw(mutation)


@fuzz("dispatcher_mutated_requests")
@given(case=mutated_request())
def test_dispatcher_bad_params_at_any_depth_give_32602_at_the_right_path(case: tuple[str, str, Mutation]) -> None:
    role, method, mutation = case
    if role == "agent":
        handler: Any = FuzzAgent()
        dispatcher: Any = agent.Dispatcher(handler, AGENT_HANDLES)
        error_type: type[Exception] = agent.RequestError
    else:
        handler = FuzzClient()
        dispatcher = client.Dispatcher(handler, CLIENT_HANDLES)
        error_type = client.RequestError
    try:
        result = drive(dispatcher.request(method, mutation.params))
    except error_type as exc:
        check_invalid_params(exc, mutation.near)
    else:
        json.dumps(result)


@fuzz("dispatcher_mutated_notifications")
@given(mutation=st.one_of([mutated(update) for update in SESSION_UPDATES]))
def test_dispatcher_bad_session_updates_are_dropped_never_raised(mutation: Mutation) -> None:
    handler = FuzzClient()
    dispatcher = client.Dispatcher(handler, CLIENT_HANDLES)
    assert drive(dispatcher.notification("session/update", mutation.params)) is None
    try:
        expected = CLIENT_METHODS["session/update"].decode_params(mutation.params, None)
    except ct.DecodeError:
        assert handler.updates == []
    else:
        assert handler.updates == [expected]


# -- 2. names from the wire never become attributes -------------------------------------------
ALLOWED_ATTRIBUTES = (
    {spec.handler for spec in AGENT_METHODS.values()}
    | {spec.notification_handler for spec in AGENT_METHODS.values() if spec.notification_handler}
    | {"ext_method", "ext_notification"}
)


class SpyAgent(FuzzAgent):
    """Records every attribute looked up on it from outside its own methods."""

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "looked_up", [])
        object.__setattr__(self, "hooked", [])

    def __getattribute__(self, name: str) -> Any:
        if name not in ("looked_up", "hooked", "calls") and not name.startswith("__"):
            object.__getattribute__(self, "looked_up").append(name)
        return object.__getattribute__(self, name)

    async def ext_method(self, method: str, params: Any) -> Any:
        self.hooked.append(("request", method))
        return {"hooked": method}

    async def ext_notification(self, method: str, params: Any) -> None:
        self.hooked.append(("notification", method))


@fuzz("wire_names")
@given(names=st.lists(method_names, min_size=1, max_size=10))
def test_method_names_from_the_wire_are_only_keys_into_the_methods_table(names: list[str]) -> None:
    spy = SpyAgent()
    dispatcher = agent.Dispatcher(spy, AGENT_HANDLES)
    for name in names:
        known = name in AGENT_HANDLES and not AGENT_METHODS[name].runtime
        spy.hooked.clear()
        try:
            result = drive(dispatcher.request(name, VALID_PARAMS.get(name, {})))
        except agent.RequestError as exc:
            result = exc
        if not known and name.startswith("_"):
            assert spy.hooked == [("request", name)] and result == {"hooked": name}
        elif not known:
            assert spy.hooked == [] and isinstance(result, agent.RequestError) and result.code == -32601
        spy.hooked.clear()
        drive(dispatcher.notification(name, VALID_PARAMS.get(name, {})))
        if not known and name.startswith("_"):
            assert spy.hooked == [("notification", name)]
        else:
            assert spy.hooked == []
    assert set(spy.looked_up) <= ALLOWED_ATTRIBUTES, set(spy.looked_up) - ALLOWED_ATTRIBUTES


# -- 3. the oversize-line skimmer ---------------------------------------------------------------
TOP_KEYS = st.lists(
    st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x", "long" * 300, 'q"\\']),
    unique=True,
    max_size=6,
)
TOP_VALUES = [  # the branches of st.one_of(json_scalars, st.text(...), ...), for flat_json.pick
    *JSON_SCALAR_BRANCHES,
    st.text(min_size=1020, max_size=1100),
    st.lists(json_values, max_size=3),
    st.dictionaries(st.text(max_size=5), json_values, max_size=3),
    st.integers(1, 30).map(nested),
]


@st.composite
def top_levels(draw: st.DrawFn) -> dict[str, Any]:
    """st.dictionaries(TOP_KEYS' keys, st.one_of(TOP_VALUES), max_size=6), with fewer draws."""
    return {key: flat_json.pick(draw, TOP_VALUES) for key in draw(TOP_KEYS)}


@fuzz("skim")
@given(
    top=top_levels(),
    ensure_ascii=st.booleans(),
    indent=st.sampled_from([None, 0, 1]),
    cuts=st.lists(st.integers(min_value=1, max_value=4000), max_size=12),
    tail=st.sampled_from([b"", b" ", b"\r", b"x", b"{}", b"]"]),
    truncate=st.booleans(),
)
def test_skim_reads_the_top_level_of_any_json_object(
    top: dict[str, Any], ensure_ascii: bool, indent: int | None, cuts: list[int], tail: bytes, truncate: bool
) -> None:
    text = json.dumps(top, ensure_ascii=ensure_ascii, indent=indent).replace("\n", " ").encode()
    if truncate:
        text = text[: len(text) // 2]
    text += tail
    skim = agent_jsonline.Skim()
    start = 0
    for cut in sorted(set(cuts)):
        if cut < len(text):
            skim.feed(text, start, cut)
            start = cut
    skim.feed(text, start, len(text))
    head = skim.head()
    if tail not in (b"", b" ", b"\r") or truncate:
        assert head is None  # trailing data, or no closing brace: not one JSON object
        return
    whole = strict_json(text)

    def kept(value: str) -> bool:  # strings up to 1023 bytes of JSON text are kept
        return len(json.dumps(value, ensure_ascii=ensure_ascii).encode()) - 2 < 1024

    assert head is not None
    assert list(head) == [key if kept(key) else "" for key in whole]
    for key, value in whole.items():
        got = head[key if kept(key) else ""]
        if isinstance(value, (dict, list)) or (isinstance(value, str) and not kept(value)):
            assert got == []
        else:
            assert got == value and type(got) is type(value)


# -- 4. the connection: garbage lines ------------------------------------------------------------
VALID_LINE = line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}).rstrip(b"\n")
CUT_LINE = json.dumps({"jsonrpc": "2.0", "id": "cut", "method": "initialize", "params": INIT}).encode()
NOTIFICATION_LINE = json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}).encode()
# What garbage() draws from, built once (see WRONG_OR_JSON).
G_KIND = st.integers(min_value=0, max_value=11)
G_BYTES = st.binary(max_size=80)
G_BAD_UTF8 = st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf0\x28\x8c\x28", b"\xc0\xaf", b"\x80"])
G_VALID_LINE_AT = st.integers(min_value=0, max_value=len(VALID_LINE))
G_NOT_OBJECT = json_values.filter(lambda v: not isinstance(v, dict))
G_BATCH = st.lists(
    st.integers(0, 9).map(lambda i: {"jsonrpc": "2.0", "id": f"b{i}", "method": "_batch/marker"}), max_size=3
)
# Each part is the branches of a one_of, drawn with flat_json.pick: "id" is st.just(MISSING) |
# (ODD_ID_BRANCHES), "method" st.just(MISSING) | method_names | json_scalars, "result" st.just(MISSING) |
# st.just(MISSING) | json_values, ...
JUST_MISSING = flat_json.Just(MISSING)
G_PARTS: tuple[tuple[str, list[Any]], ...] = (
    ("jsonrpc", [st.sampled_from([MISSING, "2.0", "2.0", "2.0", "1.0", "2", 2.0, 2, None, "2.0 ", ["2.0"]])]),
    ("id", [JUST_MISSING, *ODD_ID_BRANCHES]),
    ("method", [JUST_MISSING, *METHOD_NAME_BRANCHES, *JSON_SCALAR_BRANCHES]),
    ("params", [st.sampled_from([MISSING, None]), json_values, st.sampled_from(list(VALID_PARAMS.values()))]),
    ("result", [JUST_MISSING, JUST_MISSING, json_values]),
    ("error", [JUST_MISSING, JUST_MISSING, json_values]),
    ("extra", [JUST_MISSING, JUST_MISSING, json_values]),
)
G_BOOL = st.booleans()
G_JSONRPC = st.sampled_from(["2.0", "1.0"])
G_MEMBER = st.sampled_from(["result", "error"])
G_DEPTH = st.integers(1, 200) | st.integers(3000, 20000)
G_DEEP_WHERE = st.sampled_from(["line", "params", "id", "method"])
G_SIZE = st.integers(0, 200_000)
G_HUGE_WHERE = st.sampled_from(["params", "method", "id"])
G_CUT_AT = st.integers(0, len(CUT_LINE))
G_AFTER_CUT = st.sampled_from([b"{}", b" 1", b"]", CUT_LINE])
G_PAD = st.sampled_from([b"", b" ", b"\t", b"\r", b"\r\n", b"\n\n", b" \x0c "])


@st.composite
def garbage(draw: st.DrawFn) -> bytes:
    """One case: bytes that may hold several lines."""
    kind = draw(G_KIND)
    if kind == 0:  # random bytes
        return draw(G_BYTES)
    if kind == 1:  # invalid UTF-8 somewhere in a valid message
        bad = draw(G_BAD_UTF8)
        at = draw(G_VALID_LINE_AT)
        return VALID_LINE[:at] + bad + VALID_LINE[at:]
    if kind == 2:  # JSON that is not an object
        return json.dumps(draw(G_NOT_OBJECT)).encode()
    if kind == 3:  # batches: refused whole, never run
        return json.dumps(draw(G_BATCH)).encode()
    if kind in (4, 5, 6):  # a message built from right and wrong parts
        message: dict[str, Any] = {}
        for key, branches in G_PARTS:
            value = flat_json.pick(draw, branches)
            if value is not MISSING:
                message[key] = value
        if message.get("method") == "$/cancel_request" and draw(G_BOOL):
            message["params"] = {"requestId": flat_json.pick(draw, ODD_ID_BRANCHES)}
        return json.dumps(message, ensure_ascii=draw(G_BOOL)).encode()
    if kind == 7:  # responses nobody asked for
        response: dict[str, Any] = {"jsonrpc": draw(G_JSONRPC), "id": flat_json.pick(draw, ODD_ID_BRANCHES)}
        response[draw(G_MEMBER)] = draw(json_values)
        return json.dumps(response).encode()
    if kind == 8:  # nesting: shallow, or far deeper than any parser allows
        depth = draw(G_DEPTH)
        where = draw(G_DEEP_WHERE)
        if where == "line":
            return nested_text(depth)
        body = nested_text(depth).decode()
        if where == "params":
            return f'{{"jsonrpc":"2.0","id":"deep","method":"_deep","params":{body}}}'.encode()
        return f'{{"jsonrpc":"2.0","{where}":{body},"method":"initialize"}}'.encode()
    if kind == 9:  # huge strings
        size = draw(G_SIZE)
        where = draw(G_HUGE_WHERE)
        big = "\u00e9x" * (size // 2)
        message = {"jsonrpc": "2.0", "id": "huge", "method": "_huge", "params": {"s": big}}
        if where != "params":
            message[where] = big
        return json.dumps(message, ensure_ascii=draw(G_BOOL)).encode()
    if kind == 10:  # a valid message cut short, or two on one line
        if draw(G_BOOL):
            return CUT_LINE[: draw(G_CUT_AT)]
        return CUT_LINE + draw(G_AFTER_CUT)
    # whitespace, CRLF, blank lines around a valid notification
    pad = draw(G_PAD)
    return pad + NOTIFICATION_LINE + pad


@fuzz("connection_garbage")
@given(cases=st.lists(garbage(), min_size=1, max_size=10), use_orjson=st.booleans())
def test_connection_answers_garbage_correctly_and_keeps_serving(cases: list[bytes], use_orjson: bool) -> None:
    handler = FuzzAgent()

    async def scenario() -> None:
        peer = Peer(handler)
        for i, case in enumerate(cases):
            oracle = agent_oracle(handler)
            for piece in case.split(b"\n"):
                oracle.line(piece)
            peer.send(case + b"\n" + probe(f"probe-{i}"))
            check_replies(await peer.until(f"probe-{i}"), oracle.wants)
        assert await peer.close() == []  # nothing late: every reply was due before its probe's

    with codec(use_orjson):
        run(scenario())
    assert "_batch/marker" not in handler.calls


@fuzz("connection_mutated")
@given(
    requests=st.lists(mutated_agent_request(), min_size=1, max_size=6),
    updates=st.lists(st.one_of([mutated(update) for update in SESSION_UPDATES]), min_size=1, max_size=6),
    use_orjson=st.booleans(),
)
def test_connection_mutated_messages_both_roles(
    requests: list[tuple[str, Mutation]], updates: list[Mutation], use_orjson: bool
) -> None:
    """session/new, session/prompt, initialize, authenticate to an agent; session/update to a client."""

    async def scenario() -> None:
        peer = Peer(FuzzAgent())
        for i, (method, mutation) in enumerate(requests):
            peer.send(line({"jsonrpc": "2.0", "id": i, "method": method, "params": mutation.params}))
            reply = await peer.recv()
            assert reply["id"] == i
            if "error" in reply and type(mutation.params) not in (dict, list, type(None)):
                assert reply["error"]["code"] == -32600  # params must be structured: not even a valid request
            elif "error" in reply:
                error = reply["error"]
                check_invalid_params(
                    agent.RequestError(error["code"], error["message"], error.get("data")), mutation.near
                )
        peer.send(probe("probe"))
        assert await peer.until("probe") == []
        assert await peer.close() == []

        recorder = FuzzClient()
        peer = Peer(recorder)
        oracle = client_oracle(recorder)
        expected = []
        for mutation in updates:
            data = line({"jsonrpc": "2.0", "method": "session/update", "params": mutation.params})
            peer.send(data)
            oracle.line(data.rstrip(b"\n"))
            params = {} if mutation.params is None else mutation.params
            if type(params) in (dict, list):
                try:
                    expected.append(CLIENT_METHODS["session/update"].decode_params(params, None))
                except ct.DecodeError:
                    pass
        peer.send(client_probe("probe"))
        # Notifications are never answered, unless they are not valid notifications at all
        # (params neither object nor array: -32600 with id null).
        check_replies(await peer.until("probe"), oracle.wants)
        assert await peer.close() == []
        assert recorder.updates == expected  # the valid ones, in order

    with codec(use_orjson):
        run(scenario())


@fuzz("connection_deep_nesting")
@given(
    depth=st.integers(1, 2500),
    where=st.sampled_from(["line", "params", "meta", "id", "result"]),
    role=st.sampled_from(["agent", "client"]),
    use_orjson=st.booleans(),
)
def test_deep_nesting_never_escapes_as_recursion_error(depth: int, where: str, role: str, use_orjson: bool) -> None:
    """Around the parsers' own limits (orjson 1024, the stdlib's recursion limit) either answer is
    fine; what must hold is no crash and the next message served."""
    body = nested_text(depth).decode()
    if where == "line":
        data = body
    elif where == "params":
        data = f'{{"jsonrpc":"2.0","id":"d","method":"_deep","params":{body}}}'
    elif where == "meta":
        data = f'{{"jsonrpc":"2.0","id":"d","method":"initialize","params":{{"protocolVersion":1,"_meta":{body}}}}}'
    elif where == "id":
        data = f'{{"jsonrpc":"2.0","id":{body},"method":"initialize"}}'
    else:
        data = f'{{"jsonrpc":"2.0","id":0,"result":{body}}}'

    class EchoAgent(FuzzAgent):
        async def ext_method(self, method: str, params: Any) -> Any:
            return params  # encoding it back may be what fails

    async def scenario() -> None:
        handler: Any = EchoAgent() if role == "agent" else FuzzClient()
        peer = Peer(handler)
        peer.send(data.encode() + b"\n" + (probe("probe") if role == "agent" else client_probe("probe")))
        replies = await peer.until("probe")
        assert len(replies) <= 1
        for reply in replies:
            if "error" in reply:
                assert reply["error"]["code"] in (-32700, -32600, -32601, -32602, -32603)
                assert reply["id"] in (None, "d")
            else:
                assert reply["id"] == "d"
        assert await peer.close() == []

    with codec(use_orjson):
        run(scenario())


# -- 5. oversize lines, split across reads ------------------------------------------------------
@fuzz("connection_oversize")
@given(
    messages=st.lists(
        st.tuples(
            st.sampled_from(["request", "notification", "response", "garbage", "not-object", "ext"]),
            st.integers(0, 3000),
            st.sampled_from(["first", "last"]),
        ),
        min_size=1,
        max_size=8,
    ),
    limit=st.sampled_from([256, 1000, 2048]),
    cuts=st.lists(st.integers(min_value=1, max_value=20000), max_size=20),
    use_orjson=st.booleans(),
)
def test_oversize_lines_are_refused_under_their_own_id(
    messages: list[tuple[str, int, str]], limit: int, cuts: list[int], use_orjson: bool
) -> None:
    handler = FuzzAgent()
    lines = []
    for n, (kind, pad, id_at) in enumerate(messages):
        padding = "p" * pad
        if kind == "request":
            body: dict[str, Any] = {
                "method": "session/prompt",
                "params": {"sessionId": "s", "prompt": [], "_meta": {"pad": padding}},
            }
        elif kind == "notification":
            body = {"method": "_note", "params": {"pad": padding}}
        elif kind == "response":
            body = {"result": {"pad": padding}}
        elif kind == "ext":
            body = {"method": "_ext", "params": [padding]}
        elif kind == "not-object":
            lines.append(json.dumps([n, padding]).encode())
            continue
        else:
            lines.append(b'{"id":' + str(n).encode() + b',"method":"x" ' + padding.encode() + b"}")
            continue
        message = {"jsonrpc": "2.0", **({"id": n} if kind != "notification" else {}), **body}
        if id_at == "last" and "id" in message:
            message["id"] = message.pop("id")
        lines.append(json.dumps(message).encode())
    stream = b"".join(item + b"\n" for item in lines) + probe("probe")
    oracle = agent_oracle(handler)
    for item in lines:
        oracle.line(item, limit=limit)

    async def scenario() -> None:
        peer = Peer(handler, max_message_size=limit)
        # Every read returns exactly one piece: lines split anywhere, several in one read.
        start = 0
        for cut in sorted(set(cuts)):
            if start < cut < len(stream):
                peer.send(stream[start:cut])
                start = cut
        peer.send(stream[start:])
        check_replies(await peer.until("probe"), oracle.wants)
        assert await peer.close() == []

    with codec(use_orjson):
        run(scenario())


# -- 6. responses to our own requests -----------------------------------------------------------
@fuzz("connection_responses")
@given(
    answers=st.lists(
        st.tuples(
            st.sampled_from(["ok", "error", "bad-error", "bad-jsonrpc", "both", "unknown", "odd", "oversize", "late"]),
            st.integers(0, 5),
            json_values,
        ),
        min_size=1,
        max_size=10,
    ),
    use_orjson=st.booleans(),
)
def test_responses_resolve_fail_or_are_ignored_and_never_answered(answers: list[Any], use_orjson: bool) -> None:
    """A client with six requests pending gets every kind of response; each of its requests
    ends as JSON-RPC says (result, RequestError, InvalidResponse, MessageTooLarge, or
    ConnectionClosed at EOF) and the peer is never sent a reply to a response."""
    limit = 4096

    async def scenario() -> None:
        peer = Peer(FuzzClient(), max_message_size=limit)
        calls = [asyncio.ensure_future(peer.connection.request("_call", {"n": n})) for n in range(6)]
        for n in range(6):
            sent = await peer.recv()
            assert sent == {"jsonrpc": "2.0", "id": n, "method": "_call", "params": {"n": n}}
        expected: dict[int, Any] = {}
        for kind, n, value in answers:
            if kind in ("unknown", "odd"):
                msg_id: Any = 100 + n if kind == "unknown" else [str(n), float(n), True, None, {"id": n}][n % 5]
                peer.send(line({"jsonrpc": "2.0", "id": msg_id, "result": value}))
                continue
            first = n not in expected
            if kind == "ok":
                peer.send(line({"jsonrpc": "2.0", "id": n, "result": value}))
                outcome: Any = ("result", value)
            elif kind == "error":
                peer.send(
                    line({"jsonrpc": "2.0", "id": n, "error": {"code": -32000 - n, "message": "no", "data": value}})
                )
                outcome = ("error", -32000 - n, value)
            elif kind == "bad-error":
                peer.send(line({"jsonrpc": "2.0", "id": n, "error": value}))
                code = value.get("code") if isinstance(value, dict) else None
                ok = isinstance(code, int) and not isinstance(code, bool)
                outcome = ("error", code if ok else -32603, MISSING)
            elif kind == "bad-jsonrpc":
                peer.send(line({"id": n, "result": value}))
                outcome = ("invalid",)
            elif kind == "both":
                peer.send(line({"jsonrpc": "2.0", "id": n, "result": value, "error": {"code": 1, "message": "m"}}))
                outcome = ("error", 1, MISSING)
            elif kind == "oversize":
                peer.send(line({"jsonrpc": "2.0", "result": ["x" * limit, value], "id": n}))
                outcome = ("too-large",)
            else:  # "late": a response split across reads, its id last
                text = line({"jsonrpc": "2.0", "result": value, "id": n})
                peer.send(text[: len(text) // 2])
                await asyncio.sleep(0)
                peer.send(text[len(text) // 2 :])
                outcome = ("result", value)
            if first:
                expected[n] = outcome
        peer.send(client_probe("probe"))
        assert await peer.until("probe") == []  # no reply to any response
        assert await peer.close() == []
        for n, call in enumerate(calls):
            outcome = expected.get(n, ("closed",))
            if outcome[0] == "result":
                assert call.result() == outcome[1]
                continue
            exc = call.exception()
            if outcome[0] == "closed":
                assert isinstance(exc, client.ConnectionClosed)
            elif outcome[0] == "invalid":
                assert isinstance(exc, client_connection.InvalidResponse) and exc.code == -32603
            elif outcome[0] == "too-large":
                assert isinstance(exc, client_connection.MessageTooLarge)
                assert exc.max_message_size == limit
            else:
                assert isinstance(exc, client.RequestError) and not isinstance(exc, client_connection.InvalidResponse)
                assert exc.code == outcome[1]
                if outcome[2] is not MISSING:
                    assert exc.data == outcome[2]

    with codec(use_orjson):
        run(scenario())


# -- 7. EOF anywhere ------------------------------------------------------------------------------
@fuzz("connection_eof")
@given(
    pending=st.integers(0, 4),
    cut=st.integers(0, 400),
    role=st.sampled_from(["agent", "client"]),
    use_orjson=st.booleans(),
)
def test_eof_mid_line_or_with_requests_pending_ends_cleanly(
    pending: int, cut: int, role: str, use_orjson: bool
) -> None:
    """The peer stops mid-message: our pending requests fail with ConnectionClosed, the partial
    line is treated as a last line (answered if due), and run() returns."""
    message = line({"jsonrpc": "2.0", "id": "last", "method": "_ext", "params": {"pad": "z" * 200}})
    partial = message[: min(cut, len(message) - 1)]  # never the whole line with its newline

    async def scenario() -> None:
        handler: Any = FuzzAgent() if role == "agent" else FuzzClient()
        peer = Peer(handler)
        conn = peer.connection if role == "client" else None
        calls = []
        if conn is not None:
            calls = [asyncio.ensure_future(conn.request("_call", None)) for _ in range(pending)]
            for _ in range(pending):
                assert "params" not in await peer.recv()  # None params are left out
        peer.send(partial)
        rest = await peer.close()
        oracle = agent_oracle(handler) if role == "agent" else client_oracle(handler)
        oracle.line(partial)
        check_replies(rest, oracle.wants)
        for call in calls:
            assert isinstance(call.exception(), client.ConnectionClosed)
        if conn is not None:
            with pytest.raises(client.ConnectionClosed):
                await conn.request("_call", None)

    with codec(use_orjson):
        run(scenario())


# -- 8. cancellation races ------------------------------------------------------------------------
@fuzz("connection_cancel")
@given(
    plan=st.lists(
        st.tuples(st.sampled_from(["request", "request", "dup", "cancel", "cancel-bad", "flush"]), st.integers(0, 7)),
        max_size=16,
    ),
    use_orjson=st.booleans(),
)
def test_every_request_is_answered_once_whatever_the_cancel_timing(
    plan: list[tuple[str, int]], use_orjson: bool
) -> None:
    """Requests whose handlers wait forever, `$/cancel_request` in the same read as the request
    or a later one: every request gets exactly one answer (-32800 when cancelled), none is lost."""

    class WaitingAgent(FuzzAgent):
        async def ext_method(self, method: str, params: Any) -> Any:
            await asyncio.Event().wait()  # never returns
            raise AssertionError("unreachable")

    async def scenario() -> None:
        peer = Peer(WaitingAgent(), shutdown_grace=0.0)
        chunk = b""
        issued: list[int | str] = []
        live: set[int | str] = set()
        wants: list[Want] = []
        for kind, n in plan:
            if kind == "request":
                msg_id: int | str = len(issued) if n % 2 else f"r{len(issued)}"
                issued.append(msg_id)
                live.add(msg_id)
                chunk += line({"jsonrpc": "2.0", "id": msg_id, "method": "_wait"})
            elif kind == "dup" and live:
                msg_id = sorted(live, key=str)[n % len(live)]
                chunk += line({"jsonrpc": "2.0", "id": msg_id, "method": "_wait", "params": {}})
                wants.append(Want(msg_id, {-32600}))  # the same id while it is in flight
            elif kind == "cancel" and issued:
                msg_id = issued[n % len(issued)]
                chunk += line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": msg_id}})
                if msg_id in live:
                    live.discard(msg_id)
                    wants.append(Want(msg_id, {-32800}))
            elif kind == "cancel-bad":
                bad = [[n], str(n) + "x", float(n) + 0.5, True, None][n % 5]
                chunk += line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": bad}})
            elif kind == "flush":
                peer.send(chunk)
                chunk = b""
                for _ in range(n):
                    await asyncio.sleep(0)
        peer.send(chunk + probe("probe"))
        # -32800 for a request cancelled before it ran is sent from a callback: the probe may
        # overtake it, so the answers are collected up to EOF.
        replies = await peer.until("probe")
        rest = await peer.close()
        # At EOF the handlers still waiting are cancelled without an answer (the grace is 0).
        check_replies(replies + rest, wants)

    with codec(use_orjson):
        run(scenario())


def test_oracle_helpers() -> None:
    assert related("params.prompt[0].text", "params.prompt[0]")
    assert related("params.prompt", "params.prompt[0]")
    assert not related("params.promptx", "params.prompt")
    assert not related("params.cwd", "params.mcpServers[0]")
    assert re.fullmatch(r"params(\.\w+|\[\d+\])*", render(("prompt", 0, "text")))
