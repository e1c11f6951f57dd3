"""Who may use a served agent (part of `remote`): the checks `asgi_app` makes on every request
before it upgrades a WebSocket or reads a body.

1. `Host` (DNS rebinding): accepted only if it matches `allowed_hosts` (default the loopback
   names with any port). A request without `Host` (in-process callers) passes: browsers always
   send it.
2. `Origin` (a web page driving the agent): a request carrying one is accepted only if it
   matches `allowed_origins` (default loopback origins only; `null` matches no default).
3. Credentials: with an `authenticate` hook, it gets an `AuthRequest` and returns the caller's
   `Principal`, or None to refuse (401 with `WWW-Authenticate`). Without a hook only loopback
   clients are served (the local user's principal), unless `allow_unauthenticated=True`.

Patterns (hosts and origins) compare case-insensitively; a `:*` suffix matches any port or
none (`localhost:*`, `http://127.0.0.1:*`), and `*` alone matches everything.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast
from urllib.parse import parse_qs

from .dispatch import RequestError
from .principal import LOCAL_PRINCIPAL, Principal

__all__ = [
    "LOOPBACK_HOSTS",
    "LOOPBACK_ORIGINS",
    "AuthRequest",
    "Authenticate",
    "BearerTokens",
    "Gate",
    "Refusal",
]

LOOPBACK_HOSTS: Final = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS: Final = tuple(
    f"{scheme}://{host}" for scheme in ("http", "https") for host in LOOPBACK_HOSTS
)


@dataclass(frozen=True)
class AuthRequest:
    """What an authentication hook sees of a request (before any body is read)."""

    kind: str
    """`websocket` (an upgrade) or `http` (a Streamable HTTP POST, GET or DELETE)."""
    method: str
    path: str
    headers: Mapping[str, str]
    """By lower-case name; repeated headers joined with commas."""
    query: Mapping[str, list[str]]
    client: tuple[str, int] | None
    """The peer's address as the ASGI server saw it (a reverse proxy's, behind one)."""
    subprotocols: tuple[str, ...]
    """The WebSocket subprotocols the client offered (empty over HTTP)."""

    @property
    def bearer(self) -> str | None:
        """The token of an `Authorization: Bearer <token>` header, if there is one."""
        scheme, _, token = self.headers.get("authorization", "").strip().partition(" ")
        token = token.strip()
        return token if scheme.lower() == "bearer" and token else None


Authenticate = Callable[[AuthRequest], Principal | None | Awaitable[Principal | None]]
"""The `asgi_app(authenticate=...)` hook: sync or async; None refuses the request (401)."""


class BearerTokens:
    """An authentication hook: `Authorization: Bearer <token>` against a set of tokens, each its
    own principal, compared in constant time (`hmac.compare_digest`). Several tokens may name
    the same principal: rotate by adding the new token, moving clients, removing the old.

    A principal's id never contains its secret: `token:<name>` for a named token, else
    `token:sha256:<first 16 hex digits of the token's SHA-256>`."""

    def __init__(self, tokens: Mapping[str, str] | Iterable[str]) -> None:
        named: dict[str, str]
        if isinstance(tokens, Mapping):
            named = dict(cast("Mapping[str, str]", tokens))
        else:
            named = {token: _anonymous(token) for token in tokens}
        self._tokens: list[tuple[bytes, Principal]] = []
        for token, name in named.items():
            if not token or token != token.strip():
                raise ValueError("a bearer token must be non-empty, without surrounding spaces")
            principal = Principal(id=f"token:{name}", kind="token", claims={"name": name})
            self._tokens.append((token.encode(), principal))
        if not self._tokens:
            raise ValueError("BearerTokens needs at least one token")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BearerTokens:
        """One token per line: `TOKEN`, or `NAME TOKEN` to name its principal `token:NAME`;
        blank lines and `#` comments are skipped."""
        tokens: dict[str, str] = {}
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the token file {os.fspath(path)}: {exc}") from None
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) > 2:
                raise ValueError(
                    f"{os.fspath(path)}:{number}: expected `TOKEN` or `NAME TOKEN`, "
                    f"got {len(fields)} fields (tokens contain no spaces)"
                )
            token = fields[-1]
            tokens[token] = fields[0] if len(fields) == 2 else _anonymous(token)
        if not tokens:
            raise ValueError(f"the token file {os.fspath(path)} holds no token (one per line)")
        return cls(tokens)

    @classmethod
    def from_env(cls, name: str = "ACP_TOKENS") -> BearerTokens:
        """Tokens from the environment variable `name`, separated by commas or whitespace."""
        value = os.environ.get(name, "")
        tokens = [t for t in value.replace(",", " ").split() if t]
        if not tokens:
            raise ValueError(f"the environment variable {name} holds no token")
        return cls(tokens)

    def __call__(self, request: AuthRequest) -> Principal | None:
        offered = request.bearer
        if offered is None:
            return None
        raw = offered.encode("utf-8", "surrogateescape")
        found: Principal | None = None
        for token, principal in self._tokens:  # every token compared: no early exit to time
            if hmac.compare_digest(raw, token):
                found = principal
        return found


def _anonymous(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: its HTTP status, a message for the client, extra headers, and
    for a limit's refusal its JSON-RPC error (`remote_limits.limit_refusal`)."""

    status: int
    detail: str
    headers: tuple[tuple[bytes, bytes], ...] = ()
    error: RequestError | None = None


class Gate:
    """The checks of `asgi_app`, in order: Host, Origin, then credentials (or loopback)."""

    def __init__(
        self,
        authenticate: Authenticate | None,
        *,
        allow_unauthenticated: bool,
        allowed_hosts: Iterable[str] | None,
        allowed_origins: Iterable[str] | None,
        challenge: str,
    ) -> None:
        self.authenticate = authenticate
        self.allow_unauthenticated = allow_unauthenticated
        self.hosts = _patterns(LOOPBACK_HOSTS if allowed_hosts is None else allowed_hosts)
        self.origins = _patterns(LOOPBACK_ORIGINS if allowed_origins is None else allowed_origins)
        self.challenge = ((b"www-authenticate", challenge.encode("latin-1")),)

    def exposure(self, headers: Mapping[bytes, bytes]) -> Refusal | None:
        """The Host and Origin checks (403)."""
        host = headers.get(b"host")
        if host is not None and not _matches(host.decode("latin-1"), self.hosts):
            return Refusal(
                403,
                f"Host {host.decode('latin-1')!r} is not allowed (DNS rebinding protection): "
                "add it to asgi_app(allowed_hosts=...)",
            )
        origin = headers.get(b"origin")
        if origin is not None and not _matches(origin.decode("latin-1"), self.origins):
            return Refusal(
                403,
                f"Origin {origin.decode('latin-1')!r} is not allowed: "
                "add it to asgi_app(allowed_origins=...)",
            )
        return None

    async def principal(self, request: AuthRequest) -> Principal | Refusal:
        """The caller's principal, or why not (401 with the challenge, or 403)."""
        if self.authenticate is None:
            if self.allow_unauthenticated or _is_loopback(request.client):
                return LOCAL_PRINCIPAL
            return Refusal(
                403,
                f"client {request.client[0] if request.client else '?'} is not on loopback and "
                "this server has no authentication: give asgi_app(authenticate=...) (for "
                "example BearerTokens), or allow_unauthenticated=True behind your own gate",
            )
        result = self.authenticate(request)
        if isinstance(result, Awaitable):
            result = await result
        if result is None:
            return Refusal(401, "missing or invalid credentials", self.challenge)
        return result


def auth_request(
    kind: str, scope: Mapping[str, object], headers: Mapping[bytes, bytes]
) -> AuthRequest:
    """The hook's view of an ASGI scope (`headers` as `request_headers` read them)."""
    client: object = scope.get("client")
    address: tuple[str, int] | None = None
    if isinstance(client, (list, tuple)) and len(pair := cast("Sequence[object]", client)) == 2:
        address = (str(pair[0]), int(cast("int", pair[1])))
    raw_query = scope.get("query_string", b"")
    query = parse_qs(raw_query.decode("latin-1")) if isinstance(raw_query, bytes) else {}
    offered: object = scope.get("subprotocols", ())
    listed = cast("Sequence[object]", offered) if isinstance(offered, (list, tuple)) else ()
    subprotocols = tuple(str(p) for p in listed)
    return AuthRequest(
        kind=kind,
        method=str(scope.get("method", "GET")),
        path=str(scope.get("path", "")),
        headers={k.decode("latin-1"): v.decode("latin-1") for k, v in headers.items()},
        query=query,
        client=address,
        subprotocols=subprotocols,
    )


def _patterns(values: Iterable[str]) -> tuple[str, ...]:
    patterns = tuple(v.strip().lower() for v in values)
    for pattern in patterns:
        if not pattern:
            raise ValueError("an allowed host or origin must be non-empty")
    return patterns


def _matches(value: str, patterns: tuple[str, ...]) -> bool:
    value = value.strip().lower()
    for pattern in patterns:
        if pattern == "*" or value == pattern:
            return True
        if pattern.endswith(":*"):
            base = pattern[:-2]
            if value == base:
                return True
            if value.startswith(base + ":") and value[len(base) + 1 :].isdigit():
                return True
    return False


def _is_loopback(client: tuple[str, int] | None) -> bool:
    """A loopback peer; no address at all (a Unix socket, an in-process caller) is local too."""
    if client is None:
        return True
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
