"""Stage 2b — assemble the IR `Package`: definitions + the method table for one role.

Methods come from meta.json (which side handles each); their params/result types from the
types' `x-method`/`x-side` extensions, falling back to the `*Request`/`*Response`/
`*Notification` naming where a release lacks the extensions.
"""

from __future__ import annotations

from typing import Literal

from . import __version__
from .build_types import TypeBuilder
from .classmodel import build_class_model
from .errors import CodegenError, Problem
from .ir import Definition, Method, Package, Side
from .load import LoadedSchema
from .naming import pascal, snake, upper_snake, words

# The methods overview.mdx lists as baseline: every implementation must handle them, so the
# generated base class leaves them abstract. Everything else answers -32601 until overridden.
BASELINE = frozenset(
    {
        "initialize",
        "authenticate",
        "session/new",
        "session/prompt",
        "session/cancel",
        "session/request_permission",
        "session/update",
    }
)
_SUFFIXES = ("Request", "Response", "Notification")


def build_package(
    schema: LoadedSchema,
    role: Literal["agent", "client"],
    package: str,
    command: str,
) -> Package:
    model = build_class_model({"$defs": schema.defs})
    types = TypeBuilder(schema, model)
    definitions = types.build()
    methods = _methods(schema, types, definitions)
    return Package(
        role=role,
        package=package,
        release=schema.release,
        sha256=schema.sha256,
        schema_label=schema.files.label,
        generator_version=__version__,
        command=command,
        protocol_version=schema.protocol_version,
        unstable=schema.unstable,
        definitions=definitions,
        methods=methods,
    )


def _methods(schema: LoadedSchema, types: TypeBuilder, definitions: tuple[Definition, ...]) -> tuple[Method, ...]:
    by_name = {d.name: d for d in definitions}
    tagged: dict[str, list[str]] = {}
    for py, (_, wire) in types.method_types.items():
        tagged.setdefault(wire, []).append(py)
    sides: dict[str, tuple[str, set[str]]] = {}
    for side, entries in schema.methods.items():
        for key, wire in entries:
            handler, seen = sides.get(wire, (snake(key), set()))
            seen.add(side)
            sides[wire] = (handler, seen)
    problems: list[Problem] = []
    out: list[Method] = []
    for wire, (handler, seen) in sorted(sides.items()):
        names = tagged.get(wire) or _by_naming(wire, by_name)
        params = next((n for n in names if not n.endswith("Response")), None)
        result = next((n for n in names if n.endswith("Response")), None)
        if params is None:
            problems.append(
                Problem(
                    f"meta.json lists method {wire!r} but no type describes its params",
                    str(schema.files.meta),
                    "",
                    f'add a type with "x-method": "{wire}" to the schema, or drop the method',
                )
            )
            continue
        x_sides = {types.method_types.get(n, ("", ""))[0] for n in names}
        handled: Side
        if "protocol" in seen or "both" in x_sides or {"agent", "client"} <= seen:
            handled = "both"
        else:
            handled = "agent" if "agent" in seen else "client"
        is_request = result is not None and not params.endswith("Notification")
        doc = by_name[params].doc if params in by_name else ""
        out.append(
            Method(
                wire=wire,
                const=upper_snake(handler),
                handled_by=handled,
                kind="request" if is_request else "notification",
                params=params,
                result=result if is_request else None,
                handler=handler,
                unstable=wire not in schema.stable_methods,
                doc=doc.split("\n\n")[0],
                optional=wire not in BASELINE,
                runtime=wire.startswith("$/"),
            )
        )
    if problems:
        raise CodegenError(problems)
    return tuple(out)


def _by_naming(wire: str, by_name: dict[str, Definition]) -> list[str]:
    """Without x-method: the `*Request/*Response/*Notification` types sharing the most words."""
    want = {w.lower() for w in words(pascal(wire.replace("/", "_")))}
    best: dict[str, tuple[int, str]] = {}
    for name in by_name:
        suffix = next((s for s in _SUFFIXES if name.endswith(s)), None)
        if suffix is None:
            continue
        have = {w.lower() for w in words(name[: -len(suffix)])}
        score = len(want & have) * 10 - len(have - want)
        kind = "Response" if suffix == "Response" else "params"
        if len(want & have) == len(want) and (kind not in best or score > best[kind][0]):
            best[kind] = (score, name)
    return [name for _, name in best.values()]
