"""Issue 29 B6: the generated `AsgiApp` is an ASGI 3 application to the type checkers, as
uvicorn's and hypercorn's own types describe one. SERVE is a script a user would write; it is
checked by mypy --strict here and by pyright strict in the suite's shared pyright run (the
`serve_snippet` fixture puts it beside the keyword snippet), with uvicorn and hypercorn from this
environment. It must have no `type: ignore`, and neither may examples/echo_agent.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from typecheck import PyrightRun, mypy_strict

ROOT = Path(__file__).resolve().parent.parent

SERVE = '''\
"""Serve a generated agent with uvicorn and with hypercorn, typed strictly, without ignores."""

from __future__ import annotations

import asyncio

import hypercorn.asyncio
import uvicorn
from agent import Agent, AsgiApp, asgi_app, types
from hypercorn.config import Config


class Quiet(Agent):
    async def initialize(self, params: types.InitializeRequest) -> types.InitializeResponse:
        return types.InitializeResponse(protocol_version=1)

    async def authenticate(self, params: types.AuthenticateRequest) -> types.AuthenticateResponse:
        return types.AuthenticateResponse()

    async def session_new(self, params: types.NewSessionRequest) -> types.NewSessionResponse:
        return types.NewSessionResponse(session_id="s")

    async def session_prompt(self, params: types.PromptRequest) -> types.PromptResponse:
        return types.PromptResponse(stop_reason="end_turn")

    async def session_cancel(self, params: types.CancelNotification) -> None:
        return None


app: AsgiApp = asgi_app(Quiet)


async def with_hypercorn(stop: asyncio.Event) -> None:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    await hypercorn.asyncio.serve(app, config, shutdown_trigger=stop.wait)


async def with_uvicorn() -> None:
    await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0)).serve()


def run_uvicorn() -> None:
    uvicorn.run(app, host="127.0.0.1", port=0)
'''


def test_the_serve_script_has_no_ignores() -> None:
    assert "type: ignore" not in SERVE and "pyright: ignore" not in SERVE
    echo = (ROOT / "examples" / "echo_agent.py").read_text()
    assert "type: ignore" not in echo and "pyright: ignore" not in echo


@pytest.mark.slow
def test_mypy_strict_takes_asgi_app_for_both_servers(serve_snippet: Path, mypy_cache: Path) -> None:
    result = mypy_strict(
        serve_snippet.parent, "--no-error-summary", serve_snippet.name, cache=mypy_cache, mypypath=ROOT / "generated"
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


@pytest.mark.slow
def test_pyright_strict_takes_asgi_app_for_both_servers(serve_snippet: Path, pyright_run: PyrightRun) -> None:
    found = pyright_run.problems(serve_snippet, ("error", "warning"))
    problems = [line for line in found if not hypercorns_own(line)]
    assert not problems, "\n".join(problems)


def hypercorns_own(problem: str) -> bool:
    """The one diagnostic strict mode gives any caller of hypercorn's `serve`, whatever the app:
    its `shutdown_trigger: Callable[..., Awaitable]` leaves the awaitable's type unknown. It is
    about hypercorn's annotation, not ours: the app argument is checked all the same (an app it
    does not take is a reportArgumentType error, which this does not excuse)."""
    own = "shutdown_trigger: ((...) -> Awaitable[Unknown])"
    return 'Type of "serve" is partially unknown' in problem and own in problem
