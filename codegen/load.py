"""Stage 1 — load: find, read and check the ACP schema files.

Produces a `LoadedSchema`: the raw `$defs`, the method lists of meta.json by side, the
release name and the sha256 of what was read. Everything that can be wrong with the files
themselves is reported here as a `Problem` with the file and JSON pointer.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .errors import CodegenError, Problem, fail
from .resources import bundled_schema_dir, bundled_schema_names

META_SIDES = ("agentMethods", "clientMethods", "protocolMethods")
_T = TypeVar("_T")


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


def _schema_choices() -> str:
    return (
        "a bundled schema name (" + ", ".join(bundled_schema_names()) + "), a directory holding "
        "schema.json + meta.json, or the path of a schema.json"
    )


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
                raise fail("--schema: schema file not found", given, fix=f"pass {_schema_choices()}")
            directory = given.parent
            if given.name not in ("schema.json", "schema.unstable.json"):
                meta = directory / "meta.json"
                return SchemaFiles(str(given), given, meta)
        else:
            raise fail(
                f"--schema {name!r} is neither a bundled schema nor an existing file or directory",
                fix=f"pass {_schema_choices()}",
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


# The largest ACP schema file is ~0.4 MB; anything far beyond is not an ACP schema.
MAX_BYTES = 16 * 1024 * 1024


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number"}
    return "null" if value is None else names.get(type(value), "a number")


def _read_json(path: Path, what: str) -> tuple[Any, bytes]:
    fix_missing = f"create {path.name} or point --schema elsewhere"
    if what.startswith("unstable"):
        fix_missing = f"drop --unstable (this schema has no {path.name}) or point --schema elsewhere"
    try:
        if path.is_symlink() and not path.exists():
            raise fail(f"{what} is a symbolic link to a missing file ({os.readlink(path)})", path, fix=fix_missing)
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise fail(
                f"{what} is {size} bytes; acp-codegen reads at most {MAX_BYTES}",
                path,
                fix="check this is the ACP schema (ACP releases are under 1 MB)",
            )
        raw = path.read_bytes()
    except FileNotFoundError:
        raise fail(f"{what} not found", path, fix=fix_missing) from None
    except IsADirectoryError:
        raise fail(f"{what} is a directory, not a file", path, fix=f"put the {path.name} file there") from None
    except OSError as exc:
        raise fail(
            f"{what} cannot be read: {exc.strerror}", path, fix="check the file's permissions (it must be readable)"
        ) from None
    if path.is_dir():  # some platforms read a directory as empty instead of failing
        raise fail(f"{what} is a directory, not a file", path, fix=f"put the {path.name} file there")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(
            f"{what} is not UTF-8 (invalid byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            path,
            fix="save the file as UTF-8",
        ) from None
    if not text.strip():
        raise fail(f"{what} is empty", path, fix=f"supply the ACP {path.name}")
    try:
        return json.loads(text), raw
    except json.JSONDecodeError as exc:
        raise fail(
            f"{what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            path,
            fix="repair the JSON syntax",
        ) from None
    except RecursionError:
        raise fail(f"{what} is nested too deeply to parse", path, fix="flatten the document") from None


def _check_schema(doc: Any, path: Path) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise fail(
            f"schema must be a JSON object, found {_kind(doc)}",
            path,
            "",
            'supply the ACP schema.json: {"$defs": {...}}',
        )
    defs = doc.get("$defs")
    if defs is None:
        older = "definitions" in doc
        raise fail(
            "schema has no $defs: every ACP type lives under $defs",
            path,
            "/$defs",
            "rename definitions to $defs (and #/definitions/ refs to #/$defs/)"
            if older
            else "use an ACP schema.json (JSON Schema 2020-12 with $defs)",
        )
    if not isinstance(defs, dict) or not defs:
        found = "an empty object" if isinstance(defs, dict) else _kind(defs)
        raise fail(
            f"$defs must be a non-empty object of type name -> schema, found {found}",
            path,
            "/$defs",
            "list the ACP types under $defs",
        )
    problems = [
        Problem(
            f"type definition must be a JSON object, found {_kind(node)}",
            str(path),
            "/$defs/" + name.replace("~", "~0").replace("/", "~1"),
            'write the type as a schema object, e.g. {"type": "object", "properties": {...}}',
        )
        for name, node in defs.items()
        if not isinstance(node, dict)
    ]
    if problems:
        raise CodegenError(problems)
    return defs


def _check_meta(doc: Any, path: Path) -> dict[str, list[tuple[str, str]]]:
    example = '{"version": 1, "agentMethods": {"initialize": "initialize", ...}, "clientMethods": {...}}'
    if not isinstance(doc, dict):
        raise fail(f"meta.json must be a JSON object, found {_kind(doc)}", path, fix=f"supply {example}")
    if "agentMethods" not in doc and "clientMethods" not in doc:
        raise fail(
            "meta.json lists no methods (no agentMethods / clientMethods)",
            path,
            fix="use the meta.json published with the ACP schema",
        )
    problems: list[Problem] = []
    if "version" in doc and (isinstance(doc["version"], bool) or not isinstance(doc["version"], int)):
        problems.append(
            Problem(
                f"version must be an integer (the protocol version), found {_kind(doc['version'])}",
                str(path),
                "/version",
                'write "version": 1',
            )
        )
    sides: dict[str, list[tuple[str, str]]] = {}
    for key in META_SIDES:
        entries = doc.get(key, {})
        if not isinstance(entries, dict):
            problems.append(
                Problem(
                    f"{key} must be an object of handler name -> wire method name, found {_kind(entries)}",
                    str(path),
                    f"/{key}",
                    f'write "{key}": {{"session_new": "session/new", ...}}',
                )
            )
            continue
        wire: list[tuple[str, str]] = []
        for short, method in entries.items():
            pointer = f"/{key}/" + short.replace("~", "~0").replace("/", "~1")
            if not isinstance(method, str) or not method.strip():
                found = "an empty string" if isinstance(method, str) else _kind(method)
                problems.append(
                    Problem(
                        f"method name must be a non-empty string, found {found}",
                        str(path),
                        pointer,
                        'give the wire method name, e.g. "session/new"',
                    )
                )
            elif not short or not any(c.isalnum() for c in short):
                problems.append(
                    Problem(
                        f"handler name {short!r} has no letters or digits to make a Python method name from",
                        str(path),
                        pointer,
                        'use the method\'s name in snake_case, e.g. "session_new"',
                    )
                )
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


def _attempt(problems: list[Problem], step: Callable[[], _T]) -> _T | None:
    """Run one check; on bad input record its problems and go on with the next file."""
    try:
        return step()
    except CodegenError as exc:
        problems.extend(exc.problems)
        return None


def load(files: SchemaFiles) -> LoadedSchema:
    """Read and check schema.json and meta.json; problems of both files are reported together."""
    unstable = files.stable_schema is not None
    problems: list[Problem] = []
    schema_read = _attempt(problems, lambda: _read_json(files.schema, "unstable schema" if unstable else "schema"))
    defs = _attempt(problems, lambda: _check_schema(schema_read[0], files.schema)) if schema_read else None
    meta_read = _attempt(problems, lambda: _read_json(files.meta, "unstable meta.json" if unstable else "meta.json"))
    methods = _attempt(problems, lambda: _check_meta(meta_read[0], files.meta)) if meta_read else None
    if problems or schema_read is None or defs is None or meta_read is None or methods is None:
        raise CodegenError(problems)
    raw_schema = schema_read[1]
    meta_doc, raw_meta = meta_read
    digest = hashlib.sha256(raw_schema + b"\0" + raw_meta).hexdigest()
    stable_defs: frozenset[str] = frozenset(defs)
    stable_methods = frozenset(m for ms in methods.values() for _, m in ms)
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
