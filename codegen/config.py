"""`[tool.acp-codegen]` in a project's pyproject.toml: the targets `acp-codegen generate` runs.

[[tool.acp-codegen.targets]]
role = "agent"            # or "client"
out = "src/myagent/acp"   # relative to the pyproject.toml
schema = "v1"             # optional: bundled name or a path (relative to pyproject.toml)
unstable = false          # optional
package = "myagent.acp"   # optional
formatter = "ruff"        # optional: "ruff" (default) or "black"; also settable for all targets
                          # as `formatter = ...` directly under [tool.acp-codegen]

Directly under [tool.acp-codegen], for every target:
templates = "acp-templates"  # optional: custom templates directory (relative to pyproject.toml)
"""

from __future__ import annotations

import json
import keyword
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from .errors import CodegenError, Problem, fail
from .format import DEFAULT_FORMATTER, FORMATTERS, Formatter
from .generate import Target
from .resources import bundled_schema_names
from .templates import CustomTemplates

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

_KEYS = {"role", "out", "schema", "unstable", "package", "formatter"}
_SECTION_KEYS = {"targets", "formatter", "templates"}


def load_targets(config: Path) -> list[Target]:
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise fail("no pyproject.toml here", config, fix="run in your project root or pass --config") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read config: {exc}", config) from None
    except tomllib.TOMLDecodeError as exc:
        raise fail(f"invalid TOML: {exc}", config, fix="repair the file") from None
    section = data.get("tool", {}).get("acp-codegen")
    if section is None:
        raise fail(
            "no [tool.acp-codegen] section",
            config,
            fix='add [[tool.acp-codegen.targets]] with role = "agent" and out = "..."',
        )
    entries = section.get("targets") if isinstance(section, dict) else None
    if not isinstance(entries, list) or not entries:
        raise fail(
            "[tool.acp-codegen] needs a non-empty targets list",
            config,
            "/tool/acp-codegen/targets",
            fix='add [[tool.acp-codegen.targets]] with role = "agent" and out = "..."',
        )
    base = config.parent
    problems: list[Problem] = []
    unknown = sorted(set(section) - _SECTION_KEYS)
    if unknown:
        problems.append(
            Problem(f"unknown keys {unknown}", str(config), "/tool/acp-codegen", f"use only {sorted(_SECTION_KEYS)}")
        )
    default = _formatter(section.get("formatter", DEFAULT_FORMATTER), str(config), "/tool/acp-codegen", problems)
    templates = _templates(section.get("templates"), base, str(config), problems)
    targets: list[Target] = []
    for i, entry in enumerate(entries):
        pointer = f"/tool/acp-codegen/targets/{i}"
        found = _target(entry, base, str(config), pointer, problems, default)
        if found is not None:
            targets.append(replace(found, templates=templates))
    if problems:
        raise CodegenError(problems)
    return targets


def _toml(value: Any) -> str:
    """A value as it is written in TOML (near enough for a message): "agnet", true, 3."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _templates(value: Any, base: Path, file: str, problems: list[Problem]) -> CustomTemplates | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        problems.append(
            Problem(
                f"templates = {_toml(value)} is not a directory path",
                file,
                "/tool/acp-codegen/templates",
                'templates = "acp-templates" (a folder, relative to pyproject.toml)',
            )
        )
        return None
    return CustomTemplates(base / value, value)


def _formatter(value: Any, file: str, pointer: str, problems: list[Problem]) -> Formatter:
    for name in FORMATTERS:
        if value == name:
            return name
    problems.append(
        Problem(f"unknown formatter {_toml(value)}", file, f"{pointer}/formatter", f"use one of {list(FORMATTERS)}")
    )
    return DEFAULT_FORMATTER


def _package_problem(name: str) -> str | None:
    """Why `name` cannot be imported as a package name, or None."""
    if all(part.isidentifier() and not keyword.iskeyword(part) for part in name.split(".")):
        return None
    return "is not a valid Python package name"


PACKAGE_FIX = "letters, digits and _, not starting with a digit, no keyword; dots between parts"


def _target(
    entry: Any, base: Path, file: str, pointer: str, problems: list[Problem], formatter: Formatter
) -> Target | None:
    if not isinstance(entry, dict):
        problems.append(
            Problem(
                f"a target must be a table, not {_toml(entry)}",
                file,
                pointer,
                'write each target as [[tool.acp-codegen.targets]] with role = "agent" and out = "..."',
            )
        )
        return None
    found = len(problems)
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        problems.append(Problem(f"unknown keys {unknown}", file, pointer, f"use only {sorted(_KEYS)}"))
    role = entry.get("role")
    if role not in ("agent", "client"):
        what = "role is missing" if "role" not in entry else f'role = {_toml(role)} is neither "agent" nor "client"'
        problems.append(Problem(what, file, f"{pointer}/role", 'role = "agent", or "client" for an editor'))
    out = entry.get("out")
    if not isinstance(out, str) or not out:
        what = "out is missing" if "out" not in entry else f"out = {_toml(out)} is not a path"
        fix = 'out = "src/myagent/acp", the package folder to write, relative to pyproject.toml'
        problems.append(Problem(what, file, f"{pointer}/out", fix))
    schema = entry.get("schema")
    if schema is not None and not isinstance(schema, str):
        fix = f"schema = one of {sorted(bundled_schema_names())} or a path (relative to pyproject.toml)"
        problems.append(Problem(f"schema = {_toml(schema)} is not a string", file, f"{pointer}/schema", fix))
    unstable = entry.get("unstable", False)
    if not isinstance(unstable, bool):
        fix = "unstable = true, or false (the default)"
        problems.append(Problem(f"unstable = {_toml(unstable)} is not a boolean", file, f"{pointer}/unstable", fix))
    package = entry.get("package")
    if package is not None:
        why = "is not a string" if not isinstance(package, str) else _package_problem(package)
        if why is not None:
            fix = f'package = "myagent.acp" ({PACKAGE_FIX})'
            problems.append(Problem(f"package = {_toml(package)} {why}", file, f"{pointer}/package", fix))
    elif isinstance(out, str) and out:
        folder = (base / out).resolve().name
        why = _package_problem(folder)
        if why is not None:
            fix = f'add package = "{folder.replace("-", "_")}", the import name ({PACKAGE_FIX})'
            what = f"out = {_toml(out)}: its folder name {folder!r} {why}"
            problems.append(Problem(what, file, f"{pointer}/out", fix))
    if "formatter" in entry:
        formatter = _formatter(entry["formatter"], file, pointer, problems)
    if len(problems) > found or role not in ("agent", "client") or not isinstance(out, str):
        return None
    return Target(role, base / out, _schema(schema, base), unstable, package, from_config=True, formatter=formatter)


def _schema(schema: str | None, base: Path) -> str | None:
    """A schema named in the config: a bundled name as it is, a path relative to pyproject.toml."""
    if schema is None or schema in bundled_schema_names():
        return schema
    return str(base / schema)
