"""Stage 4 — format: ruff (the default) or black, both pinned, so output is byte-stable.

Every generated `.py` file is first compiled: a file that is not valid Python is a template
or IR bug, reported as an internal error naming the file and line (formatters would only say
"cannot parse"). Then all files of a run are formatted together: ruff in one process over a
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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from .errors import CodegenError, Problem

Formatter = Literal["ruff", "black"]
FORMATTERS: tuple[Formatter, ...] = ("ruff", "black")
DEFAULT_FORMATTER: Formatter = "ruff"
LINE_LENGTH = 100


def check_syntax(files: dict[str, str], custom: Mapping[str, Sequence[str]] | None = None) -> None:
    """Compile every generated Python file; the first one that fails is reported.

    `custom`: output file -> the custom templates that shaped it. Invalid Python from those is
    bad input (exit 2) naming them; from the bundled templates alone it is an internal error.
    """
    for path, text in files.items():
        if not path.endswith(".py"):
            continue
        try:
            compile(text, path, "exec", dont_inherit=True)
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
            else:
                problem = Problem(
                    f"internal error: generated {path} is not valid Python: {where}",
                    path,
                    fix="this is a bug in acp-codegen; please report it",
                )
            raise CodegenError([problem]) from None


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
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise CodegenError(
                [
                    Problem(
                        f"internal error: ruff format failed: {detail[0] if detail else proc.returncode}",
                        "ruff",
                        fix="this is a bug in acp-codegen; please report it, or pass --formatter black",
                    )
                ]
            )
        return {rel: (root / rel).read_text(encoding="utf-8") for rel in files}


def _black(files: dict[str, str]) -> dict[str, str]:
    import black  # imported only when chosen: it is the slow path
    from black.mode import Mode, TargetVersion

    mode = Mode(target_versions={TargetVersion.PY310}, line_length=LINE_LENGTH)
    return {rel: black.format_str(text, mode=mode) for rel, text in files.items()}


def format_files(
    files: dict[str, str], formatter: Formatter = DEFAULT_FORMATTER, custom: Mapping[str, Sequence[str]] | None = None
) -> dict[str, str]:
    """Every file of a package, with the Python ones syntax-checked (see `check_syntax`) and formatted."""
    python = {path: text for path, text in files.items() if path.endswith(".py")}
    check_syntax(python, custom)
    formatted = _ruff(python) if formatter == "ruff" else _black(python)
    return {path: formatted.get(path, text) for path, text in files.items()}
