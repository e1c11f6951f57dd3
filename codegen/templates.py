"""Stage 3a — where each template and runtime source comes from: bundled, or a user's override.

`--templates DIR` (or `templates = "DIR"` under [tool.acp-codegen]) names a directory whose
files replace the bundled ones of the same name: a Jinja template from `templates/`
(`agent.py.jinja`, `_role.jinja`, ...) or a runtime source from `runtime/` (`connection.py`,
`dispatch.py`, copied into the package under the generated header). Everything else falls back
to the bundled file (a Jinja `ChoiceLoader`). A file in DIR whose name is not a bundled one is
an error naming it, so a typo never goes unnoticed; hidden files (`.gitkeep`) are ignored.

Errors raised by a custom template while rendering are reported here as bad input (exit 2)
naming the template and its line, and `blame` says which custom files shaped an output file,
so that the compile check can name them when the result is not valid Python.
"""

from __future__ import annotations

import shutil
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jinja2
import jinja2.meta

from .errors import CodegenError, Problem, fail
from .resources import runtime_dir, templates_dir

TEMPLATE_SUFFIX = ".jinja"


@dataclass(frozen=True)
class CustomTemplates:
    """A directory of template and runtime overrides.

    `path` is where it is; `label` how the user wrote it (the CLI argument or the config value),
    which is what the file headers and the regenerate command record.
    """

    path: Path
    label: str

    def problems(self) -> list[Problem]:
        """What is wrong with the directory: missing, not a directory, or unknown names in it."""
        where = str(self.path)
        if not self.path.exists():
            return [Problem("custom templates directory does not exist", where, fix="create it or fix --templates")]
        if not self.path.is_dir():
            return [Problem("custom templates path is not a directory", where, fix="pass a directory to --templates")]
        known = bundled_names()
        folders = {name.rpartition("/")[0] for name in known if "/" in name}
        problems: list[Problem] = []
        for entry in self._entries():
            name = entry.relative_to(self.path).as_posix()
            if (name in known and entry.is_file()) or (name in folders and entry.is_dir()):
                continue
            if entry.is_dir():
                what = "is a directory that matches no bundled folder"
                fix = "custom templates are files named as `acp-codegen templates --list` prints; remove it"
            else:
                what = "matches no bundled template or runtime source"
                fix = "rename it to a name `acp-codegen templates --list` prints, or remove it"
            problems.append(Problem(f"custom template {name!r} {what}", str(entry), fix=fix))
        return problems

    def _entries(self) -> list[Path]:
        """Files and folders in the directory; inside a folder of runtime sources (`testing/`), its files too."""
        entries: list[Path] = []
        for p in sorted(self.path.iterdir()):
            if p.name.startswith("."):
                continue
            entries.append(p)
            if p.is_dir():
                entries.extend(sorted(c for c in p.iterdir() if not c.name.startswith(".")))
        return entries

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    def file(self, name: str) -> str:
        """How a problem names one of these files: `DIR/name` as the user wrote DIR."""
        return f"{self.label.rstrip('/')}/{name}"


def bundled_templates() -> list[str]:
    """The bundled Jinja templates (`_`-prefixed ones hold macros shared by the others)."""
    return sorted(p.name for p in templates_dir().iterdir() if p.name.endswith(TEMPLATE_SUFFIX))


def bundled_runtime() -> list[str]:
    """The bundled runtime sources, copied verbatim into every package: paths relative to
    runtime/ (`connection.py`, `testing/scripted.py`)."""
    root = runtime_dir()
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def bundled_names() -> list[str]:
    """Every name a custom templates directory may override."""
    return bundled_templates() + bundled_runtime()


def bundled_path(name: str) -> Path:
    return (templates_dir() if name.endswith(TEMPLATE_SUFFIX) else runtime_dir()) / name


def loader(custom: CustomTemplates | None) -> jinja2.BaseLoader:
    bundled = jinja2.FileSystemLoader(str(templates_dir()))
    if custom is None:
        return bundled
    return jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(custom.path)), bundled])


def runtime_source(name: str, custom: CustomTemplates | None) -> str:
    """The text of runtime source `name`: the custom one if the directory has it."""
    path = custom.path / name if custom is not None and custom.has(name) else runtime_dir() / name
    return path.read_text(encoding="utf-8")


def used_templates(env: jinja2.Environment, name: str) -> list[str]:
    """`name` and every template it imports or includes, transitively."""
    seen: list[str] = []
    pending = [name]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.append(current)
        assert env.loader is not None
        try:
            source = env.loader.get_source(env, current)[0]
        except jinja2.TemplateNotFound:  # referenced on a branch that did not render
            continue
        for ref in jinja2.meta.find_referenced_templates(env.parse(source)):
            if ref is not None:
                pending.append(ref)
    return seen


def blame(
    env: jinja2.Environment, custom: CustomTemplates | None, sources: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    """Output file -> the custom files that shaped it (`DIR/name`); files they did not touch are left out.

    `sources` maps each output file to the template (`*.jinja`) or runtime source it comes from;
    a runtime source's header comes from `_runtime_header.jinja`.
    """
    if custom is None:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for path, source in sources.items():
        names = used_templates(env, source) if source.endswith(TEMPLATE_SUFFIX) else [source]
        if not source.endswith(TEMPLATE_SUFFIX):
            names += used_templates(env, "_runtime_header.jinja")
        mine = sorted({n for n in names if custom.has(n)})
        if mine:
            out[path] = tuple(custom.file(n) for n in mine)
    return out


def render_error(exc: Exception, custom: CustomTemplates, output: str) -> CodegenError:
    """A failure while rendering `output` with custom templates, as bad input naming the template line."""
    where = ""
    if isinstance(exc, jinja2.TemplateSyntaxError) and exc.name:
        where = f"{custom.file(exc.name) if custom.has(exc.name) else exc.name}:{exc.lineno}"
    else:
        # Jinja rewrites tracebacks so a template's frames carry its file name and line.
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if frame.filename.endswith(TEMPLATE_SUFFIX):
                name = Path(frame.filename).name
                mine = Path(frame.filename).parent.resolve() == custom.path.resolve()
                shown = custom.file(name) if mine else name
                where = f"{shown}:{frame.lineno}"
                break
    message = exc.message if isinstance(exc, jinja2.TemplateError) and exc.message else str(exc)
    return fail(
        f"rendering {output} with custom templates failed: {type(exc).__name__}: {message}",
        where or custom.label,
        fix="fix the custom template; docs/templates.md lists what every template receives",
    )


def copy_template(name: str, dest: Path, force: bool = False) -> Path:
    """Copy bundled template or runtime source `name` into directory `dest`, as a starting point."""
    known = bundled_names()
    if name not in known:
        raise fail(f"unknown template {name!r}", fix=f"use one of: {', '.join(known)}")
    if dest.exists() and not dest.is_dir():
        raise fail("not a directory", dest, fix="pass a directory to copy the template into")
    target = dest / name
    if target.exists() and not force:
        raise fail("file exists; not overwriting it", target, fix="pass --force to overwrite it")
    try:
        dest.mkdir(parents=True, exist_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bundled_path(name), target)
    except OSError as exc:
        raise fail(f"cannot copy the template: {exc.strerror or exc}", target) from None
    return target
