"""Stage 4 — format: ruff (the default) or black, both pinned, so output is byte-stable.

Every generated `.py` file is first compiled: a file that is not valid Python is a template
or IR bug, raised as `GeneratedCodeError` naming the file and line (formatters would only say
"cannot parse"); the CLI reports it as an internal error (exit 3), before anything is written.
Then all files of a run are formatted together: ruff in one process over a
temporary tree, or black in-process. Both use line length 100 and Python 3.10 as the target,
and give byte-identical output for everything we generate (tests/test_format.py proves it),
so the golden record is clean under either.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from .errors import CodegenError, Problem

Formatter = Literal["ruff", "black"]
FORMATTERS: tuple[Formatter, ...] = ("ruff", "black")
DEFAULT_FORMATTER: Formatter = "ruff"
LINE_LENGTH = 100


class GeneratedCodeError(Exception):
    """Generated code a formatter cannot take: a bug in acp-codegen (or a custom template), not bad input."""


def check_syntax(files: dict[str, str]) -> None:
    """Compile every generated Python file; the first one that fails is a `GeneratedCodeError`."""
    for path, text in files.items():
        if not path.endswith(".py"):
            continue
        try:
            compile(text, path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            line = (exc.text or "").strip()
            raise GeneratedCodeError(
                f"generated {path} is not valid Python: {exc.msg} at line {exc.lineno}"
                + (f": {line!r}" if line else "")
            ) from None


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


def _ruff(files: dict[str, str]) -> dict[str, str]:
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
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
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
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise GeneratedCodeError(f"ruff format failed: {detail[0] if detail else f'exit code {proc.returncode}'}")
        return {rel: (root / rel).read_text(encoding="utf-8") for rel in files}


def _black(files: dict[str, str]) -> dict[str, str]:
    import black  # imported only when chosen: it is the slow path
    from black.mode import Mode, TargetVersion

    mode = Mode(target_versions={TargetVersion.PY310}, line_length=LINE_LENGTH)
    return {rel: black.format_str(text, mode=mode) for rel, text in files.items()}


def format_packages(packages: Sequence[tuple[dict[str, str], Formatter]]) -> list[dict[str, str]]:
    """Several packages at once (`acp-codegen generate`): each (files, formatter) pair, formatted.

    Every Python file is syntax-checked under its own name; then each distinct text is formatted
    once (the agent and client packages of one schema share most files), with one ruff process
    for everything ruff formats.
    """
    unique: dict[Formatter, dict[str, str]] = {}  # formatter -> {text: a file name for it}
    for i, (files, formatter) in enumerate(packages):
        python = {path: text for path, text in files.items() if path.endswith(".py")}
        check_syntax(python)
        names = unique.setdefault(formatter, {})
        for path, text in python.items():
            names.setdefault(text, f"p{i}/{path}")
    formatted: dict[Formatter, dict[str, str]] = {}  # formatter -> {text: formatted text}
    for formatter, names in unique.items():
        run = _ruff if formatter == "ruff" else _black
        by_name = run({name: text for text, name in names.items()})
        formatted[formatter] = {text: by_name[name] for text, name in names.items()}
    return [
        {path: formatted[formatter].get(text, text) if path.endswith(".py") else text for path, text in files.items()}
        for files, formatter in packages
    ]


def format_files(files: dict[str, str], formatter: Formatter = DEFAULT_FORMATTER) -> dict[str, str]:
    """Every file of a package, with the Python ones syntax-checked and formatted."""
    return format_packages([(files, formatter)])[0]
