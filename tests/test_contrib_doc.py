"""Every snippet of docs/contrib.md runs, in order, and prints the output the page shows.

The python blocks share one namespace (later ones use what earlier ones defined), as a reader
would paste them; an `<!-- output -->` marker before a text block is the exact stdout of the
python block before it. They import the golden packages (`agent`, `client`) by name and run in
this process: no subprocess, no server.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

from doc_snippets import as_golden, python_blocks

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "contrib.md"
BLOCK = re.compile(r"```python\n(.*?)```\n(?:\n<!-- output -->\n```text\n(.*?)```\n)?", re.S)


def contrib_snippets() -> list[str]:
    """The snippets of the agent and client pages that use `contrib`."""
    blocks = []
    for page in ("agents.md", "clients.md"):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        blocks += [b for b in python_blocks(text) if ".acp.contrib import" in b]
    return blocks


def test_the_snippets_run_and_print_what_the_page_shows() -> None:
    text = PAGE.read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    assert len(blocks) == text.count("```python") >= 4
    assert text.count("<!-- output -->") == sum(1 for _, out in blocks if out)
    namespace: dict[str, Any] = {"__name__": "contrib_doc"}
    for i, (source, expected) in enumerate(blocks):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(source, f"{PAGE.name} snippet {i + 1}", "exec"), namespace)
        assert printed.getvalue() == expected, f"snippet {i + 1} of {PAGE}"


def test_the_contrib_snippets_of_the_agent_and_client_pages_run() -> None:
    """docs/agents.md's and docs/clients.md's contrib snippets run; a `# prints X` comment is the output."""
    blocks = contrib_snippets()
    assert len(blocks) == 2
    for source in blocks:
        source = as_golden(source)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(source, "docs", "exec"), {"__name__": "docs"})
        assert printed.getvalue() == "".join(f"{line}\n" for line in re.findall(r"# prints (.*)", source))
