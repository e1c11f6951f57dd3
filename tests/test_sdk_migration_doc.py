"""Every snippet of docs/coming-from-the-sdk.md runs, with the output the page shows.

A snippet is a fenced python block after `<!-- file: NAME.py -->`. All of them are written into
one directory next to the golden packages under the names the page imports (`myagent/acp` =
generated/agent, `myeditor/acp` = generated/client), then run as the page runs them: RUNS
below lists every command; agents are started by the clients. An `<!-- output: A.py B.py -->`
marker before a text block is the exact stdout of those snippets. A python block without a
file marker, a snippet no command runs, or a command for a snippet the page lacks fails the test.
To change a snippet, edit the page: this test reads it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "coming-from-the-sdk.md"
TEXT = PAGE.read_text(encoding="utf-8")

FILE = re.compile(r"<!-- file: (\S+) -->\n```python\n(.*?)```\n", re.S)
OUTPUT = re.compile(r"<!-- output: ([^>]+) -->\n```text\n(.*?)```\n", re.S)
SNIPPETS = dict(FILE.findall(TEXT))
OUTPUTS = {name: out for names, out in OUTPUT.findall(TEXT) for name in names.split()}

# Every command the page implies. The clients start an agent snippet (the one beside them by
# default, the other one when given); the wire examples are plain scripts.
RUNS: list[list[str]] = [
    ["sdk_client.py"],
    ["my_client.py"],
    ["sdk_client.py", "python", "my_agent.py"],
    ["my_client.py", "python", "sdk_agent.py"],
    ["sdk_content.py"],
    ["my_content.py"],
    ["my_errors.py"],
    ["sdk_wire.py"],
    ["my_wire.py"],
    ["my_ext_client.py"],
    ["sdk_ext_client.py"],
]
STARTED_BY_CLIENTS = {"sdk_agent.py", "my_agent.py", "sdk_ext_agent.py", "my_ext_agent.py"}


def test_every_snippet_is_run() -> None:
    assert TEXT.count("```python") == len(SNIPPETS), "a python block without `<!-- file: NAME.py -->`"
    run = {cmd[0] for cmd in RUNS} | STARTED_BY_CLIENTS
    assert run == set(SNIPPETS), f"snippets not run: {set(SNIPPETS) - run}; runs without snippet: {run - set(SNIPPETS)}"
    assert set(OUTPUTS) <= set(SNIPPETS)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sdk_doc")
    for package, golden in (("myagent", "agent"), ("myeditor", "client")):
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
        shutil.copytree(
            ROOT / "generated" / golden, root / package / "acp", ignore=shutil.ignore_patterns("__pycache__")
        )
    for name, code in SNIPPETS.items():
        (root / name).write_text(code, encoding="utf-8")
    return root


def snippet_env() -> dict[str, str]:
    env = dict(os.environ)
    # `python` in the snippets is this interpreter (it has the official SDK installed).
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def python() -> Path:
    """The `python` the snippets run with and start their agents with (first on their PATH): this
    interpreter, which has the official SDK installed."""
    return Path(sys.executable)


@pytest.mark.slow
@pytest.mark.parametrize("command", RUNS, ids=[" ".join(c) for c in RUNS])
def test_snippet_runs(workdir: Path, python: Path, command: list[str]) -> None:
    env = snippet_env()
    env["PATH"] = str(python.parent) + os.pathsep + env["PATH"]
    result = subprocess.run([str(python), *command], cwd=workdir, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    if command[0] in OUTPUTS:
        assert result.stdout == OUTPUTS[command[0]], result.stderr
    else:
        assert result.stdout == ""
