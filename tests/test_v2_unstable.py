"""Protocol v2 and the unstable v1 surface: generated, importable, wire-faithful."""

from __future__ import annotations

from typing import Any

import pytest
from golden_import import load_golden

V2_AGENT = load_golden("v2/agent")
V2_CLIENT = load_golden("v2/client")
UNSTABLE_AGENT = load_golden("unstable/agent")
UNSTABLE_CLIENT = load_golden("unstable/client")


def test_v2_protocol_version_and_release() -> None:
    assert V2_AGENT.PROTOCOL_VERSION == 2
    assert V2_AGENT.SCHEMA_RELEASE == "2.0.0-alpha.3"
    assert V2_AGENT.METHODS.keys() == V2_CLIENT.METHODS.keys()


@pytest.mark.parametrize(
    ("type_name", "value"),
    [
        ("ToolKind", "teleport"),  # an open enum: an unknown value is kept as it is
        ("ContentBlock", {"type": "hologram", "frames": [1, 2]}),  # an open union: the raw object is kept
        ("ContentBlock", {"type": "text", "text": "known", "future": True}),
    ],
)
def test_v2_open_enums_and_unions_round_trip_unknown_values(type_name: str, value: Any) -> None:
    types = V2_AGENT.types
    decoded = getattr(types, f"decode_{type_name}")(value)
    assert getattr(types, f"encode_{type_name}")(decoded) == value


def test_v2_unknown_union_variant_is_not_a_known_class() -> None:
    types = V2_AGENT.types
    decoded = types.decode_ContentBlock({"type": "hologram"})
    assert type(decoded).__name__ == "UnknownContentBlock"
    assert decoded.tag == "hologram"


def test_unstable_methods_are_marked() -> None:
    import agent

    extra = set(UNSTABLE_AGENT.METHODS) - set(agent.METHODS)
    assert extra, "the unstable schema adds methods"
    assert all(UNSTABLE_AGENT.METHODS[m].unstable for m in extra)
    assert not any(UNSTABLE_AGENT.METHODS[m].unstable for m in agent.METHODS)
    assert "unstable" in (UNSTABLE_AGENT.agent.Agent.nes_start.__doc__ or "")
    assert "UNSTABLE" in (UNSTABLE_AGENT.types.StartNesRequest.__doc__ or "")


def test_mcp_message_is_both_a_request_and_a_notification_on_both_sides() -> None:
    spec = UNSTABLE_AGENT.METHODS["mcp/message"]
    assert spec.handled_by == "both"
    assert spec.kind == "request"
    assert (spec.params_type, spec.result_type) == ("MessageMcpRequest", "MessageMcpResponse")
    assert spec.notification_params_type == "MessageMcpNotification"
    for module, base, proxy in (
        (UNSTABLE_AGENT, "Agent", "ClientProxy"),
        (UNSTABLE_CLIENT, "Client", "AgentProxy"),
    ):
        role = module.agent if base == "Agent" else module.client
        for cls in (getattr(role, base), getattr(role, proxy)):
            assert hasattr(cls, "mcp_message") and hasattr(cls, "mcp_message_notification"), cls
