"""`RequestError`'s factories take the official SDK's arguments (`acp.exceptions.RequestError`,
0.12.1) and give its code, message and data; the string forms that are ours keep their meaning."""

from __future__ import annotations

from typing import Any

import acp
import pytest
from agent import RequestError

DATA = {"details": "x", "n": [1]}
# factory -> the SDK-style calls: (args, kwargs)
SDK_CALLS: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "parse_error": [((), {}), ((DATA,), {}), ((), {"data": DATA})],
    "invalid_request": [((), {}), ((DATA,), {}), ((), {"data": DATA})],
    "method_not_found": [(("x/y",), {}), ((), {"method": "_ext"})],
    "invalid_params": [((), {}), ((DATA,), {}), ((), {"data": {"errors": []}})],
    "internal_error": [((), {}), ((DATA,), {}), ((), {"data": DATA})],
    "auth_required": [((), {}), (({"k": 1},), {}), ((), {"data": {"k": 1}})],
    "resource_not_found": [((), {}), (("file:///a",), {}), ((), {"uri": ""}), ((None,), {})],
}


@pytest.mark.parametrize("name", SDK_CALLS)
def test_factories_match_the_sdk(name: str) -> None:
    for args, kwargs in SDK_CALLS[name]:
        theirs = getattr(acp.RequestError, name)(*args, **kwargs)
        ours = getattr(RequestError, name)(*args, **kwargs)
        assert (ours.code, ours.message, ours.data) == (theirs.code, str(theirs), theirs.data), (name, args, kwargs)
        expected = {"code": theirs.code, "message": str(theirs)} | (
            {} if theirs.data is None else {"data": theirs.data}
        )
        assert ours.to_dict() == expected


def test_every_sdk_factory_is_covered() -> None:
    sdk = {n for n, v in vars(acp.RequestError).items() if isinstance(v, classmethod)}
    assert sdk == set(SDK_CALLS)


def test_our_string_forms_are_kept() -> None:
    assert RequestError.invalid_params("must not be empty", "params.prompt").data == {
        "path": "params.prompt",
        "message": "must not be empty",
    }
    assert RequestError.parse_error("bad json").data == {"details": "bad json"}
    assert RequestError.invalid_request("no method").data == {"details": "no method"}
    login = RequestError.auth_required("log in first", data={"url": "https://x"})
    assert (login.code, login.message, login.data) == (-32000, "log in first", {"url": "https://x"})
    assert RequestError.cancelled().to_dict() == {"code": -32800, "message": "Request cancelled"}
    with pytest.raises(TypeError):
        RequestError.internal_error({"a": 1}, data={"b": 2})  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        RequestError.parse_error({"a": 1}, data={"b": 2})
