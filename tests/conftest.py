from __future__ import annotations

import compileall
import gc
import json
import os
import shutil
import sys
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest
from budget import FULL, PROFILE, examples
from filelock import FileLock
from hypothesis import settings
from typecheck import PyrightRun, pyright_strict

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "generated"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# The test processes import dozens of generated packages (thousands of classes each): with the
# default thresholds the cyclic GC rescans that heap every few hundred allocations (a quarter of
# test_releases' CPU). Fewer young collections; tests that need a collection call gc.collect().
gc.set_threshold(20_000, 20, 20)

# ACP_TEST_NO_ORJSON=1: run the tests as on a machine without orjson (`import orjson` fails),
# e.g. the fuzz and wire corpora both ways (docs/benchmarks.md, issue 31).
if os.environ.get("ACP_TEST_NO_ORJSON"):
    sys.modules["orjson"] = None  # type: ignore[assignment]

# Tests import the generated packages by name: generated/agent -> `agent`, generated/client -> `client`.
sys.path.insert(0, str(GENERATED))

# The hypothesis profiles (tests/budget.py): `ci` by default, `slow` for the full budgets.
settings.register_profile("ci", max_examples=examples(100), derandomize=True, deadline=None)
settings.register_profile("slow", max_examples=examples(100), deadline=None)
settings.load_profile(PROFILE)


# The repository's own Python (the goldens, the examples, the generator, the tests' agents), compiled
# to bytecode once before any test process starts: the suite starts hundreds of agent processes
# and CLI runs, and under PYTHONDONTWRITEBYTECODE (set on CI machines) each one compiled every
# module it imports from source again (generated/agent/types.py alone: 0.4 CPU-s a start).
# py_compile writes regardless of that variable; the timestamps keep an edited file recompiled.
COMPILED = [GENERATED, ROOT / "examples", ROOT / "codegen", ROOT / "tests"]


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, before the xdist workers start
        for folder in COMPILED:
            compileall.compile_dir(folder, quiet=2, workers=1)


# The order the test files go to the xdist workers (`--no-loadscope-reorder` in addopts; by
# default pytest-xdist sends the files with the most tests first): the longest first, so that no
# long file starts last and runs on alone while the other workers sit idle. CPU-seconds measured
# on this suite (a file not listed costs a few); a stale figure only schedules worse. The
# suite's pyright run (`pyright_run`: about 70 s) starts first, in test_keyword_calls; the other
# files that read it (test_decoder_shapes, test_static) go last, when it is done.
FIRST = [
    "test_keyword_calls.py", "test_conformance.py", "test_releases.py", "test_schema_shapes.py",
    "test_format.py", "test_properties.py", "test_conformance_cli.py", "test_sdk_migration_doc.py",
    "test_determinism.py", "test_write.py", "test_lifecycle_agent.py", "test_fuzz_runtime.py",
]  # fmt: skip
LAST = ["test_decoder_shapes.py", "test_static.py"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        if name in FIRST:
            return FIRST.index(name)
        return len(FIRST) + 1 + LAST.index(name) if name in LAST else len(FIRST)

    items.sort(key=rank)  # stable: within a file, and among the files in between, as collected


@pytest.hookimpl(wrapper=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> Generator[None, int, int]:
    """`-n auto` (addopts): a worker more than pytest-xdist counts cores (unless
    PYTEST_XDIST_AUTO_NUM_WORKERS says how many). The tests wait on the agents and clients they
    start (start-ups, settle windows, exits), and the extra worker keeps the cores busy
    meanwhile, also on a loaded machine."""
    cores = yield
    return cores if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") else cores + 1


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def golden_generation() -> dict[Path, dict[str, str]]:
    """Every [tool.acp-codegen] target of this repository's pyproject.toml, freshly generated in
    memory as `acp-codegen generate` does it (each schema built once, one formatter run), once
    per test process: target `out` -> relative path -> text. Tests using it must not mutate it.
    """
    from codegen.config import load_targets
    from codegen.generate import generate_all

    targets = load_targets(ROOT / "pyproject.toml")
    return {target.out: files for target, files in zip(targets, generate_all(targets), strict=True)}


def agent_command_line(script: object, *modules: str) -> list[str]:
    """`python script`, as a user starts it. (`modules`: accepted for the tests that still name what
    the script imports; they change nothing.)"""
    return [sys.executable, str(script)]


def cli_command_line(script: str = "acp_codegen.py") -> list[str]:
    """The CLI as a user runs it (`python -m codegen`, what the `acp-codegen` script runs), or
    `python tests/fixtures/cli/SCRIPT` for a fixture script that changes the CLI first."""
    if script == "acp_codegen.py":
        return [sys.executable, "-m", "codegen"]
    return [sys.executable, str(FIXTURES / "cli" / script)]


@pytest.fixture(scope="session")
def agent_command() -> Callable[..., list[str]]:
    """`agent_command(script, *modules)`: the command that runs `python script` (see `agent_command_line`)."""
    return agent_command_line


@pytest.fixture(scope="session")
def cli_command() -> Callable[..., list[str]]:
    """`cli_command(script="acp_codegen.py")`: the command that runs the CLI (see `cli_command_line`)."""
    return cli_command_line


def computed_once(tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[Path], Any]) -> Any:
    """`compute(folder)` once per test run, however many test processes (pytest-xdist workers) ask:
    the first computes into `folder` (shared by all of them) and leaves its JSON-able result there,
    the others wait for it and read it (pytest-xdist's recipe for a session fixture run once)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder; each worker's base temp is inside it
    folder, done = base / f"once-{name}", base / f"once-{name}.json"
    with FileLock(str(base / f"once-{name}.lock")):
        if done.is_file():
            return json.loads(done.read_text(encoding="utf-8"))
        shutil.rmtree(folder, ignore_errors=True)  # what a worker whose compute failed left
        folder.mkdir()
        result = compute(folder)
        done.write_text(json.dumps(result), encoding="utf-8")
        return result


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for every mypy run of this test process (each xdist worker has its own
    base temp, so no two processes write one cache): the standard library, and generated/ as
    imported by several tests, are analysed once per process instead of once per run."""
    return tmp_path_factory.getbasetemp() / "mypy-cache"


@pytest.fixture(scope="session")
def keyword_snippet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/test_keyword_calls.py's SNIPPET as snippet.py, alone in its folder (which mypy and
    the pyrights take as the root from which it imports generated/client); one per test run."""
    from test_keyword_calls import SNIPPET

    def write(folder: Path) -> str:
        (folder / "snippet.py").write_text(SNIPPET)
        return str(folder / "snippet.py")

    return Path(computed_once(tmp_path_factory, "keyword-snippet", write))


@pytest.fixture(scope="session")
def serve_snippet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/test_remote_typing.py's SERVE as serve.py, alone in its folder (imports generated/agent,
    uvicorn and hypercorn); one per test run."""
    from test_remote_typing import SERVE

    def write(folder: Path) -> str:
        (folder / "serve.py").write_text(SERVE)
        return str(folder / "serve.py")

    return Path(computed_once(tmp_path_factory, "serve-snippet", write))


@pytest.fixture(scope="session")
def decoder_shapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding a package per schema of tests/test_decoder_shapes.py, generated once per
    test run for its tests and for `pyright_run`."""
    from test_decoder_shapes import write_shapes

    return Path(computed_once(tmp_path_factory, "decoder-shapes", lambda folder: str(write_shapes(folder))))


@pytest.fixture(scope="session")
def pyright_left_out(decoder_shapes: Path) -> list[Path]:
    """The folders that `pyright_run` does not check: under the ci profile the conformance kit
    (`testing/`) of every package but the default target's agent and client, generated/agent
    and generated/client (the kit reaches the schema only through names every package has, so
    those two check it; tests/budget.py); none under the slow profile."""
    if FULL:
        return []
    kits = sorted(p.parent / "testing" for root in (GENERATED, decoder_shapes) for p in root.rglob("py.typed"))
    return [kit for kit in kits if kit.parent.parent != GENERATED]


@pytest.fixture(scope="session")
def pyright_run(
    tmp_path_factory: pytest.TempPathFactory,
    keyword_snippet: Path,
    serve_snippet: Path,
    decoder_shapes: Path,
    pyright_left_out: list[Path],
) -> PyrightRun:
    """The suite's pyright run (strict: Microsoft's pyright, and basedpyright beside it when
    ACP_PYRIGHTS asks, see tests/typecheck.py), once per test run: every golden package
    (generated/), the decoder shapes' packages and the keyword and serve snippets, which import
    generated/ packages by name. One run instead of three spares the start-ups and analysing
    generated/client again. Each test reads only its own files (`problems`, `part`)."""

    def run(work: Path) -> dict[str, Any]:
        goldens = sorted(p.parent for p in GENERATED.rglob("py.typed"))
        shapes = sorted(p.parent for p in decoder_shapes.glob("*/__init__.py"))
        return pyright_strict(
            [*goldens, *shapes],
            work,
            files=[keyword_snippet, serve_snippet],
            extra_paths=[GENERATED],
            left_out=pyright_left_out,
        ).to_json()

    return PyrightRun.from_json(computed_once(tmp_path_factory, "pyright", run))


@pytest.fixture(scope="session")
def golden_pyright(pyright_run: PyrightRun) -> PyrightRun:
    """`pyright_run` seen through the golden packages (generated/) only."""
    return pyright_run.part([GENERATED])
