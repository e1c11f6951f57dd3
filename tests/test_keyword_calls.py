"""Proxy methods take their params object or its fields as keywords, and requests a timeout.

Static: mypy --strict and both pyrights (strict) see the keyword form's names and types, on a
snippet whose wrong lines are marked; both checkers must flag exactly those lines. Runtime:
both forms put the same bytes on the wire, mixing them is a TypeError, and a request that
times out raises TimeoutError after sending `$/cancel_request`. A hand-made schema whose
params fields are named `self`, `timeout`, `class`, `params` and `fields` still generates a
working, type-clean keyword form.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import sys
import textwrap
from collections.abc import Awaitable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import client
import pytest
from client import types as ct
from doc_snippets import as_golden, python_blocks
from test_contrib_doc import contrib_snippets
from typecheck import PYRIGHTS, PyrightRun, mypy_strict

from codegen.generate import Target, generate_files
from codegen.write import write_tree

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
TIMEOUT = 5.0

# Every line marked `# error` must be flagged by both checkers; no other line may be.
SNIPPET = """
from __future__ import annotations

from client import AgentProxy, helpers, types


async def calls(agent: AgentProxy) -> list[object]:
    text = types.TextContent(text="hi")
    out: list[object] = []
    out.append(await agent.session_prompt(session_id="s", prompt=[text]))
    out.append(await agent.session_prompt(types.PromptRequest(session_id="s", prompt=[text]), timeout=1.5))
    out.append(await agent.session_prompt(session_id="s", prompt=[], meta={"k": 1}, timeout=None))
    out.append(await agent.initialize(protocol_version=1))
    out.append(await agent.initialize(protocol_version=1, client_capabilities=types.ClientCapabilities()))
    out.append(await agent.logout())
    out.append(await agent.session_new(cwd="/", mcp_servers=[], timeout=3))
    option = types.SetSessionConfigOptionRequestBoolean(session_id="s", config_id="c", value=True)
    out.append(await agent.session_set_config_option(option, timeout=2.0))
    out.append(await agent.session_set_config_option(session_id="s", config_id="c", value=True))
    out.append(await agent.session_set_config_option(session_id="s", config_id="c", value="v", timeout=1.0))
    await agent.session_cancel(session_id="s")
    await agent.session_cancel(types.CancelNotification(session_id="s"))
    reply: types.PromptResponse = await agent.session_prompt(session_id="s", prompt=[])
    out.append(reply)
    out.append(await agent.session_prompt(session_id="s", promt=[text]))  # error: wrong keyword
    out.append(await agent.session_prompt(session_id=1, prompt=[text]))  # error: wrong type
    out.append(await agent.session_prompt(session_id="s", prompt=["hi"]))  # error: wrong item type
    out.append(await agent.session_prompt(session_id="s"))  # error: a required field missing
    out.append(await agent.session_prompt(types.PromptRequest(session_id="s", prompt=[]), session_id="s"))  # error
    out.append(await agent.session_prompt(types.CancelNotification(session_id="s")))  # error: wrong object
    out.append(await agent.session_prompt(session_id="s", prompt=[], timeout="soon"))  # error: timeout type
    await agent.session_cancel(session_id="s", timeout=1.0)  # error: notifications take no timeout
    out.append(await agent.session_set_config_option(session_id="s", config_id="c", value=3))  # error: bool | str
    wrong: types.NewSessionResponse = await agent.session_prompt(session_id="s", prompt=[])  # error: result type
    out.append(wrong)
    return out


def builders() -> list[object]:
    out: list[object] = [helpers.update_usage(used=1, size=2), helpers.text_block("hi", meta={"k": 1})]
    blocks = [helpers.text_block("x")]
    out.append(helpers.start_tool_call("t", "Read", kind="read", content=(helpers.tool_content(b) for b in blocks)))
    out.append(helpers.update_usage(usd=1, size=2))  # error: wrong keyword
    out.append(helpers.update_usage(1, 2))  # error: keyword-only
    out.append(helpers.update_usage(used=1))  # error: a required field missing
    out.append(helpers.text_block(1))  # error: wrong type
    out.append(helpers.start_tool_call("t", "Read", kind="reading"))  # error: not a ToolKind
    chunk: types.SessionUpdateAgentThoughtChunk = helpers.update_agent_message_text("hi")  # error: result type
    out.append(chunk)
    return out
"""


def marked_lines(source: str) -> set[int]:
    return {n for n, line in enumerate(source.splitlines(), 1) if "# error" in line}


def error_lines(output: str, file: str) -> set[int]:
    """Lines of `file` with an error, from mypy (`f.py:3: error:`) or pyright (`f.py:3:5 - error:`)."""
    pattern = re.compile(rf"(?:^|[\s/]){re.escape(file)}:(\d+)(?::\d+ -|:) error", re.M)
    return {int(m.group(1)) for m in pattern.finditer(output)}


@pytest.mark.slow
def test_mypy_sees_the_keyword_form(keyword_snippet: Path, mypy_cache: Path) -> None:
    work = keyword_snippet.parent
    result = mypy_strict(work, "--no-error-summary", "snippet.py", cache=mypy_cache, mypypath=ROOT / "generated")
    mypy = result.stdout + result.stderr
    assert "snippet.py" in mypy  # the run reached the snippet
    assert error_lines(mypy, "snippet.py") == marked_lines(SNIPPET), mypy
    assert 'Unexpected keyword argument "promt"' in mypy


@pytest.mark.slow
@pytest.mark.parametrize("checker", PYRIGHTS)
def test_pyright_sees_the_keyword_form(keyword_snippet: Path, pyright_run: PyrightRun, checker: str) -> None:
    """Checked in the suite's pyright runs, importing generated/client as `client`."""
    found = pyright_run.problems(keyword_snippet, checkers=[checker])
    pyright = "\n".join(found) + "\n" + json.dumps(pyright_run.summary[checker])
    assert error_lines(pyright, "snippet.py") == marked_lines(SNIPPET), pyright


@pytest.mark.slow
def test_role_modules_are_pyright_strict_clean(golden_pyright: PyrightRun) -> None:
    """No pyright or basedpyright (strict) error anywhere in the role modules: proxies, base classes, entry
    points (the suite's pyright runs over generated/)."""
    role_files = sorted((ROOT / "generated").rglob("agent.py")) + sorted((ROOT / "generated").rglob("client.py"))
    assert len(role_files) == 6
    found = [line for path in role_files for line in golden_pyright.problems(path)]
    assert not found, "\n".join(found)


# -- runtime ----------------------------------------------------------------------------------


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, TIMEOUT)

    return asyncio.run(bounded())


class Pipe:
    def __init__(self) -> None:
        self.reader = asyncio.StreamReader()

    def write(self, data: bytes) -> None:
        self.reader.feed_data(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def close(self) -> None:
        self.reader.feed_eof()


class QuietClient(client.Client):
    async def session_update(self, params: ct.SessionNotification) -> None:
        return None

    async def session_request_permission(self, params: ct.RequestPermissionRequest) -> ct.RequestPermissionResponse:
        return ct.RequestPermissionResponse(outcome=ct.RequestPermissionOutcomeCancelled())


class RawAgent:
    """The agent side as raw JSON lines, in front of a generated client's proxy."""

    def __init__(self) -> None:
        self.to_client = Pipe()
        self.from_client = Pipe()
        self.proxy, self.connection = client.connect(QuietClient(), self.to_client.reader, self.from_client)
        self.task = asyncio.ensure_future(self.connection.run())

    async def recv(self) -> Any:
        line = await asyncio.wait_for(self.from_client.reader.readline(), TIMEOUT)
        assert line, "the client closed its output"
        return json.loads(line)

    def answer(self, msg_id: Any, result: Any) -> None:
        self.to_client.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}).encode() + b"\n")

    async def call(self, call: Awaitable[T], result: Any) -> tuple[Any, T]:
        """Run a proxy request; answer it with `result`; return what was sent and the reply."""
        pending = asyncio.ensure_future(call)
        sent = await self.recv()
        self.answer(sent["id"], result)
        return sent, await pending

    async def close(self) -> None:
        self.to_client.close()
        await asyncio.wait_for(self.task, TIMEOUT)


def test_keyword_and_object_forms_send_the_same_message() -> None:
    async def scenario() -> list[Any]:
        peer = RawAgent()
        text = ct.TextContent(text="hi")
        sent = []
        for call in (
            peer.proxy.session_prompt(session_id="s1", prompt=[text], meta={"k": 1}),
            peer.proxy.session_prompt(ct.PromptRequest(session_id="s1", prompt=[text], meta={"k": 1})),
            peer.proxy.initialize(protocol_version=1),
            peer.proxy.initialize(ct.InitializeRequest(protocol_version=1)),
        ):
            message, _ = await peer.call(call, {"stopReason": "end_turn", "protocolVersion": 1})
            sent.append(message)
        await peer.proxy.session_cancel(session_id="s1")
        sent.append(await peer.recv())
        await peer.close()
        return sent

    prompt_kw, prompt_obj, init_kw, init_obj, cancel = run(scenario())
    assert (
        prompt_kw["params"]
        == prompt_obj["params"]
        == {
            "sessionId": "s1",
            "prompt": [{"type": "text", "text": "hi"}],
            "_meta": {"k": 1},
        }
    )
    assert prompt_kw["method"] == "session/prompt"
    # The dataclass default applies in the keyword form too.
    assert init_kw["params"] == init_obj["params"]
    assert init_kw["params"]["clientCapabilities"] == ct.ClientCapabilities().to_dict()
    assert cancel == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}


def test_mixing_the_forms_or_a_wrong_keyword_is_a_type_error_and_sends_nothing() -> None:
    async def scenario() -> list[str]:
        peer = RawAgent()
        errors = []
        request = ct.PromptRequest(session_id="s", prompt=[])
        cancel = ct.CancelNotification(session_id="s")
        for bad in (
            lambda: peer.proxy.session_prompt(request, session_id="s"),  # type: ignore[call-overload]
            lambda: peer.proxy.session_prompt(session_id="s", promt=[]),  # type: ignore[call-overload]
            lambda: peer.proxy.session_prompt(session_id="s"),  # type: ignore[call-overload]
            lambda: peer.proxy.session_cancel(cancel, session_id="s"),  # type: ignore[call-overload]
        ):
            with pytest.raises(TypeError) as info:
                await bad()
            errors.append(str(info.value))
        # Nothing reached the wire: the next message is this one.
        message, _ = await peer.call(peer.proxy.session_prompt(session_id="ok", prompt=[]), {"stopReason": "end_turn"})
        assert message["params"] == {"sessionId": "ok", "prompt": []}
        await peer.close()
        return errors

    mixed, typo, missing, mixed_notification = run(scenario())
    assert mixed == "session_prompt() takes a types.PromptRequest or its fields as keywords, not both"
    assert "promt" in typo
    assert "prompt" in missing
    assert "session_cancel()" in mixed_notification and "not both" in mixed_notification


def test_timeout_raises_timeout_error_and_cancels_the_request() -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        peer = RawAgent()
        call = asyncio.ensure_future(peer.proxy.session_new(cwd="/", mcp_servers=[], timeout=0.05))
        sent = await peer.recv()
        with pytest.raises(TimeoutError):
            await call
        cancel = await peer.recv()
        assert not peer.connection._pending  # the entry is gone
        # A late answer for the timed-out id is dropped; the connection keeps working.
        peer.answer(sent["id"], {"sessionId": "late"})
        message, reply = await peer.call(peer.proxy.session_new(cwd="/", mcp_servers=[]), {"sessionId": "next"})
        await peer.close()
        return sent, cancel, (message, reply)

    sent, cancel, (message, reply) = run(scenario())
    assert sent["method"] == "session/new"
    assert cancel == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": sent["id"]}}
    assert message["id"] != sent["id"]
    assert reply.session_id == "next"


# -- names that clash with the method's own parameters ----------------------------------------

CLASH_SCHEMA = {
    "$defs": {
        "NewSessionRequest": {
            "type": "object",
            "properties": {
                "self": {"type": "string"},
                "timeout": {"type": "integer"},
                "class": {"type": "string"},
                "params": {"type": "object"},
                "fields": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["self", "timeout"],
            "x-side": "agent",
            "x-method": "session/new",
        },
        "NewSessionResponse": {
            "type": "object",
            "properties": {"sessionId": {"type": "string"}},
            "required": ["sessionId"],
            "x-side": "agent",
            "x-method": "session/new",
        },
    }
}
CLASH_META = {"version": 1, "agentMethods": {"session_new": "session/new"}, "clientMethods": {}, "protocolMethods": {}}

CLASH_SNIPPET = """
from __future__ import annotations

from clash_pkg import AgentProxy, types


async def calls(agent: AgentProxy) -> list[types.NewSessionResponse]:
    return [
        await agent.session_new(self="a", timeout=3, class_="c", params={"x": 1}, fields=["f"], timeout_=2.0),
        await agent.session_new(types.NewSessionRequest(self="a", timeout=3), timeout_=None),
        await agent.session_new(self="a", timeout=3.5),  # error: timeout is the field here
        await agent.session_new(self="a", timeout=3, klass="c"),  # error: unknown keyword
    ]
"""


@pytest.fixture(scope="module")
def clash_pkg(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModuleType]:
    work = tmp_path_factory.mktemp("clash")
    schema_dir = work / "schema"
    schema_dir.mkdir()
    (schema_dir / "schema.json").write_text(json.dumps(CLASH_SCHEMA))
    (schema_dir / "meta.json").write_text(json.dumps(CLASH_META))
    target = Target("client", work / "clash_pkg", str(schema_dir))
    write_tree(target.out, generate_files(target))
    sys.path.insert(0, str(work))
    try:
        return work, importlib.import_module("clash_pkg")
    finally:
        sys.path.remove(str(work))


def test_clashing_field_names_keep_their_names_and_the_method_renames_its_own(
    clash_pkg: tuple[Path, ModuleType],
) -> None:
    work, pkg = clash_pkg
    source = (work / "clash_pkg" / "client.py").read_text()
    assert "async def session_new(\n        _self," in source
    assert "timeout_: float | None = None" in source

    async def scenario() -> tuple[Any, Any]:
        to_client, from_client = Pipe(), Pipe()

        class Quiet(pkg.Client):  # type: ignore[misc, name-defined]
            pass

        proxy, connection = pkg.connect(Quiet(), to_client.reader, from_client)
        serving = asyncio.ensure_future(connection.run())
        call = asyncio.ensure_future(
            proxy.session_new(self="a", timeout=3, class_="c", params={"x": 1}, fields=["f"], timeout_=0.05)
        )
        sent = json.loads(await from_client.reader.readline())
        with pytest.raises(TimeoutError):  # timeout_ is the call's timeout
            await call
        to_client.close()
        await asyncio.wait_for(serving, TIMEOUT)
        return sent, json.loads(await from_client.reader.readline())

    sent, cancel = run(scenario())
    assert sent["params"] == {"self": "a", "timeout": 3, "class": "c", "params": {"x": 1}, "fields": ["f"]}
    assert cancel["method"] == "$/cancel_request"


@pytest.mark.slow
def test_clashing_field_names_type_check(clash_pkg: tuple[Path, ModuleType], mypy_cache: Path) -> None:
    work, _ = clash_pkg
    (work / "clash_snippet.py").write_text(textwrap.dedent(CLASH_SNIPPET))
    mypy = mypy_strict(work, "--no-error-summary", "clash_pkg", "clash_snippet.py", cache=mypy_cache)
    output = mypy.stdout + mypy.stderr
    assert "clash_snippet.py" in output
    assert error_lines(output, "clash_snippet.py") == marked_lines(CLASH_SNIPPET), output
    # The role module is clean (conformance.py assumes an `initialize` this tiny schema lacks).
    assert "clash_pkg/client.py" not in output, output


@pytest.mark.slow
def test_examples_type_check_with_the_keyword_form(mypy_cache: Path) -> None:
    """The examples call every proxy method in the keyword form; mypy --strict must accept them."""
    examples = ROOT / "examples"
    sources = [examples / "echo_client.py", examples / "echo_agent.py"]
    keyword_calls = re.compile(r"await self\.(?:agent|peer)\.\w+\(\w+=")
    assert all(keyword_calls.search(path.read_text()) for path in sources)
    mypy = mypy_strict(
        ROOT, *map(str, sources), str(examples / "ws_budget.py"), cache=mypy_cache, mypypath=ROOT / "generated"
    )
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr


def readme_blocks() -> list[str]:
    """The README's Python code blocks."""
    return python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))


def readme_examples() -> dict[str, str]:
    """role -> the README's complete example of that role, as written (importing `myagent.acp` /
    `myclient.acp`): the block that runs it (other blocks import from the package too)."""
    found: dict[str, str] = {}
    for role, runs in (("agent", "run_agent("), ("client", "spawn_agent(")):
        (found[role],) = [b for b in readme_blocks() if f"from my{role}.acp import" in b and runs in b]
    return found


@pytest.mark.slow
def test_readme_examples_type_check(tmp_path: Path, mypy_cache: Path) -> None:
    """The README's agent and client examples (keyword calls, timeout=) and its contrib snippets pass mypy --strict."""
    examples = readme_examples()
    for role, source in examples.items():
        (tmp_path / f"readme_{role}.py").write_text(source.replace(f"from my{role}.acp", f"from {role}"))
    # The contrib snippets of docs/agents.md and docs/clients.md (tool calls, permissions,
    # terminals; the session accumulator).
    contrib = contrib_snippets()
    for i, block in enumerate(contrib):
        source = as_golden(block)
        (tmp_path / f"readme_contrib_{i}.py").write_text(source)
    clients_page = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    calls = [b for b in python_blocks(clients_page) if "async def calls(" in b]
    assert calls, "docs/clients.md shows the calling forms"
    (tmp_path / "readme_calls.py").write_text(as_golden(calls[0]))
    mypy = mypy_strict(
        tmp_path,
        *[f"readme_{name}.py" for name in (*examples, "calls", *(f"contrib_{i}" for i in range(len(contrib))))],
        cache=mypy_cache,
        mypypath=ROOT / "generated",
    )
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr
