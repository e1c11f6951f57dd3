"""The conformance checks against an agent served remotely (the RFD's WebSocket or Streamable
HTTP profile), in the client package, which has `connect_remote`:

    report = check_url("ws://127.0.0.1:8000/acp")

Each check opens a fresh connection to the URL (`over_remote`, an opener like `over_stdio`) and
runs as it does over stdio. The stdio-only rules (`STDIO_ONLY`: line framing on stdout, exit
at EOF, stderr volume) are reported as skipped, not applicable. Needs `websockets` (ws://) or
`httpx[http2]` (http://), as `connect_remote` does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.cookiejar
import urllib.parse
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from typing import Final

from ..remote_client import open_transport
from ..remote_options import RemoteOptions, RemoteUnavailable, profile_of
from .conformance import run_checks
from .conformance_checks import Options, script_of
from .conformance_report import CheckResult, Report
from .runners import AgentRun, Answer, Opener, ScriptedClient

__all__ = ["STDIO_ONLY", "check_url", "check_url_async", "over_remote"]

STDIO_ONLY: Final = ("stdio-framing", "exit-on-eof", "info-stderr", "info-load-after-restart")
"""Checks of the stdio transport itself, and the restart check (the kit cannot restart a
served agent): not applicable to a remote one."""

_PROFILE_NAMES: Final = {"websocket": "WebSocket", "http": "Streamable HTTP"}


def over_remote(
    url: str, script: Mapping[str, Answer] | None = None, options: RemoteOptions | None = None
) -> Opener:
    """An opener connecting afresh to the agent at `url` for each run (one cookie store for
    all of them, as one client would keep)."""
    base = options or RemoteOptions()

    @asynccontextmanager
    async def opener(eof_wait: float) -> AsyncGenerator[AgentRun, None]:
        transport = await open_transport(url, base)
        run = AgentRun(
            ScriptedClient(transport.reader, transport.writer, script, close_timeout=0.5)
        )
        run.client.start()
        try:
            yield run
        finally:
            await run.client.connection.close()
            await transport.aclose()
            await run.client.aclose()

    return opener


async def _reachable(url: str, timeout: float) -> None:
    """RemoteUnavailable unless something accepts TCP connections where `url` points."""
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme.lower() in ("wss", "https")
    port = parts.port or (443 if secure else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, port), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        raise RemoteUnavailable(
            f"cannot reach {parts.hostname}:{port} ({exc or type(exc).__name__})"
        ) from None
    writer.close()


def _not_applicable(result: CheckResult, why: str) -> CheckResult:
    if result.check.id not in STDIO_ONLY:
        return result
    if result.check.id == "info-load-after-restart":
        why = "not applicable over a URL: the kit cannot restart an agent it did not start"
    return dataclasses.replace(result, status="skipped", detail=why, offending=None, warnings=[])


async def check_url_async(url: str, options: Options | None = None) -> Report:
    """`check_url`, for a caller already in an event loop."""
    options = options or Options()
    profile = profile_of(url)
    await _reachable(url, options.timeout)
    remote = RemoteOptions(cookies=http.cookiejar.CookieJar(), open_timeout=options.timeout)
    report = await run_checks(over_remote(url, script_of(options), remote), url, options)
    why = f"not applicable over {_PROFILE_NAMES[profile]}: a rule of the stdio transport"
    results = [_not_applicable(result, why) for result in report.results]
    return dataclasses.replace(report, results=results)


def check_url(url: str, options: Options | None = None) -> Report:
    """Run every check against the agent served at `url` (ws://, wss://, http://, https://);
    RemoteUnavailable if the URL is not one, its library is missing, or nothing listens there."""
    return asyncio.run(check_url_async(url, options))
