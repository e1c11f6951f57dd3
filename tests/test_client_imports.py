"""`import client` costs a stdio client nothing of the remote transport (issue 31 §4): no
cookie jar, no urllib.request, no websockets or httpx until `connect_remote` is called. Each
check runs in a fresh interpreter, since this process has imported everything already.
`ssl` is imported by asyncio itself, so the baseline is the modules `import asyncio` brings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

GENERATED = Path(__file__).resolve().parent.parent / "generated"
REMOTE_ONLY = ("http.cookiejar", "urllib.request", "http.client", "email.message", "ssl", "websockets", "httpx", "h2")

PROBE = """
import asyncio, json, sys
baseline = set(sys.modules)
import {package} as pkg
after_import = set(sys.modules) - baseline

class Quiet(pkg.Client):
    async def session_update(self, params):
        pass

    async def session_request_permission(self, params):
        raise NotImplementedError

async def connect() -> None:
    try:  # Streamable HTTP sends nothing before initialize: this opens and closes
        async with pkg.connect_remote(Quiet(), sys.argv[1], open_timeout=2.0):
            pass
    except pkg.RemoteUnavailable:
        pass

asyncio.run(connect())
after_connect = set(sys.modules) - baseline
print(json.dumps({{"import": sorted(after_import), "connect": sorted(after_connect)}}))
"""


def _new_modules(package: str, url: str) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(package=package), url],
        cwd=GENERATED, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


def _remote(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in ("websockets", "httpx", "h2") or m in REMOTE_ONLY]


@pytest.mark.parametrize("package", ["client", "v2.client", "unstable.client"])
def test_importing_the_client_package_imports_nothing_for_remote_use(package: str) -> None:
    # Port 9 on loopback (discard) has no listener here: the connection is refused at once.
    seen = _new_modules(package, "ws://127.0.0.1:9/acp")
    assert _remote(seen["import"]) == []
    # The check is live: connecting is what brings the WebSocket library and the cookie jar in.
    assert {"websockets", "http.cookiejar"} <= set(_remote(seen["connect"]))


def test_an_http_connect_brings_httpx_only_then() -> None:
    seen = _new_modules("client", "https://127.0.0.1:9/acp")
    assert _remote(seen["import"]) == []
    assert "httpx" in seen["connect"] and "websockets" not in seen["connect"]
