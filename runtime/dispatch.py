"""Routes one decoded JSON-RPC call to a handler: decode params -> call -> encode result.

The METHODS table drives it; nothing here is written per method. Errors become JSON-RPC
errors: unknown method -32601, invalid params -32602 (with the JSON path in `data`).
"""

from __future__ import annotations

import logging
import reprlib
from typing import Any, Final, cast

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

    @classmethod
    def parse_error(cls, detail: str) -> RequestError:
        return cls(PARSE_ERROR, "Parse error", {"details": detail})

    @classmethod
    def invalid_request(cls, detail: str) -> RequestError:
        return cls(INVALID_REQUEST, "Invalid request", {"details": detail})

    @classmethod
    def method_not_found(cls, method: str) -> RequestError:
        return cls(METHOD_NOT_FOUND, "Method not found", {"method": method})

    @classmethod
    def invalid_params(cls, message: str, path: str = "") -> RequestError:
        return cls(INVALID_PARAMS, "Invalid params", {"path": path, "message": message})

    @classmethod
    def internal_error(cls) -> RequestError:
        return cls(INTERNAL_ERROR, "Internal error")

    @classmethod
    def cancelled(cls) -> RequestError:
        return cls(REQUEST_CANCELLED, "Request cancelled")

    @classmethod
    def auth_required(cls, message: str = "Authentication required") -> RequestError:
        return cls(AUTH_REQUIRED, message)

    @classmethod
    def resource_not_found(cls, uri: str | None = None) -> RequestError:
        return cls(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri} if uri else None)


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
        spec = self._spec(method)
        if spec is not None and spec.kind == "notification":
            decode, handler = spec.decode_params, spec.handler
        elif (
            spec is not None
            and spec.decode_notification_params is not None
            and spec.notification_handler
        ):
            decode, handler = spec.decode_notification_params, spec.notification_handler
        else:
            if method.startswith("_"):
                await self.handler.ext_notification(method, params)
            else:
                _log.debug("ignoring unknown notification %s", brief(method))
            return
        try:
            decoded = decode({} if params is None else params, self.ctx)
        except types.DecodeError as exc:
            _log.warning(
                "dropping notification %r with invalid params at %s: %s",
                method,
                _params_path(exc),
                brief(exc.message),
            )
            return
        except RecursionError:
            _log.warning("dropping notification %r: params %s", method, _TOO_DEEP)
            return
        await getattr(self.handler, handler)(decoded)
