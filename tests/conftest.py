from __future__ import annotations

import contextlib
import gc
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zygote
from typecheck import PyrightRun, pyright_strict

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "generated"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Tests import the generated packages by name: generated/agent -> `agent`, generated/client -> `client`.
sys.path.insert(0, str(GENERATED))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def golden_generation() -> dict[Path, dict[str, str]]:
    """Every [tool.acp-codegen] target of this repository's pyproject.toml, freshly generated in
    memory as `acp-codegen generate` does it (each schema built once, one formatter run), once
    per test process: target `out` -> relative path -> text. Tests using it must not mutate it;
    mark them `@pytest.mark.xdist_group("golden")` so one worker generates for all of them.
    (That group also holds the other tests that build the bundled schemas or the shape schemas
    of tests/test_schema_shapes.py: the class model of a schema is computed once per process.)
    """
    from codegen.config import load_targets
    from codegen.generate import generate_all

    targets = load_targets(ROOT / "pyproject.toml")
    return {target.out: files for target, files in zip(targets, generate_all(targets), strict=True)}


@pytest.fixture(scope="module")
def agent_command(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., list[str]]]:
    """`agent_command(script, *modules)`: the command that runs `python script`, forked from a
    server that has imported `modules` as the script would (tests/zygote.py): still a fresh
    process on its own stdio each time, without Python's start-up and those imports."""
    servers = zygote.Servers(str(tmp_path_factory.mktemp("zygote")))
    yield servers.command
    servers.close()


@pytest.fixture(scope="session")
def cli_command(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], list[str]]]:
    """`cli_command(script)`: the command that runs `python tests/fixtures/cli/SCRIPT`, forked from a
    server that has imported the CLI (tests/zygote.py): a new process per run, without Python's
    start-up and the CLI's imports each time (~0.5 s of CPU, most of a run on a small schema)."""
    servers = zygote.Servers(str(tmp_path_factory.mktemp("zygote")))
    yield lambda script: servers.command(FIXTURES / "cli" / script, "acp_codegen")
    servers.close()


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for every mypy run of this test process (each xdist worker has its own
    base temp, so no two processes write one cache): the standard library, and generated/ as
    imported by several tests, are analysed once per process instead of once per run."""
    return tmp_path_factory.getbasetemp() / "mypy-cache"


@pytest.fixture(scope="session")
def keyword_snippet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/test_keyword_calls.py's SNIPPET as snippet.py, alone in its folder (which mypy and
    basedpyright take as the root from which it imports generated/client)."""
    from test_keyword_calls import SNIPPET

    snippet = tmp_path_factory.mktemp("keyword_static") / "snippet.py"
    snippet.write_text(SNIPPET)
    return snippet


@pytest.fixture(scope="session")
def decoder_shapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding a package per schema of tests/test_decoder_shapes.py, generated once per
    test process for its tests and for `pyright_run`."""
    from test_decoder_shapes import write_shapes

    return write_shapes(tmp_path_factory.mktemp("decoder_shapes"))


@pytest.fixture(scope="session")
def pyright_run(tmp_path_factory: pytest.TempPathFactory, keyword_snippet: Path, decoder_shapes: Path) -> PyrightRun:
    """The suite's one basedpyright run (strict): every golden package (generated/), the decoder
    shapes' packages and the keyword snippet, which imports generated/ packages by name. One run
    instead of three spares basedpyright's start-up twice and analysing generated/client twice.
    Each test reads only its own files (`problems`, `part`); tests using it carry
    `@pytest.mark.xdist_group("pyright")` so that one worker runs it."""
    goldens = sorted(p.parent for p in GENERATED.rglob("py.typed"))
    shapes = sorted(p.parent for p in decoder_shapes.glob("*/__init__.py"))
    work = tmp_path_factory.mktemp("pyright")
    return pyright_strict([*goldens, *shapes], work, files=[keyword_snippet], extra_paths=[GENERATED])


@pytest.fixture(scope="session")
def golden_pyright(pyright_run: PyrightRun) -> PyrightRun:
    """`pyright_run` seen through the golden packages (generated/) only."""
    return pyright_run.part([GENERATED])


# The suite's longest serial units, handed out first: pytest-xdist assigns work in collection
# order, so started last they would leave one worker running alone at the end of the run.
LONGEST_GROUPS = ("pyright", "releases", "golden")


def _longest_first(item: pytest.Item) -> bool:
    group = item.get_closest_marker("xdist_group")
    return not (group is not None and bool(group.args) and group.args[0] in LONGEST_GROUPS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_longest_first)  # stable: the rest keep their order


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the main process, before it starts any worker
        _cache_bytecode(config)


def _cache_bytecode(config: pytest.Config) -> None:
    """With PYTHONDONTWRITEBYTECODE set, every process the suite starts (xdist workers, agents,
    CLI runs, type checkers' helpers) would compile the same modules again, a generated types.py
    each time. Bytecode goes to a temporary PYTHONPYCACHEPREFIX instead, removed at the end, so
    the source tree is still left as it was."""
    if not sys.flags.dont_write_bytecode and not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    prefix = tempfile.mkdtemp(prefix="acp-codegen-tests-pycache-")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix
    config.add_cleanup(lambda: shutil.rmtree(prefix, ignore_errors=True))
    if config.getoption("numprocesses", None) not in (None, 0):
        _warm_bytecode(prefix, config)


def _warm_bytecode(prefix: str, config: pytest.Config) -> None:
    """The xdist workers start together and would each compile the same modules while collecting
    (~2 s of CPU each): the standard library's bytecode, which the interpreter ships, is linked
    into the prefix, and the repository's modules (the golden packages most) are compiled once,
    in the background while the workers start."""
    tag = sys.implementation.cache_tag
    for base in {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}:  # mostly one folder
        for cache, _, names in os.walk(base):
            if os.path.basename(cache) != "__pycache__" or "site-packages" in cache:
                continue
            pycs = [name for name in names if name.endswith(f".{tag}.pyc") and name.count(".") == 2]  # not .opt-N
            if not pycs:
                continue
            mirror = prefix + os.path.dirname(cache)
            os.makedirs(mirror, exist_ok=True)
            for name in pycs:
                with contextlib.suppress(FileExistsError):
                    os.symlink(os.path.join(cache, name), os.path.join(mirror, name))
    folders = [str(ROOT / name) for name in ("generated", "codegen", "tests")]
    compiling = subprocess.Popen(
        [sys.executable, "-m", "compileall", "-q", *folders], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    config.add_cleanup(compiling.wait)  # before the prefix is removed (cleanups run last-in first-out)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What is alive once the tests are collected (modules, fixtures' code, hypothesis) lives to
    the end: frozen out of the cyclic collector, with fewer collections, black and the schema
    parser stop paying for rescanning it (about a fifth of the suite's CPU time)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
