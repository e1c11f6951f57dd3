"""The cookie store's two operations the WebSocket upgrade needs (httpx reads the jar itself).

One `http.cookiejar.CookieJar` serves every request of every connection a `RemoteAgent`
opens, so a load balancer's affinity cookie comes back on each POST, GET, upgrade and
reconnect. Imported only when a WebSocket is opened: `http.cookiejar` and `urllib.request`
cost a stdio client 3 MiB and 15 ms at import.
"""

from __future__ import annotations

import email.message
import http.cookiejar
import urllib.parse
import urllib.request

__all__ = ["cookie_header", "store_cookies"]


def _cookie_url(url: str) -> str:
    """The http(s) URL a ws(s) URL stands for: cookies are scoped by host, path and `Secure`."""
    parts = urllib.parse.urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme.lower(), parts.scheme.lower())
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path or "/", parts.query, ""))


def cookie_header(jar: http.cookiejar.CookieJar, url: str) -> str | None:
    """The `Cookie` header value `jar` holds for a request to `url`, if any."""
    request = urllib.request.Request(_cookie_url(url))
    jar.add_cookie_header(request)
    return request.get_header("Cookie")


class _HeadersResponse:
    """The shape `CookieJar.extract_cookies` reads a response through: `info()` -> headers."""

    def __init__(self, set_cookies: list[str]) -> None:
        self._headers = email.message.Message()
        for value in set_cookies:
            self._headers["Set-Cookie"] = value

    def info(self) -> email.message.Message:
        return self._headers


def store_cookies(jar: http.cookiejar.CookieJar, url: str, set_cookies: list[str]) -> None:
    """Keep the cookies of `Set-Cookie` headers received from `url` (expired ones are removed)."""
    if set_cookies:
        request = urllib.request.Request(_cookie_url(url))
        jar.extract_cookies(_HeadersResponse(set_cookies), request)  # type: ignore[arg-type]
