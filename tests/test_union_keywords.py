"""Small ergonomics (issue 29 §6): union params taken as keywords where one field picks the
variant, and `or_none` for optional fields.

`session/set_config_option` takes a union of a boolean variant and a value-id variant that
`value` tells apart: the proxy's keyword form builds the one the value's type picks (the SDK's
`set_config_option(config_id, session_id, value)` does the same), so the caller never names
`SetSessionConfigOptionRequestBoolean`. The proxy is driven with a recording connection: what
matters is the params it encodes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from client import AgentProxy, or_none, types


class Recorder:
    """A connection that records each request and answers `{}`."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    async def request(self, method: str, params: Any, *, timeout: float | None = None) -> Any:
        self.sent.append((method, params))
        return {"configOptions": []}


def _call(**kwargs: Any) -> Any:
    recorder = Recorder()
    proxy = AgentProxy(recorder)  # type: ignore[arg-type]  # only request() is used
    asyncio.run(proxy.session_set_config_option(**kwargs))
    [(method, params)] = recorder.sent
    assert method == "session/set_config_option"
    return params


def test_a_bool_value_picks_the_boolean_variant() -> None:
    params = _call(session_id="s1", config_id="fast", value=True)
    assert params == {"type": "boolean", "sessionId": "s1", "configId": "fast", "value": True}


def test_a_string_value_picks_the_value_id_variant() -> None:
    params = _call(session_id="s1", config_id="model", value="gpt", meta={"k": 1})
    assert params == {"sessionId": "s1", "configId": "model", "value": "gpt", "_meta": {"k": 1}}


def test_the_object_form_still_works_and_not_both() -> None:
    request = types.SetSessionConfigOptionRequestValueId(session_id="s", config_id="c", value="v")
    recorder = Recorder()
    proxy = AgentProxy(recorder)  # type: ignore[arg-type]
    asyncio.run(proxy.session_set_config_option(request))
    assert recorder.sent[0][1] == request.to_dict()
    with pytest.raises(TypeError, match="or its fields as keywords, not both"):
        asyncio.run(proxy.session_set_config_option(request, session_id="s"))  # type: ignore[call-overload]


def test_a_value_of_another_type_is_refused_before_sending() -> None:
    with pytest.raises(TypeError, match=r"value= takes a bool or str, not int"):
        _call(session_id="s1", config_id="c", value=3)


def test_or_none_reads_absent_as_none() -> None:
    update = types.SessionInfoUpdate.from_dict({"sessionUpdate": "session_info_update"})
    assert update.title is types.UNSET and or_none(update.title) is None
    cleared = types.SessionInfoUpdate.from_dict(
        {"sessionUpdate": "session_info_update", "title": None}
    )
    assert or_none(cleared.title) is None and cleared.title is None  # null is kept apart
    named = types.SessionInfoUpdate.from_dict(
        {"sessionUpdate": "session_info_update", "title": ""}
    )
    assert or_none(named.title) == ""  # a falsy value is still a value (unlike `x or None`)
