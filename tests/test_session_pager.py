"""The client's `session/list` pager (issue 27 §8): `async for info in agent.list_sessions(cwd=...)`
follows `nextCursor` until a page has none, against a real agent process that pages
(tests/paging_agent.py: 23 sessions, 5 a page), and stops on an agent that repeats a cursor.
The pager is decided from the schema (codegen/pagers.py): every client package with
`session/list` has it, agent packages have none."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import client as gen_client
import pytest
from client import types

from codegen.build import build_package
from codegen.ir import ObjectDef
from codegen.load import load, locate
from codegen.pagers import find_pagers

AGENT = Path(__file__).resolve().parent / "paging_agent.py"
GENERATED = Path(__file__).resolve().parent.parent / "generated"


class Quiet(gen_client.Client):
    async def session_update(self, params: types.SessionNotification) -> None:
        pass

    async def session_request_permission(
        self, params: types.RequestPermissionRequest
    ) -> types.RequestPermissionResponse:
        raise NotImplementedError


def listed(*args: str, **filters: Any) -> tuple[list[str], list[Any]]:
    """The session ids the pager yields, and the params of every session/list sent."""
    sent: list[Any] = []

    def tap(direction: str, line: bytes) -> None:
        message = json.loads(line)
        if direction == "out" and message.get("method") == "session/list":
            sent.append(message["params"])

    async def scenario() -> list[str]:
        async with gen_client.spawn_agent(Quiet(), [sys.executable, str(AGENT), *args], tap=tap) as agent:
            await agent.proxy.initialize(protocol_version=1, timeout=10.0)
            return [info.session_id async for info in agent.proxy.list_sessions(timeout=10.0, **filters)]

    async def bounded() -> list[str]:
        return await asyncio.wait_for(scenario(), 30.0)

    return asyncio.run(bounded()), sent


def test_the_pager_follows_every_cursor_to_the_last_page() -> None:
    ids, sent = listed()
    assert ids == [f"s{i:02d}" for i in range(23)]
    assert sent == [{}, {"cursor": "5"}, {"cursor": "10"}, {"cursor": "15"}, {"cursor": "20"}]


def test_the_filter_goes_with_every_page() -> None:
    ids, sent = listed(cwd="/work/b")
    assert ids == [f"s{i:02d}" for i in range(0, 23, 3)]  # 8 sessions: two pages
    assert sent == [{"cwd": "/work/b"}, {"cwd": "/work/b", "cursor": "5"}]


def test_an_agent_that_repeats_a_cursor_is_stopped_not_paged_forever() -> None:
    with pytest.raises(gen_client.InvalidResponse) as caught:
        listed("--loop")
    assert caught.value.data == {"details": "session/list gave the cursor 'again' twice"}


def test_every_client_package_with_session_list_has_the_pager_and_no_agent_package_has_one() -> None:
    for role_module in sorted(GENERATED.glob("**/client.py")) + sorted(GENERATED.glob("**/agent.py")):
        text = role_module.read_text(encoding="utf-8")
        has_list = "SESSION_LIST" in text and role_module.name == "client.py"
        assert ("async def list_sessions(" in text) == has_list, role_module


def test_the_decision_is_the_schema_s_cursor_fields() -> None:
    package = build_package(load(locate("v1", False)), "client", "x", "cmd")
    (pager,) = find_pagers(package)
    assert (pager.name, pager.method.wire, pager.item_type) == ("list_sessions", "session/list", "SessionInfo")
    assert (pager.cursor, pager.next_cursor, pager.filters) == ("cursor", "next_cursor", ("cwd", "meta"))
    assert find_pagers(build_package(load(locate("v1", False)), "agent", "x", "cmd")) == ()
    # Without the params' cursor field, session/list is not paged.
    uncursored = tuple(
        dataclasses.replace(d, fields=tuple(f for f in d.fields if f.wire != "cursor"))
        if isinstance(d, ObjectDef) and d.name == pager.params
        else d
        for d in package.definitions
    )
    assert find_pagers(dataclasses.replace(package, definitions=uncursored)) == ()
