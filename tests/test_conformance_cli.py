"""`acp-codegen check-agent` (the conformance kit behind a command): the echo agent passes every
check, with JUnit XML; -k; --json with transcripts; exit 2 for what cannot be checked."""

from __future__ import annotations

import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from agent.testing import CHECKS  # generated/agent, on sys.path via conftest
from test_conformance import AGENTS, ALL_IDS, ECHO_AGENT, IN_MEMORY, NOT_ADVERTISED, ROOT, Command, no_runs_meanwhile
from test_keyword_calls import readme_examples
from typer.testing import CliRunner

from codegen.cli import app

# The same worker as test_conformance: CliRunner swaps sys.stdout and os.environ for the whole
# process, so these wait for its background runs (no_runs_meanwhile).


@pytest.fixture(scope="session")
def cli_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("acp-codegen-cache")


def _cli(cache: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["check-agent", *args], env={"ACP_CODEGEN_CACHE": str(cache)})


@pytest.mark.slow
def test_cli_echo_agent_passes_every_check(cli_cache: Path, agent_command: Command, tmp_path: Path) -> None:
    no_runs_meanwhile()
    junit = tmp_path / "report.xml"
    agent = agent_command(ECHO_AGENT, "echo_agent")
    result = _cli(cli_cache, "--timeout", "20", "--cancel-prompt", "slow", "--junit-xml", str(junit), "--", *agent)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert (
        lines[-1]
        == f"{len(CHECKS) - len(NOT_ADVERTISED) - len(IN_MEMORY)} passed, 0 failed, {len(NOT_ADVERTISED)} skipped, "
        f"0 not testable, {len(IN_MEMORY)} not exercised"
    )
    assert (
        lines[-2].startswith("MUST 18/18 · capability 12/12 (4 not advertised) · SHOULD 10/10")
        and "conformant" in lines[-2]
    )
    assert sum(line.startswith(("PASSED", "SKIPPED", "NOT EXERCISED")) for line in lines) == len(CHECKS)
    cases = ET.parse(junit).getroot().findall("testsuite/testcase")
    assert sorted(case.get("name") or "" for case in cases) == sorted(ALL_IDS)
    assert [p.name for p in cli_cache.iterdir()] == [next(cli_cache.iterdir()).name]  # one cached package


@pytest.mark.slow
def test_the_readme_agent_example_is_conformant(cli_cache: Path, tmp_path: Path) -> None:
    """A newcomer copies the README's agent example, vendors the package as `myagent/acp` and
    runs check-agent on it, as the README says: no check fails."""
    (tmp_path / "my_agent.py").write_text(readme_examples()["agent"], encoding="utf-8")
    shutil.copytree(
        ROOT / "generated" / "agent", tmp_path / "myagent" / "acp", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tmp_path / "myagent" / "__init__.py").write_text("")
    result = _cli(cli_cache, "--timeout", "20", "--", sys.executable, str(tmp_path / "my_agent.py"))
    assert result.exit_code == 0, result.output
    summary = result.output.splitlines()
    assert ", 0 failed, " in summary[-1] and ", 0 not testable" in summary[-1], result.output
    assert "-- conformant" in summary[-2], result.output


@pytest.mark.slow
def test_cli_selects_checks_by_id(cli_cache: Path, agent_command: Command) -> None:
    no_runs_meanwhile()
    result = _cli(cli_cache, "-k", "initialize", "--timeout", "20", "--", *agent_command(ECHO_AGENT, "echo_agent"))
    assert result.exit_code == 0, result.output
    checked = [line.split()[2].rstrip(":") for line in result.output.splitlines() if line.startswith("PASSED")]
    assert checked == ["initialize", "initialize-version"]


@pytest.mark.slow
def test_cli_json_and_exit_code_for_a_broken_agent(cli_cache: Path, agent_command: Command) -> None:
    no_runs_meanwhile()
    agent = agent_command(AGENTS / "version_echo.py", "_base")
    result = _cli(cli_cache, "--json", "--timeout", "20", "-k", "version", "--", *agent)
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    [failure] = [r for r in data["results"] if r["status"] == "failed"]
    assert failure["id"] == "initialize-version" and data["ok"] is False and data["exit_code"] == 1
    assert any('"protocolVersion":65535' in line for line in failure["transcript"])  # its wire lines
    assert failure["stderr"] == [] and failure["duration"] > 0


def test_cli_agent_that_exits_before_initialize_exits_2_with_its_stderr(cli_cache: Path) -> None:
    no_runs_meanwhile()
    result = _cli(cli_cache, "--", sys.executable, str(ROOT / "no-such-agent.py"))
    assert result.exit_code == 2, result.output  # once exit 1, with "1 passed, 1 failed, 13 not testable"
    assert "exited before answering initialize" in result.output and "can't open file" in result.output


def test_cli_without_a_runnable_command_exits_2(tmp_path: Path) -> None:
    no_runs_meanwhile()
    assert _cli(tmp_path).exit_code == 2
    result = _cli(tmp_path, "--", str(tmp_path / "no-such-agent"))
    assert result.exit_code == 2 and "not found" in result.output
    assert _cli(tmp_path, "--env", "NOEQUALS", "--", sys.executable).exit_code == 2
    assert not list(tmp_path.iterdir())  # nothing generated for a command that cannot run
