"""Stage 1 — load: find, read and check the ACP schema files.

Produces a `LoadedSchema`: the raw `$defs`, the method lists of meta.json by side, the
release name and the sha256 of what was read. Everything that can be wrong with the files
themselves is reported here as a `Problem` with the file and JSON pointer.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CodegenError, Problem, fail
from .resources import bundled_schema_dir, bundled_schema_names

META_SIDES = ("agentMethods", "clientMethods", "protocolMethods")


@dataclass(frozen=True)
class SchemaFiles:
    """Where a schema lives: its directory, the files used and how the user named it."""

    label: str
    schema: Path
    meta: Path
    stable_schema: Path | None = None
    stable_meta: Path | None = None


@dataclass
class LoadedSchema:
    """The checked raw schema: what the IR stage reads."""

    files: SchemaFiles
    release: str
    sha256: str
    defs: dict[str, Any]
    # side ("agent" | "client" | "protocol") -> (meta key, wire method name), in meta.json order
    methods: dict[str, list[tuple[str, str]]]
    unstable: bool
    protocol_version: int = 1
    stable_defs: frozenset[str] = field(default_factory=frozenset)
    stable_methods: frozenset[str] = field(default_factory=frozenset)

    @property
    def schema_file(self) -> str:
        return str(self.files.schema)

    def resolve(self, ref: str, pointer: str) -> tuple[str, Any]:
        """Resolve a local `#/$defs/Name` reference to (Name, node)."""
        prefix = "#/$defs/"
        if not ref.startswith(prefix):
            raise fail(
                f"unsupported $ref {ref!r}",
                self.schema_file,
                pointer,
                "only local references of the form #/$defs/Name are supported",
            )
        name = ref[len(prefix) :].replace("~1", "/").replace("~0", "~")
        if name not in self.defs:
            raise fail(
                f"dangling $ref {ref!r}: no $defs entry {name!r}",
                self.schema_file,
                pointer,
                f"add {name!r} under $defs or correct the reference",
            )
        return name, self.defs[name]


def locate(schema: str | None, unstable: bool) -> SchemaFiles:
    """Turn the --schema argument into file paths (bundled name, directory or schema.json)."""
    name = schema or "v1"
    if name in bundled_schema_names():
        directory = bundled_schema_dir(name)
        label = name
    else:
        given = Path(name)
        if given.is_dir():
            directory = given
        elif given.is_file() or given.suffix == ".json":
            if not given.exists():
                raise fail(
                    "schema file not found",
                    given,
                    fix="pass a bundled name (" + ", ".join(bundled_schema_names()) + ") or an existing path",
                )
            directory = given.parent
            if given.name not in ("schema.json", "schema.unstable.json"):
                meta = directory / "meta.json"
                return SchemaFiles(str(given), given, meta)
        else:
            raise fail(
                f"no such schema: {name!r}",
                fix="pass a bundled name (" + ", ".join(bundled_schema_names()) + "), a directory "
                "holding schema.json + meta.json, or a schema.json path",
            )
        label = str(given)
    if unstable:
        return SchemaFiles(
            label,
            directory / "schema.unstable.json",
            directory / "meta.unstable.json",
            directory / "schema.json",
            directory / "meta.json",
        )
    return SchemaFiles(label, directory / "schema.json", directory / "meta.json")


def _read_json(path: Path, what: str) -> tuple[Any, bytes]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise fail(f"{what} not found", path, fix=f"create {path.name} or point --schema elsewhere") from None
    except IsADirectoryError:
        raise fail(f"{what} is a directory, not a file", path, fix="pass the file itself") from None
    except OSError as exc:
        raise fail(f"{what} cannot be read: {exc.strerror}", path, fix="check permissions") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(
            f"{what} is not UTF-8 (bad byte at offset {exc.start})", path, fix="save the file as UTF-8"
        ) from None
    if not text.strip():
        raise fail(f"{what} is empty", path, fix="supply the ACP JSON schema")
    try:
        return json.loads(text), raw
    except json.JSONDecodeError as exc:
        raise fail(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            path,
            fix="repair the JSON syntax",
        ) from None
    except RecursionError:
        raise fail(f"{what} is nested too deeply to parse", path, fix="flatten the document") from None


def _check_schema(doc: Any, path: Path) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise fail(f"schema must be a JSON object, found {type(doc).__name__}", path, "", "supply the ACP schema.json")
    defs = doc.get("$defs")
    if defs is None:
        raise fail(
            "schema has no $defs: every ACP type lives under $defs",
            path,
            "/$defs",
            "use an ACP schema.json (JSON Schema 2020-12 with $defs)",
        )
    if not isinstance(defs, dict) or not defs:
        raise fail("$defs must be a non-empty object", path, "/$defs", "list the ACP types under $defs")
    problems = [
        Problem("type definition must be an object", str(path), f"/$defs/{name}", "fix the definition")
        for name, node in defs.items()
        if not isinstance(node, dict)
    ]
    if problems:
        raise CodegenError(problems)
    return defs


def _check_meta(doc: Any, path: Path) -> dict[str, list[tuple[str, str]]]:
    if not isinstance(doc, dict):
        raise fail(
            f"meta.json must be a JSON object, found {type(doc).__name__}",
            path,
            fix='supply {"agentMethods": {...}, "clientMethods": {...}}',
        )
    if "agentMethods" not in doc and "clientMethods" not in doc:
        raise fail(
            "meta.json lists no methods (no agentMethods / clientMethods)",
            path,
            fix="use the meta.json published with the ACP schema",
        )
    sides: dict[str, list[tuple[str, str]]] = {}
    if "version" in doc and not isinstance(doc["version"], int):
        problems_v = [Problem("version must be an integer (the protocol version)", str(path), "/version")]
        raise CodegenError(problems_v)
    problems: list[Problem] = []
    for key in META_SIDES:
        entries = doc.get(key, {})
        if not isinstance(entries, dict):
            problems.append(Problem(f"{key} must be an object of name -> wire method", str(path), f"/{key}"))
            continue
        wire: list[tuple[str, str]] = []
        for short, method in entries.items():
            if not isinstance(method, str) or not method:
                problems.append(Problem("method name must be a non-empty string", str(path), f"/{key}/{short}"))
            else:
                wire.append((str(short), method))
        sides[key.removesuffix("Methods")] = wire
    if problems:
        raise CodegenError(problems)
    return sides


_RELEASE_LINE = re.compile(r'^release\s*=\s*"([^"]+)"', re.M)
_CHANGELOG_RELEASE = re.compile(r"^## \[(\d[^\]]*)\]", re.M)


def _release(directory: Path, meta: dict[str, Any]) -> str:
    """The upstream release: VERSION file, else CHANGELOG.md, else meta.json's version."""
    for fname, pattern in (("VERSION", _RELEASE_LINE), ("CHANGELOG.md", _CHANGELOG_RELEASE)):
        try:
            found = pattern.search((directory / fname).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        if found:
            return found.group(1)
    version = meta.get("version")
    return f"protocol-v{version}" if isinstance(version, int) else "unknown"


def load(files: SchemaFiles) -> LoadedSchema:
    doc, raw_schema = _read_json(files.schema, "schema")
    defs = _check_schema(doc, files.schema)
    meta_doc, raw_meta = _read_json(files.meta, "meta.json")
    methods = _check_meta(meta_doc, files.meta)
    digest = hashlib.sha256(raw_schema + b"\0" + raw_meta).hexdigest()
    stable_defs: frozenset[str] = frozenset(defs)
    stable_methods = frozenset(m for ms in methods.values() for _, m in ms)
    unstable = files.stable_schema is not None
    if files.stable_schema is not None and files.stable_meta is not None:
        sdoc, _ = _read_json(files.stable_schema, "stable schema")
        stable_defs = frozenset(_check_schema(sdoc, files.stable_schema))
        smeta, _ = _read_json(files.stable_meta, "stable meta.json")
        stable_methods = frozenset(m for ms in _check_meta(smeta, files.stable_meta).values() for _, m in ms)
    return LoadedSchema(
        files=files,
        release=_release(files.schema.parent, meta_doc),
        sha256=digest,
        defs=defs,
        methods=methods,
        unstable=unstable,
        protocol_version=meta_doc["version"] if isinstance(meta_doc.get("version"), int) else 1,
        stable_defs=stable_defs,
        stable_methods=stable_methods,
    )
