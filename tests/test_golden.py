"""The golden record: generated/ must equal a fresh run of every [tool.acp-codegen] target."""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from pathlib import Path

import pytest

from codegen.config import load_targets
from codegen.generate import Target, generate_files
from codegen.templates import CustomTemplates
from codegen.write import MANIFEST, read_manifest

ROOT = Path(__file__).resolve().parent.parent
TARGETS = load_targets(ROOT / "pyproject.toml")


def tree_diff(target: Target, files: dict[str, str]) -> str:
    """A readable diff between the checked-in tree and `files` ('' when equal)."""
    out: list[str] = []
    on_disk = {
        p.relative_to(target.out).as_posix()
        for p in target.out.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    on_disk.discard(MANIFEST)
    for rel in sorted(on_disk | set(files)):
        if rel not in files:
            out.append(f"only in {target.out}: {rel}")
            continue
        if rel not in on_disk:
            out.append(f"missing from {target.out}: {rel}")
            continue
        current = (target.out / rel).read_text(encoding="utf-8")
        if current != files[rel]:
            diff = difflib.unified_diff(
                current.splitlines(), files[rel].splitlines(), f"golden/{rel}", f"fresh/{rel}", lineterm="", n=1
            )
            out.extend(list(diff)[:60])
    return "\n".join(out)


@pytest.mark.parametrize("target", TARGETS, ids=[t.out.relative_to(ROOT).as_posix() for t in TARGETS])
def test_golden_tree_matches_fresh_generation(target: Target, golden_generation: dict[Path, dict[str, str]]) -> None:
    files = golden_generation[target.out]  # what `acp-codegen generate` produces for this target now
    diff = tree_diff(target, files)
    assert not diff, "generated/ is stale: run `acp-codegen generate` and commit the result\n" + diff
    assert sorted(read_manifest(target.out)) == sorted(files)


def test_changing_a_template_without_regenerating_fails(tmp_path: Path) -> None:
    """The golden test must notice a template edit that was not followed by regeneration."""
    templates = tmp_path / "templates"
    source = ROOT / "templates"
    templates.mkdir()
    for path in source.iterdir():
        (templates / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    methods = templates / "methods.py.jinja"
    methods.write_text(methods.read_text(encoding="utf-8").replace("the table dispatch", "the table routing"))
    target = replace(TARGETS[0], templates=CustomTemplates(templates, "templates"))
    assert "the table routing" in tree_diff(target, generate_files(target))


def test_package_page_names_every_module_of_a_package() -> None:
    """docs/package.md's table of a package's files names each module a golden package has at
    its top level (and the `testing/` folder), so a newcomer can look up any file they vendored."""
    page = (ROOT / "docs" / "package.md").read_text(encoding="utf-8")
    table = page[page.index("| file | contents |") :]
    named = set(re.findall(r"`([\w/]+(?:\.py)?)`", table))
    modules = {
        p.name + ("/" if p.is_dir() else "")
        for target in TARGETS
        for p in target.out.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and p.name != "__pycache__")
    }
    assert sorted(modules - named) == []
