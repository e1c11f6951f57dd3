"""Every published ACP schema generates correct code (tests/fixtures/releases/README.md).

For each vendored release x {stable, unstable where shipped} x {agent, client}: generate, import,
and compare `METHODS` with the methods the schema defines, derived here independently of the
generator from meta.json and the variants of the message unions (AgentRequest, ClientResponse,
...), and import each package's conformance kit. All packages then go through `mypy --strict`,
batched in two runs (see `mypy_errors`; under the ci profile the kit of the goldens only, see
KIT_FOR_ALL), and their `helpers.py` and `contrib.py`, each distinct one once, through pyright
strict (see `builders_pyright`).

A case that is also a [tool.acp-codegen] target of this repository (same role, same schema file)
is not generated again: its package is the golden one in generated/, which tests/test_golden.py
keeps equal to a fresh generation (`--package`, which only names the package in comments and a
docstring, is exercised by the other cases). So the mypy runs here also check the goldens.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from budget import FULL
from session_scenario import check_session_layer
from typecheck import PyrightRun, mypy_strict, packages, pyright_strict

from codegen.config import load_targets
from codegen.errors import CodegenError
from codegen.format import format_packages
from codegen.generate import ApiCache, Target, render_files
from codegen.load import locate
from codegen.render import Rendered
from codegen.write import write_tree

pytestmark = pytest.mark.slow  # generates every release and type-checks it

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
RELEASES = sorted(p for p in (FIXTURES / "releases").iterdir() if (p / "schema.json").is_file())
OTHERS = [FIXTURES / "schemas" / "v1.20.0", ROOT / "schema" / "v1", ROOT / "schema" / "v2"]


def _cases() -> list[tuple[str, Path, bool, str]]:
    cases = []
    for directory in [*RELEASES, *OTHERS]:
        for unstable in (False, True):
            if unstable and not (directory / "schema.unstable.json").is_file():
                continue
            for role in ("agent", "client"):
                label = directory.name + ("-unstable" if unstable else "")
                cases.append((f"{label}-{role}", directory, unstable, role))
    return cases


CASES = _cases()
# Kind 2 of issue 9: a single-value enum property (`"jsonrpc": {"enum": ["2.0"]}`) used to decode
# as `v.__class__ is str and v in ("2.0",)`, which mypy does not narrow to Literal['2.0']. Fixed
# (it decodes as `v == "2.0"` to the literal itself): no release is expected to fail any more.


def _package(case_id: str) -> str:
    return "rel_" + re.sub(r"\W", "_", case_id)


def _goldens() -> dict[str, Target]:
    """case id -> the [tool.acp-codegen] target generating the same role from the same schema file."""
    targets = load_targets(ROOT / "pyproject.toml")
    found: dict[str, Target] = {}
    for case_id, directory, unstable, role in CASES:
        schema = locate(str(directory), unstable).schema.resolve()
        for target in targets:
            if (target.role, target.unstable) == (role, unstable):
                if locate(target.schema, target.unstable).schema.resolve() == schema:
                    found[case_id] = target
    return found


GOLDEN = _goldens()


def test_every_golden_package_is_a_release_case() -> None:
    """So the goldens are all in the mypy runs below."""
    assert sorted(t.out for t in GOLDEN.values()) == sorted(t.out for t in load_targets(ROOT / "pyproject.toml"))


@pytest.fixture(scope="session")
def generation(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Every case generated once (or its golden copied): the output root and, per failed case, its error.

    As `acp-codegen generate` does it (`generate_all`, but each case's bad input kept apart):
    each schema built once for both roles, every package formatted and syntax-checked together,
    each distinct text once. Hence `from_config`: the same header command in both roles, so the
    agent's and the client's common files (types.py, the runtime) are one text.
    """
    out = tmp_path_factory.mktemp("releases")
    apis = ApiCache()
    failed: dict[str, str] = {}
    rendered: list[tuple[Target, Rendered]] = []
    for case_id, directory, unstable, role in CASES:
        name = _package(case_id)
        if case_id in GOLDEN:  # under the case's name: the packages import themselves relatively
            shutil.copytree(GOLDEN[case_id].out, out / name, ignore=shutil.ignore_patterns("__pycache__"))
            continue
        target = Target(role, out / name, str(directory), unstable, package=name, from_config=True)  # type: ignore[arg-type]
        try:
            rendered.append((target, render_files(target, apis)))
        except CodegenError as exc:
            failed[name] = str(exc)
    formatted = format_packages(
        [(r.files, target.formatter, r.custom) for target, r in rendered], [r.runtime for _, r in rendered]
    )
    for (target, _), files in zip(rendered, formatted, strict=True):
        write_tree(target.out, files)
    return out, failed


@pytest.fixture(scope="session")
def generated(generation: tuple[Path, dict[str, str]]) -> Path:
    return generation[0]


@pytest.mark.parametrize("case_id", [c[0] for c in CASES])
def test_generates(generation: tuple[Path, dict[str, str]], case_id: str) -> None:
    assert generation[1].get(_package(case_id)) is None


def _import(root: Path, name: str) -> ModuleType:
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(root))


# -- what the schema defines, read independently of codegen/ ------------------------------
SUFFIXES = ("Request", "Response", "Notification")
UNION = re.compile(r"^(Agent|Client|ProtocolLevel)(Request|Response|Notification)$")


def _variants(node: Any, out: dict[str, Any]) -> None:
    """$ref names / inline titles of a message union, through nesting and JSON-RPC envelopes."""
    if not isinstance(node, dict):
        return
    for key in ("anyOf", "oneOf"):
        for alt in node.get(key, []):
            _variants(alt, out)
    props = node.get("properties", {})
    for key in ("params", "result"):
        if key in props:
            _variants(props[key], out)
    ref = node.get("$ref") or next((p.get("$ref") for p in node.get("allOf", []) if "$ref" in p), None)
    if ref:
        out[ref.split("/")[-1]] = None
    elif "title" in node and not any(k in node for k in ("anyOf", "oneOf", "properties")):
        out[node["title"]] = node


def _words(text: str) -> set[str]:
    """`session/set_mode` and `SetSessionMode` -> {set, session, mode}."""
    if "/" in text or "_" in text or text.islower():
        return set(re.split(r"[/_]", text))
    return {p.lower() for p in re.findall(r"[A-Z][a-z0-9]*", text)}


def expected_methods(directory: Path, unstable: bool) -> dict[str, tuple[str, str, str, str | None, str | None]]:
    """wire -> (handled by, request|notification, params type, result type, notification params)."""
    suffix = ".unstable.json" if unstable else ".json"
    defs = json.loads((directory / f"schema{suffix}").read_text())["$defs"]
    meta = json.loads((directory / f"meta{suffix}").read_text())
    members: dict[str, dict[str, Any]] = {s: {} for s in SUFFIXES}
    for name, node in defs.items():
        match = UNION.match(name)
        if match:
            _variants(node, members[match.group(2)])
    found: dict[str, tuple[str, str, str, str | None, str | None]] = {}
    sides = {"agentMethods": "agent", "clientMethods": "client", "protocolMethods": "both"}
    for key, side in sides.items():
        for wire in meta.get(key, {}).values():

            def pick(kind: str, wire: str = wire) -> str | None:
                tagged = [n for n in members[kind] if defs.get(n, {}).get("x-method") == wire]
                # Not in a union (e.g. `$/cancel_request`): the x-method type named for its kind.
                tagged = tagged or [n for n, d in defs.items() if d.get("x-method") == wire and n.endswith(kind)]
                if tagged:
                    assert len(tagged) == 1, (wire, tagged)
                    return tagged[0]
                # Without x-method: the variant named with the method's words (minus its namespace).
                want = _words(wire)
                names = [n for n in members[kind] if n.endswith(kind) and defs.get(n, {}).get("x-method") is None]
                exact = [n for n in names if _words(n[: -len(kind)]) in (want, want - {wire.split("/")[0]})]
                return exact[0] if len(exact) == 1 else None

            request, notification = pick("Request"), pick("Notification")
            assert request or notification, wire
            if request is not None:
                result = pick("Response")
                if result is None:
                    result = request.removesuffix("Request") + "Response"
                    assert result in members["Response"], (wire, result)
                entry = (side, "request", request, result, notification)
            else:
                assert notification is not None
                entry = (side, "notification", notification, None, None)
            if wire in found and found[wire][0] != side:  # listed for the agent and the client
                entry = ("both", *entry[1:])
            found[wire] = entry
    return found


@pytest.mark.parametrize("case_id, directory, unstable, role", CASES, ids=[c[0] for c in CASES])
def test_methods_match_the_schema(
    generation: tuple[Path, dict[str, str]], case_id: str, directory: Path, unstable: bool, role: str
) -> None:
    generated, failed = generation
    assert failed.get(_package(case_id)) is None
    module = _import(generated, _package(case_id))
    _import(generated, _package(case_id) + ".testing")  # the kit imports against this schema too
    table = {
        wire: (spec.handled_by, spec.kind, spec.params_type, spec.result_type, spec.notification_params_type)
        for wire, spec in module.METHODS.items()
    }
    assert table == expected_methods(directory, unstable)
    for wire, spec in module.METHODS.items():
        # A null result is a real result: the proxy returns None and the dispatcher answers null.
        assert (spec.decode_result is not None) == (spec.kind == "request"), wire
        assert hasattr(module.types, spec.params_type), wire


@pytest.mark.parametrize("case_id", [c[0] for c in CASES if c[3] == "agent"])
def test_session_layer_serves_the_lifecycle(generated: Path, case_id: str) -> None:
    """The release's session layer, run in-process with its own kit: new, a prompt turn, load's
    replay, list, an unknown session (tests/session_scenario.py), as much as the schema has."""
    if not (generated / _package(case_id) / "sessions.py").is_file():
        pytest.skip("no session layer: the schema lacks session/new, session/prompt or session/cancel")
    sys.path.insert(0, str(generated))
    try:
        check_session_layer(_package(case_id))
    finally:
        sys.path.remove(str(generated))


# -- mypy --strict on every package, two runs sharing one cache -----------------------------
# Under the ci profile, the conformance kit (`testing/`) of a package that is no golden is left
# out: the kit reaches the schema only through names every package has (METHODS, the decode
# errors, ...; see runtime/testing), so the goldens' kits, of three schemas, type-check it.
# test_methods_match_the_schema imports every package's kit. The slow profile checks them all.
KIT_FOR_ALL = FULL


def _mypy_run(root: Path, checked: dict[str, str], cache: Path) -> dict[str, list[str]]:
    """mypy --strict over the packages in `root` (directory name -> the package it is, for the
    errors): the errors per package checked."""
    golden = {_package(case_id) for case_id in GOLDEN}
    kitless = sorted(d for d, package in checked.items() if package not in golden and not KIT_FOR_ALL)
    exclude = ["--exclude", f"^({'|'.join(map(re.escape, kitless))})/testing/"] if kitless else []
    result = mypy_strict(root, *exclude, *packages(checked), cache=cache)
    errors: dict[str, list[str]] = {n: [] for n in checked.values()}
    for line in result.stdout.splitlines():
        directory = line.split("/", 1)[0]
        if ": error:" in line:
            assert directory in checked, line
            errors[checked[directory]].append(checked[directory] + line[len(directory) :])  # its real name
    assert result.returncode == (1 if any(errors.values()) else 0), result.stdout + result.stderr
    return errors


@pytest.fixture(scope="session")
def mypy_errors(generated: Path, mypy_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """mypy --strict over every generated package: the errors per package.

    A client package shares most modules byte for byte with its agent (types.py, the runtime),
    but mypy's cache is by module name. So the agents are checked first, then in a second run
    with the same cache each client as a copy named like its agent: the modules identical to
    the agent's are found in the cache (same name, same source hash) instead of being analysed
    again, the others are checked anew. mypy keeps no cache entry for a module with errors, so
    an error in a shared module is reported for both packages.
    """
    names = [_package(c[0]) for c in CASES if (generated / _package(c[0])).is_dir()]
    as_agent = {
        name: name.removesuffix("_client") + "_agent"
        for name in names
        if name.endswith("_client") and name.removesuffix("_client") + "_agent" in names
    }
    errors = _mypy_run(generated, {n: n for n in names if n not in as_agent}, mypy_cache)
    if as_agent:
        copies = tmp_path_factory.mktemp("releases_as_agent")
        for client, agent in as_agent.items():
            shutil.copytree(generated / client, copies / agent, ignore=shutil.ignore_patterns("__pycache__"))
        errors |= _mypy_run(copies, {agent: client for client, agent in as_agent.items()}, mypy_cache)
    assert sorted(errors) == sorted(names)
    return errors


@pytest.mark.parametrize("case_id, directory, unstable, role", CASES, ids=[c[0] for c in CASES])
def test_mypy_strict(
    mypy_errors: dict[str, list[str]], case_id: str, directory: Path, unstable: bool, role: str
) -> None:
    assert mypy_errors.get(_package(case_id)) == []


# -- pyright strict on helpers.py and contrib.py, one run ------------------------------------
def _body(path: Path) -> str:
    """A generated file without its header comments (which name the schema and the package)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(lines[next(i for i, line in enumerate(lines) if not line.startswith("#")) :])


@pytest.fixture(scope="session")
def builders_pyright(generated: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[PyrightRun, list[Path]]:
    """One pyright strict run (the pyrights of PYRIGHTS) over the releases' `helpers.py` and
    `contrib.py` (the goldens' are in the suite's golden run; mypy above sees every package whole,
    but for the kit as KIT_FOR_ALL says). Both vary with what each
    schema has: helpers.py is checked once per distinct pair of its text and the types.py it
    imports, contrib.py once per distinct text (header aside); each file with its own package as
    the root, so only what it uses of types.py is analysed."""
    helpers: dict[tuple[str, str], Path] = {}
    contrib: dict[str, Path] = {}
    for case_id, *_ in CASES:
        package = generated / _package(case_id)
        if not package.is_dir() or case_id in GOLDEN:
            continue
        helpers.setdefault(
            ((package / "helpers.py").read_text(), (package / "types.py").read_text()), package / "helpers.py"
        )
        if (package / "contrib.py").is_file():
            contrib.setdefault(_body(package / "contrib.py"), package / "contrib.py")
    files = sorted({*helpers.values(), *contrib.values()})
    return pyright_strict([], tmp_path_factory.mktemp("builders_pyright"), files=files), files


def test_helpers_and_contrib_are_pyright_strict_clean(builders_pyright: tuple[PyrightRun, list[Path]]) -> None:
    run, files = builders_pyright
    assert any(p.name == "helpers.py" for p in files) and any(p.name == "contrib.py" for p in files)
    problems = [line for path in files for line in run.problems(path, ("error", "warning"))]
    assert problems == [], "\n".join(problems)


@pytest.mark.skipif(
    not os.environ.get("ACP_RELEASE_PYRIGHT"),
    reason="about 130 CPU-seconds per pyright: ACP_RELEASE_PYRIGHT=1 runs it (both: ACP_PYRIGHTS=pyright,basedpyright)",
)
def test_pyright_strict_on_every_release_package(generated: Path, tmp_path: Path) -> None:
    """Every release package (the goldens among them) clean under the pyrights of PYRIGHTS, strict."""
    roots = sorted(p.parent for p in generated.glob("*/__init__.py"))
    assert len(roots) == len(CASES)
    run = pyright_strict(roots, tmp_path)
    assert not run.all_problems(("error", "warning")), run.output
