"""What every remote profile shares: the options a connection is opened with, its TLS trust,
the error for a connection that cannot be opened, and the optional-library import.

The bottom of the remote client: `remote_client` (the handle) opens `remote_ws` or
`remote_http` (the profiles), and all three read this module; nothing here imports them back.
Importing it costs nothing for stdio use: the cookie jar and TLS modules are imported when a
connection's options are made, not when the package is.

TLS (`verify=`, the same for `wss://` and `https://`):
- `True` (the default): the system's trust store, as `ssl.create_default_context()` loads it,
  or the CA bundle file `SSL_CERT_FILE` and the hashed directory `SSL_CERT_DIR` names when set;
- a path: that CA file (or a `c_rehash` directory) alone;
- an `ssl.SSLContext`: used as it is (client certificates, pinning, ...);
- `False`: no verification at all (a test server; never across a network).
Proxies: none. An ACP endpoint is reached directly; `HTTP(S)_PROXY` and `ALL_PROXY` are ignored
on both profiles (a proxy in between would see every prompt and tool call).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Final, Literal, Protocol, Union

from .connection import Reader, Writer

if TYPE_CHECKING:
    import http.cookiejar
    import ssl

__all__ = [
    "DEFAULT_OPEN_TIMEOUT",
    "RemoteOptions",
    "RemoteUnavailable",
    "Transport",
    "Verify",
    "import_optional",
    "profile_of",
    "tls_context",
]

DEFAULT_OPEN_TIMEOUT: Final = 10.0

_PROFILES: Final = {"ws": "websocket", "wss": "websocket", "http": "http", "https": "http"}

Verify = Union[bool, str, "os.PathLike[str]", "ssl.SSLContext"]
"""How a TLS server is verified: see the module's docstring."""


class RemoteUnavailable(Exception):
    """A remote connection cannot be opened: a bad URL, a missing library, a refused handshake
    or an unreachable server. The message says which, and what to do."""


OptionalModule = Literal["httpx", "websockets.asyncio.client", "websockets.exceptions"]
"""The only modules imported by name (never a name from the wire)."""


def import_optional(module: OptionalModule, purpose: str, install: str) -> ModuleType:
    """`module`, imported now; RemoteUnavailable naming the packages to install if it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise RemoteUnavailable(
            f"{purpose} needs the {module.split('.')[0]!r} package, which is not installed "
            f"({exc}); install it with: pip install {install}"
        ) from None


def profile_of(url: str) -> str:
    """'websocket' or 'http', from the URL's scheme; RemoteUnavailable for anything else."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    profile = _PROFILES.get(parts.scheme.lower())
    if profile is None or not parts.hostname:
        raise RemoteUnavailable(
            f"cannot connect to {url!r}: give a ws://, wss://, http:// or https:// URL with a "
            "host, e.g. ws://127.0.0.1:8000/acp"
        )
    return profile


def is_tls(url: str) -> bool:
    """Whether `url` is `wss://` or `https://`."""
    return url.split(":", 1)[0].lower() in ("wss", "https")


# -- TLS -------------------------------------------------------------------------------------
def tls_context(verify: Verify) -> ssl.SSLContext:
    """The client TLS context `verify` stands for (see the module's docstring); RemoteUnavailable
    for a CA path that cannot be read."""
    import ssl

    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is True:
        # Made once per trust setting: a context costs 10-50 ms, and every HTTP stream has a
        # client of its own.
        return _trusted(
            os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None
        )
    if verify is False:
        return _unverified()
    try:
        path = os.fspath(verify)
    except TypeError:
        raise TypeError(
            "verify= takes a bool, a CA file path or an ssl.SSLContext, "
            f"not {type(verify).__name__}"
        ) from None
    return _trusted(None, path) if os.path.isdir(path) else _trusted(path, None)


@functools.lru_cache(maxsize=8)
def _trusted(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    import ssl

    try:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    except (OSError, ssl.SSLError) as exc:
        where = " and ".join(
            f"{name} {value!r}"
            for name, value in (("CA file", cafile), ("CA directory", capath))
            if value
        )
        raise RemoteUnavailable(
            f"cannot load the TLS trust from {where}: {exc}; give verify= a readable PEM file of "
            "CA certificates (or fix SSL_CERT_FILE / SSL_CERT_DIR)"
        ) from None


@functools.lru_cache(maxsize=1)
def _unverified() -> ssl.SSLContext:
    import ssl

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


# -- the options and the transport -----------------------------------------------------------
def _new_jar() -> http.cookiejar.CookieJar:
    import http.cookiejar

    return http.cookiejar.CookieJar()


@dataclass
class RemoteOptions:
    """How connections are opened (every reconnect uses the same)."""

    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    """Sent on every request (an `Authorization` header, say)."""
    cookies: http.cookiejar.CookieJar = field(default_factory=_new_jar)
    http2: bool | None = None
    """Streamable HTTP: True HTTP/2 only, False HTTP/1.1, None HTTP/2 with HTTP/1.1 as fallback."""
    open_timeout: float = DEFAULT_OPEN_TIMEOUT
    """Seconds to open the connection (the handshake, the initialize POST's answer)."""
    max_message_size: int = 64 * 1024 * 1024
    verify: Verify = True
    """TLS trust for `wss://` and `https://` (see the module's docstring)."""

    def tls(self) -> ssl.SSLContext:
        """The TLS context of `verify`."""
        return tls_context(self.verify)


class Transport(Protocol):
    """One open remote connection, as a profile adapter gives it."""

    @property
    def reader(self) -> Reader: ...

    @property
    def writer(self) -> Writer: ...

    @property
    def connection_id(self) -> str | None: ...

    async def aclose(self) -> None:
        """End the connection (Streamable HTTP: DELETE it); the reader then sees EOF."""
        ...
