"""Stage 4 — format: ruff (the default) or black, both pinned, so output is byte-stable.

Every generated `.py` file is compiled (formatters would only say "cannot parse"; each
distinct text once, while the ruff process runs, before its output is used): a
file that is not valid Python is bad input naming the custom templates that shaped it, or,
from the bundled templates alone, a bug raised as `GeneratedCodeError` naming the file and
line, which the CLI reports as an internal error (exit 3); nothing is written either way.
A bundled runtime source behind a header of comment lines only is the one exception: its
header is compiled, not the source again (runtime/ is our own Python, linted, type-checked
and imported by the tests; about half of every package's text and of the check's time).
Then all files of a run (every package of `acp-codegen generate`) are formatted together,
each distinct text once: ruff in one process over a temporary tree, or black in-process. Both
use line length 100 and Python 3.10 as the target, and give byte-identical output for
everything we generate (tests/test_format.py proves it), so the golden record is clean under either.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from .errors import CodegenError, Problem

Formatter = Literal["ruff", "black"]
FORMATTERS: tuple[Formatter, ...] = ("ruff", "black")
DEFAULT_FORMATTER: Formatter = "ruff"
LINE_LENGTH = 100
Blame = Mapping[str, Sequence[str]]  # output file -> the custom templates that shaped it


class GeneratedCodeError(Exception):
    """Generated code that is not Python or that a formatter rejects: a bug in acp-codegen, not bad input."""


def _only_comments(header: str) -> bool:
    """`header` is whole lines that each start with `#`: put before valid Python, it leaves it valid
    (a coding cookie is ignored in a `str`; `\\r` would end a line, so it is not allowed)."""
    lines = header[:-1].split("\n")
    return header.endswith("\n") and "\r" not in header and all(line.startswith("#") for line in lines)


def _compile(path: str, text: str, runtime: tuple[str, str] | None) -> None:
    """Compile `text`, or only its header when `text` is exactly `runtime`: (a header, the bundled
    runtime source after it)."""
    header, body = runtime or ("", "")
    if (
        runtime is not None
        and len(text) == len(header) + len(body)
        and text.startswith(header)
        and text.endswith(body)
        and _only_comments(header)
    ):
        try:
            compile(header, path, "exec", dont_inherit=True)
            return
        except (SyntaxError, ValueError):
            pass  # the whole file then fails as it would have on its own: its error is the one reported
    compile(text, path, "exec", dont_inherit=True)


def check_syntax(
    files: dict[str, str], custom: Blame | None = None, runtime: Mapping[str, tuple[str, str]] | None = None
) -> None:
    """Compile every generated Python file; the first one that fails is reported.

    `custom`: output file -> the custom templates that shaped it. Invalid Python from those is
    bad input (exit 2) naming them; from the bundled templates alone it is a `GeneratedCodeError`.
    `runtime`: output file -> (header, the bundled runtime source after it), `Rendered.runtime`:
    of a file that is exactly those two, only a header of comment lines is compiled.
    """
    for path, text in files.items():
        if not path.endswith(".py"):
            continue
        try:
            _compile(path, text, (runtime or {}).get(path))
        except SyntaxError as exc:
            line = (exc.text or "").strip()
            where = f"{exc.msg} at line {exc.lineno}" + (f": {line!r}" if line else "")
            blamed = (custom or {}).get(path)
            if blamed:
                problem = Problem(
                    f"made {path} with invalid Python: {where}",
                    ", ".join(blamed),
                    fix="fix the custom template; `acp-codegen templates --copy NAME DIR` gives the bundled one",
                )
                raise CodegenError([problem]) from None
            raise GeneratedCodeError(f"generated {path} is not valid Python: {where}") from None


def find_ruff() -> str:
    """The ruff binary its wheel installed, found as `python -m ruff` finds it."""
    try:
        from ruff.__main__ import find_ruff_bin  # type: ignore[import-untyped,unused-ignore]

        return str(find_ruff_bin())
    except (ImportError, FileNotFoundError):
        pass
    exe = "ruff" + (sysconfig.get_config_var("EXE") or "")
    for scripts in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(scripts, exe)
        if os.path.isfile(candidate):
            return candidate
    raise CodegenError(
        [
            Problem(
                "the ruff formatter is not installed",
                "ruff",
                fix="reinstall acp-codegen (it depends on the pinned ruff), or pass --formatter black",
            )
        ]
    )


def _ruff(files: dict[str, str], meanwhile: Callable[[], None] = lambda: None) -> dict[str, str]:
    """Format `files` in one ruff process; `meanwhile` runs while it does (and if it raises,
    ruff is stopped and its output never used)."""
    with tempfile.TemporaryDirectory(prefix="acp-codegen-format-") as tmp:
        root = Path(tmp)
        for rel, text in files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", newline="\n")
        # --isolated: neither the user's nor our own ruff configuration may change the output.
        cmd = [
            find_ruff(),
            "format",
            "--isolated",
            "--no-cache",
            "--quiet",
            f"--line-length={LINE_LENGTH}",
            "--target-version=py310",
            str(root),
        ]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as exc:
            raise CodegenError(
                [
                    Problem(
                        f"cannot run the ruff formatter: {exc}",
                        cmd[0],
                        fix="reinstall acp-codegen, or pass --formatter black",
                    )
                ]
            ) from None
        try:
            meanwhile()
        except BaseException:
            proc.kill()
            proc.communicate()
            raise
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:
            detail = (stderr or stdout).strip().splitlines()
            raise GeneratedCodeError(f"ruff format failed: {detail[0] if detail else f'exit code {proc.returncode}'}")
        return {rel: (root / rel).read_text(encoding="utf-8") for rel in files}


def _black(files: dict[str, str]) -> dict[str, str]:
    import black  # imported only when chosen: it is the slow path
    from black.mode import Mode, TargetVersion

    mode = Mode(target_versions={TargetVersion.PY310}, line_length=LINE_LENGTH)
    return {rel: black.format_str(text, mode=mode) for rel, text in files.items()}


def format_packages(
    packages: Sequence[tuple[dict[str, str], Formatter, Blame | None]],
    runtime: Sequence[Mapping[str, tuple[str, str]]] | None = None,
) -> list[dict[str, str]]:
    """Several packages at once (`acp-codegen generate`): each (files, formatter, blame), formatted.

    Every Python file is syntax-checked (see `check_syntax`, which `runtime`, one per package,
    is for; each distinct text once, while ruff runs); each distinct text is formatted once
    (the agent and client packages of one schema share most files), with one ruff process for
    everything ruff formats.
    """
    unique: dict[Formatter, dict[str, str]] = {}  # formatter -> {text: a file name for it}
    for i, (files, formatter, _) in enumerate(packages):
        names = unique.setdefault(formatter, {})
        for path, text in files.items():
            if path.endswith(".py"):
                names.setdefault(text, f"p{i}/{path}")
    checked: set[str] = set()

    def check_all() -> None:
        for i, (files, _, custom) in enumerate(packages):
            python = {path: text for path, text in files.items() if path.endswith(".py") and text not in checked}
            check_syntax(python, custom, runtime[i] if runtime is not None else None)
            checked.update(python.values())

    formatted: dict[Formatter, dict[str, str]] = {}  # formatter -> {text: formatted text}
    if "ruff" in unique:
        by_name = _ruff({name: text for text, name in unique["ruff"].items()}, meanwhile=check_all)
        formatted["ruff"] = {text: by_name[name] for text, name in unique["ruff"].items()}
    check_all()  # (a no-op if done while ruff ran)
    if "black" in unique:
        by_name = _black({name: text for text, name in unique["black"].items()})
        formatted["black"] = {text: by_name[name] for text, name in unique["black"].items()}
    return [
        {path: formatted[formatter][text] if path.endswith(".py") else text for path, text in files.items()}
        for files, formatter, _ in packages
    ]


def format_files(
    files: dict[str, str],
    formatter: Formatter = DEFAULT_FORMATTER,
    custom: Blame | None = None,
    runtime: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, str]:
    """Every file of a package, with the Python ones syntax-checked (see `check_syntax`) and formatted."""
    return format_packages([(files, formatter, custom)], None if runtime is None else [runtime])[0]
