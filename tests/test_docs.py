"""The README is a door and docs/ the manual: the README stays short, every relative link in it
and in docs/ resolves (the file, and the heading it points at), and every python snippet of
docs/ runs.

The snippets of a page run in order in one namespace, as a reader pastes them, after the
README's complete agent and client examples (the pages build on `MyAgent` and `MyClient`). They
import the golden packages by name (`myagent.acp` -> `agent`, `myclient.acp` -> `client`) in
this process, with `__name__` not `"__main__"`, so an example's `if __name__ == "__main__":`
block (which would serve stdio or spawn an agent) stays out. Pages whose snippets have a runner
of their own, which also compares their printed output, are named in OWN_RUNNER.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest
from doc_snippets import as_golden, python_blocks
from test_keyword_calls import readme_examples

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README_MAX_LINES = 300
# page -> the test module that runs its snippets
OWN_RUNNER = {
    "contrib.md": "test_contrib_doc.py",
    "coming-from-the-sdk.md": "test_sdk_migration_doc.py",
}
PAGES = sorted(DOCS.glob("*.md"))
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))}


def test_the_readme_is_a_landing_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES
    assert "docs/index.md" in "\n".join(lines)


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert broken == [], f"{page.name}: broken links"


def test_every_page_is_in_the_index() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    listed = set(LINK.findall(index))
    assert sorted(p.name for p in PAGES if p.name != "index.md" and p.name not in listed) == []


def run_snippet(source: str, namespace: dict[str, Any], where: str) -> str:
    source = as_golden(source)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, where, "exec"), namespace)
    return printed.getvalue()


def readme_namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "docs"}
    for role, source in readme_examples().items():
        run_snippet(source, namespace, f"README.md ({role} example)")
    return namespace


@pytest.mark.parametrize("page", [p for p in PAGES if p.name not in OWN_RUNNER], ids=lambda p: p.name)
def test_the_snippets_of_a_page_run(page: Path) -> None:
    namespace = readme_namespace()
    for i, source in enumerate(python_blocks(page.read_text(encoding="utf-8"))):
        run_snippet(source, namespace, f"{page.name} snippet {i + 1}")


def test_pages_with_their_own_runner_have_one() -> None:
    for page, runner in OWN_RUNNER.items():
        assert python_blocks((DOCS / page).read_text(encoding="utf-8")), page
        assert page in (ROOT / "tests" / runner).read_text(encoding="utf-8"), runner
