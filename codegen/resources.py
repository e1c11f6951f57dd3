"""Where the bundled templates, runtime sources and schemas are: package data in a wheel, the repo in a checkout."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    # In a wheel the build maps templates/, runtime/ and schema/ into the package; in a checkout
    # (editable install or plain source) they sit beside codegen/.
    packaged = _HERE / name
    return packaged if packaged.is_dir() else _HERE.parent / name


def templates_dir() -> Path:
    return _data_dir("templates")


def runtime_dir() -> Path:
    return _data_dir("runtime")


def schema_root() -> Path:
    return _data_dir("schema")


def bundled_schema_names() -> list[str]:
    root = schema_root()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "schema.json").is_file())


def bundled_schema_dir(name: str) -> Path:
    return schema_root() / name
