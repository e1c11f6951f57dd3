"""Stage 4 — format: black, in-process and pinned, so output is byte-stable.

Black is the slowest stage (it re-parses every generated line), so formatted files are kept
in a content-addressed cache, as black's own CLI does: the key is the unformatted text plus
black's version and mode, so a cache hit is exactly what black would produce. Set
ACP_CODEGEN_NO_CACHE=1 to bypass it; ACP_CODEGEN_CACHE_DIR moves it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import black
from black.mode import Mode, TargetVersion
from black.parsing import InvalidInput

from .errors import CodegenError, Problem

_BLACK_VERSION = getattr(black, "__version__", "")
MODE = Mode(target_versions={TargetVersion.PY310}, line_length=100)


def cache_dir() -> Path | None:
    if os.environ.get("ACP_CODEGEN_NO_CACHE"):
        return None
    configured = os.environ.get("ACP_CODEGEN_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "acp-codegen" / "black"


def _key(text: str) -> str:
    digest = hashlib.sha256()
    digest.update(f"{_BLACK_VERSION}\0{MODE!r}\0".encode())
    digest.update(text.encode("utf-8"))
    return digest.hexdigest()


def format_source(path: str, text: str) -> str:
    cache = cache_dir()
    entry = cache / _key(text) if cache is not None else None
    if entry is not None:
        try:
            return entry.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            pass
    try:
        formatted = black.format_str(text, mode=MODE)
    except InvalidInput as exc:
        # A template or IR bug, never a user error: say which file and where.
        raise CodegenError([Problem(f"internal error: generated {path} is not valid Python ({exc})", path)]) from None
    if entry is not None:
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            tmp = entry.with_name(f".{entry.name}.{os.getpid()}")
            tmp.write_text(formatted, encoding="utf-8")
            os.replace(tmp, entry)
        except OSError:
            pass  # a read-only home is fine: we just format again next time
    return formatted


def format_files(files: dict[str, str]) -> dict[str, str]:
    return {path: format_source(path, text) if path.endswith(".py") else text for path, text in files.items()}
