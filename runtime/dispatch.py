"""Routes one decoded JSON-RPC call to a handler: decode params -> call -> encode result.

The METHODS table drives it; nothing here is written per method. Errors become JSON-RPC
errors: unknown method -32601, invalid params -32602 (with the JSON path in `data`).
"""

from __future__ import annotations

import logging
import reprlib
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeAlias, cast

from . import types
from .methods import METHODS, MethodSpec

_log = logging.getLogger(__name__)

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800
AUTH_REQUIRED: Final = -32000
RESOURCE_NOT_FOUND: Final = -32002

# A factory's first argument: the SDK's `data` (a JSON object), or a string that is ours.
_First: TypeAlias = str | dict[str, Any] | None

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 120
_repr.maxlevel = 3


def brief(value: Any) -> str:
    """A short, bounded repr of something that came from the wire, for log lines."""
    try:
        return _repr.repr(value)
    except Exception:  # a repr that fails: logging must not
        return f"<{type(value).__name__}>"


class RequestError(Exception):
    """Raise from a handler to answer with a JSON-RPC error; also what a failed call raises."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def from_dict(cls, error: Any) -> RequestError:
        if not isinstance(error, dict):
            return cls(INTERNAL_ERROR, "malformed error response", error)
        fields = cast("dict[str, Any]", error)  # a JSON object: string keys
        code = fields.get("code")
        message = fields.get("message")
        return cls(
            code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
            message if isinstance(message, str) else "error",
            fields.get("data"),
        )

    # The factories take the official SDK's arguments too: `data` (positional or `data=`)
    # becomes the error's `data`, with the SDK's codes and messages. A string where the SDK
    # takes `data` keeps its meaning here (a detail, a message), as before.
    @classmethod
    def parse_error(cls, detail: _First = None, *, data: Any = None) -> RequestError:
        """-32700 "Parse error"; a `detail` string becomes `data.details`."""
        return cls(PARSE_ERROR, "Parse error", _data(detail, data))

    @classmethod
    def invalid_request(cls, detail: _First = None, *, data: Any = None) -> RequestError:
        """-32600 "Invalid request"; a `detail` string becomes `data.details`."""
        return cls(INVALID_REQUEST, "Invalid request", _data(detail, data))

    @classmethod
    def method_not_found(cls, method: str) -> RequestError:
        """-32601 "Method not found", naming the method in `data.method`."""
        return cls(METHOD_NOT_FOUND, "Method not found", {"method": method})

    @classmethod
    def invalid_params(
        cls, message: _First = None, path: str = "", *, data: Any = None
    ) -> RequestError:
        """-32602 "Invalid params"; a `message` string (and the JSON `path` it is about) become
        `data.message` and `data.path`, as the dispatcher reports a decode error."""
        if isinstance(message, str):
            _only(data, "a message")
            return cls(INVALID_PARAMS, "Invalid params", {"path": path, "message": message})
        return cls(INVALID_PARAMS, "Invalid params", _data(message, data))

    @classmethod
    def internal_error(cls, data: Any = None) -> RequestError:
        """-32603 "Internal error"."""
        return cls(INTERNAL_ERROR, "Internal error", data)

    @classmethod
    def cancelled(cls, data: Any = None) -> RequestError:
        """-32800 "Request cancelled" (`$/cancel_request`)."""
        return cls(REQUEST_CANCELLED, "Request cancelled", data)

    @classmethod
    def auth_required(cls, message: _First = None, *, data: Any = None) -> RequestError:
        """-32000 "Authentication required" (or the `message` string given)."""
        if isinstance(message, str):
            return cls(AUTH_REQUIRED, message, data)
        return cls(AUTH_REQUIRED, "Authentication required", _data(message, data))

    @classmethod
    def resource_not_found(cls, uri: str | None = None) -> RequestError:
        """-32002 "Resource not found", naming the resource in `data.uri` when given."""
        return cls(RESOURCE_NOT_FOUND, "Resource not found", None if uri is None else {"uri": uri})


def _only(data: Any, given: str) -> None:
    if data is not None:
        raise TypeError(f"pass either {given} or data=, not both")


def _data(positional: _First, data: Any) -> Any:
    """A factory's first argument (the SDK's `data`; a string: a detail), or `data=`."""
    if positional is None:
        return data
    _only(data, "the first argument")
    return {"details": positional} if isinstance(positional, str) else positional


def _params_path(exc: types.DecodeError) -> str:
    return f"params.{exc.path}" if exc.path else "params"


_TOO_DEEP: Final = "nested too deeply"


class Dispatcher:
    """Calls `handler.<spec.handler>(params)` for the methods in `handles`.

    Extension methods (names starting with `_`) go to `handler.ext_method` /
    `handler.ext_notification` with the raw params. A method name from the wire is only
    ever a key into METHODS: handler attributes come from the table, never from the wire.
    """

    def __init__(
        self, handler: Any, handles: frozenset[str], ctx: types.DecodeContext | None = None
    ) -> None:
        self.handler = handler
        self.handles = handles
        self.ctx = ctx
        # Each notification method's route, found on its first arrival (METHODS is fixed).
        self._routes: dict[str, tuple[Callable[..., Any], str] | None] = {}

    def _spec(self, method: str) -> MethodSpec | None:
        spec = METHODS.get(method)
        if spec is None or method not in self.handles or spec.runtime:
            return None
        return spec

    def _decode(self, spec: MethodSpec, params: Any) -> Any:
        # JSON-RPC lets a caller omit params; an ACP params object with only optional
        # fields then decodes from {}.
        try:
            return spec.decode_params({} if params is None else params, self.ctx)
        except types.DecodeError as exc:
            raise RequestError.invalid_params(exc.message, _params_path(exc)) from None
        except RecursionError:
            raise RequestError.invalid_params(_TOO_DEEP, "params") from None

    async def request(self, method: str, params: Any) -> Any:
        """Answer a request: the encoded result, or raise RequestError."""
        spec = self._spec(method)
        if spec is None or spec.kind != "request":
            if method.startswith("_"):
                return await self.handler.ext_method(method, params)
            raise RequestError.method_not_found(method)
        decoded = self._decode(spec, params)
        result = await getattr(self.handler, spec.handler)(decoded)
        if result is None:
            return {} if spec.result_is_object else None
        return result if spec.encode_result is None else spec.encode_result(result)

    async def notification(self, method: str, params: Any) -> None:
        """Handle a notification; unknown ones are ignored, as JSON-RPC asks."""
        call = self.notification_call(method, params)
        if call is not None:
            await call

    def notification_call(self, method: str, params: Any) -> Awaitable[None] | None:
        """The handler's call for a notification (to await), its params decoded; None if it
        is dropped (invalid params: logged) or ignored (unknown). A plain function: the
        connection's worker awaits the handler itself, one coroutine less per notification."""
        route = self._routes.get(method, _UNROUTED)
        if route is _UNROUTED:
            route = self._routes[method] = self._route(method)
        if route is None:
            if method.startswith("_"):
                ext: Awaitable[None] = self.handler.ext_notification(method, params)
                return ext
            _log.debug("ignoring unknown notification %s", brief(method))
            return None
        decode, handler = route
        try:
            decoded = decode({} if params is None else params, self.ctx)
        except types.DecodeError as exc:
            _log.warning(
                "dropping notification %r with invalid params at %s: %s",
                method,
                _params_path(exc),
                brief(exc.message),
            )
            return None
        except RecursionError:
            _log.warning("dropping notification %r: params %s", method, _TOO_DEEP)
            return None
        call: Awaitable[None] = getattr(self.handler, handler)(decoded)  # typed: no cast() call
        return call

    def _route(self, method: str) -> tuple[Callable[..., Any], str] | None:
        """A notification's decoder and handler name; None if this side does not handle it."""
        spec = self._spec(method)
        if spec is None:
            return None
        if spec.kind == "notification":
            decode, handler = spec.decode_params, spec.handler
        elif spec.decode_notification_params is not None and spec.notification_handler:
            decode, handler = spec.decode_notification_params, spec.notification_handler
        else:
            return None
        return decode, handler


_UNROUTED: Final[Any] = object()
