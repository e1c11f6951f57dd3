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
        raise fail("[tool.acp-codegen] needs a non-empty targets list", config, "/tool/acp-codegen/targets")
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


def _templates(value: Any, base: Path, file: str, problems: list[Problem]) -> CustomTemplates | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        problems.append(Problem("templates must be a directory path", file, "/tool/acp-codegen/templates"))
        return None
    return CustomTemplates(base / value, value)


def _formatter(value: Any, file: str, pointer: str, problems: list[Problem]) -> Formatter:
    for name in FORMATTERS:
        if value == name:
            return name
    problems.append(
        Problem(f"unknown formatter {value!r}", file, f"{pointer}/formatter", f"use one of {list(FORMATTERS)}")
    )
    return DEFAULT_FORMATTER


def _target(
    entry: Any, base: Path, file: str, pointer: str, problems: list[Problem], formatter: Formatter
) -> Target | None:
    if not isinstance(entry, dict):
        problems.append(Problem("a target must be a table", file, pointer))
        return None
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        problems.append(Problem(f"unknown keys {unknown}", file, pointer, f"use only {sorted(_KEYS)}"))
    role = entry.get("role")
    if role not in ("agent", "client"):
        problems.append(Problem('role must be "agent" or "client"', file, f"{pointer}/role"))
        return None
    out = entry.get("out")
    if not isinstance(out, str) or not out:
        problems.append(Problem("out must be a path", file, f"{pointer}/out"))
        return None
    schema = entry.get("schema")
    if schema is not None and not isinstance(schema, str):
        problems.append(Problem("schema must be a string", file, f"{pointer}/schema"))
        return None
    if isinstance(schema, str) and schema not in bundled_schema_names():
        schema = str(base / schema)
    unstable = entry.get("unstable", False)
    package = entry.get("package")
    if not isinstance(unstable, bool) or (package is not None and not isinstance(package, str)):
        problems.append(Problem("unstable must be a boolean and package a string", file, pointer))
        return None
    if "formatter" in entry:
        formatter = _formatter(entry["formatter"], file, pointer, problems)
    return Target(role, base / out, schema, unstable, package, from_config=True, formatter=formatter)
