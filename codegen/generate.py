"""The pipeline in one place: locate -> load -> IR -> render -> format (-> write or check)."""

from __future__ import annotations

import difflib
import keyword
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from .build import Api, assemble, build_api
from .errors import CodegenError, Problem, fail
from .format import DEFAULT_FORMATTER, Formatter, format_files, format_packages
from .load import load, locate
from .render import Rendered, render_package
from .templates import CustomTemplates
from .validate import validate
from .write import WriteResult, diff_tree, foreign_files_problem, out_dir_problems, write_tree


@dataclass(frozen=True)
class Target:
    """One package to generate (a CLI invocation or a [tool.acp-codegen] target)."""

    role: Literal["agent", "client"]
    out: Path
    schema: str | None = None
    unstable: bool = False
    package: str | None = None
    from_config: bool = False
    formatter: Formatter = DEFAULT_FORMATTER
    templates: CustomTemplates | None = None

    def command(self) -> str:
        """The command that regenerates this target, as written into every file header."""
        if self.from_config:
            return "acp-codegen generate"
        parts = ["acp-codegen", self.role, "--out", self.out.as_posix()]
        if self.schema is not None:
            parts += ["--schema", self.schema]
        if self.unstable:
            parts.append("--unstable")
        if self.package is not None:
            parts += ["--package", self.package]
        if self.templates is not None:
            parts += ["--templates", self.templates.label]
        return " ".join(parts)

    def package_name(self) -> str:
        name = self.package or self.out.resolve().name
        if not all(part.isidentifier() and not keyword.iskeyword(part) for part in name.split(".")):
            given = "--package" if self.package else "the --out folder name"
            raise fail(
                f"{given} {name!r} is not a valid Python package name",
                self.out,
                fix="pass --package with an importable name (letters, digits and _, not starting with a digit; "
                "dots between parts)",
            )
        return name

    def problems(self) -> list[Problem]:
        """What is wrong with the target itself (--out, --package, --templates), before any schema is read."""
        problems = out_dir_problems(self.out)
        if self.templates is not None:
            problems += self.templates.problems()
        try:
            self.package_name()
        except CodegenError as exc:
            problems += exc.problems
        return problems


def preflight(targets: list[Target], check_only: bool = False, force: bool = False) -> None:
    """Everything about the targets themselves, before any schema is read (a bad --out or
    --package is reported at once): raises their problems together. Unless `check_only` or
    `force`, an --out folder of files that are not ours is refused too."""
    problems: list[Problem] = []
    for target in targets:
        problems += target.problems()
        if not check_only and not force:
            problems += foreign_files_problem(target.out)
    if problems:
        raise CodegenError(list(dict.fromkeys(problems)))  # targets may share a templates directory


class ApiCache:
    """The role-independent IR per (schema, unstable) pair, so several targets share one build.

    Loading, validation, datamodel-code-generator and the type IR do not depend on the role or
    the output folder; `acp-codegen generate` runs them once for every pair of targets that
    read the same schema.
    """

    def __init__(self) -> None:
        self._apis: dict[tuple[str | None, bool], Api] = {}

    def get(self, schema: str | None, unstable: bool) -> Api:
        key = (schema, unstable)
        api = self._apis.get(key)
        if api is None:
            loaded = load(locate(schema, unstable))
            validate(loaded)
            api = self._apis[key] = build_api(loaded)
        return api


def render_files(target: Target, apis: ApiCache | None = None) -> Rendered:
    """Everything the target's package consists of, rendered but not yet formatted, in memory.

    Bad input is reported here, before the package is rendered: first the target's own (see
    `preflight`), then the schema files' and the schema's content, together. Nothing has been
    written when this raises.
    """
    preflight([target], check_only=True)
    api = (apis or ApiCache()).get(target.schema, target.unstable)
    package = assemble(api, target.role, target.package_name(), target.command())
    if target.templates is not None:
        package = replace(package, custom_templates=target.templates.label)
    return render_package(package, target.templates)


def generate_files(target: Target, apis: ApiCache | None = None) -> dict[str, str]:
    """Everything the target's package consists of, formatted, in memory (see `render_files`)."""
    rendered = render_files(target, apis)
    return format_files(rendered.files, target.formatter, rendered.custom, rendered.runtime)


def generate_all(targets: list[Target], apis: ApiCache | None = None) -> list[dict[str, str]]:
    """Every target's files, formatted (see `generate_files`): each (schema, unstable) pair is
    built once, and all packages are formatted together (`format_packages`).

    Bad input in any target is reported for all of them together, before anything is formatted;
    the targets' own problems before any schema is read (`preflight`).
    """
    preflight(targets, check_only=True)
    apis = apis or ApiCache()
    rendered: list[Rendered] = []
    problems: list[Problem] = []
    for target in targets:
        try:
            rendered.append(render_files(target, apis))
        except CodegenError as exc:
            problems += exc.problems
    if problems:
        raise CodegenError(list(dict.fromkeys(problems)))  # targets may share a templates directory
    return format_packages(
        [(done.files, target.formatter, done.custom) for done, target in zip(rendered, targets, strict=True)],
        [done.runtime for done in rendered],
    )


def write(target: Target, force: bool = False, files: dict[str, str] | None = None) -> WriteResult:
    """Generate (unless `files` are given) and write; nothing is written if anything fails."""
    return write_tree(target.out, generate_files(target) if files is None else files, force=force)


def check(target: Target, max_lines: int = 40, files: dict[str, str] | None = None) -> list[str]:
    """A short unified diff per stale file; empty when `out` is up to date. `files`: already generated."""
    report: list[str] = []
    if files is None:
        files = generate_files(target)
    for rel, (current, new) in diff_tree(target.out, files).items():
        path = (target.out / rel).as_posix()
        if current is None:
            report.append(f"missing: {path}")
            continue
        if new is None:
            report.append(f"stale file no longer generated: {path}")
            continue
        lines = list(
            difflib.unified_diff(
                current.splitlines(), new.splitlines(), f"{path} (on disk)", f"{path} (generated)", lineterm="", n=1
            )
        )
        shown = lines[:max_lines]
        if len(lines) > max_lines:
            shown.append(f"... {len(lines) - max_lines} more diff lines")
        report.append("\n".join(shown))
    return report
