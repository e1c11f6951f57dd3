"""The runtime modules copied into every package are clean under basedpyright strict (mypy
--strict covers them with the whole package in tests/test_releases.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typecheck import PyrightRun

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = [
    "connection.py",
    "jsonline.py",
    "process.py",
    "proctable.py",
    "streams.py",
    "wiretap.py",
    "testing/__init__.py",
    "testing/client_checks.py",
    "testing/client_conformance.py",
    "testing/client_verdicts.py",
    "testing/conformance.py",
    "testing/conformance_checks.py",
    "testing/conformance_harness.py",
    "testing/conformance_messages.py",
    "testing/conformance_output.py",
    "testing/conformance_probes.py",
    "testing/conformance_probes_session.py",
    "testing/conformance_probes_turn.py",
    "testing/conformance_probes_wire.py",
    "testing/conformance_report.py",
    "testing/conformance_rules.py",
    "testing/conformance_rules_session.py",
    "testing/conformance_traffic.py",
    "testing/memstream.py",
    "testing/probe.py",
    "testing/probe_relay.py",
    "testing/probe_scenario.py",
    "testing/runners.py",
    "testing/scripted.py",
]
CLIENT_RUNTIME = [  # the client role's only: reaching a remote agent
    "testing/conformance_remote.py",
    "remote_client.py",
    "remote_http.py",
    "remote_messages.py",
    "remote_sse.py",
    "remote_ws.py",
]


@pytest.mark.xdist_group("pyright")
def test_basedpyright_strict_on_the_runtime(golden_pyright: PyrightRun) -> None:
    """The suite's one basedpyright run over generated/ covers the runtime copy of every package:
    no error and no warning in any."""
    packages = sorted(p.parent for p in (ROOT / "generated").rglob("py.typed"))
    copies = [package / name for package in packages for name in RUNTIME]
    copies += [package / name for package in packages if package.name == "client" for name in CLIENT_RUNTIME]
    assert len(packages) >= 6 and all(path.is_file() for path in copies)
    problems = [line for path in copies for line in golden_pyright.problems(path, ("error", "warning"))]
    assert not problems, "\n".join(problems)
