"""Stage 2b — assemble the IR `Package`: definitions + the method table for one role.

Methods come from meta.json (which side handles each); their params/result types from the
types' `x-method`/`x-side` extensions, falling back to the `*Request`/`*Response`/
`*Notification` naming where a release lacks the extensions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import __version__
from .build_types import TypeBuilder
from .classmodel import build_class_model
from .errors import CodegenError, Problem
from .ir import Definition, Method, ObjectDef, Package, Side
from .load import LoadedSchema
from .naming import free_name, pascal, snake, upper_snake, words

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


@dataclass(frozen=True)
class Api:
    """The role-independent part of the IR: every definition and the method table.

    Built once per (schema, unstable) pair; `build_package` adds what a role and target choose.
    """

    schema: LoadedSchema
    definitions: tuple[Definition, ...]
    methods: tuple[Method, ...]


def build_api(schema: LoadedSchema) -> Api:
    model = build_class_model({"$defs": schema.defs})
    types = TypeBuilder(schema, model)
    definitions = types.build()
    return Api(schema, definitions, _methods(schema, types, definitions))


def build_package(
    schema: LoadedSchema,
    role: Literal["agent", "client"],
    package: str,
    command: str,
) -> Package:
    return assemble(build_api(schema), role, package, command)


def assemble(
    api: Api,
    role: Literal["agent", "client"],
    package: str,
    command: str,
) -> Package:
    """One role's package over a shared `Api`."""
    schema = api.schema
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
        definitions=api.definitions,
        methods=api.methods,
    )


def _methods(schema: LoadedSchema, types: TypeBuilder, definitions: tuple[Definition, ...]) -> tuple[Method, ...]:
    by_name = {d.name: d for d in definitions}
    tagged: dict[str, list[str]] = {}
    for py, (_, wire) in types.method_types.items():
        tagged.setdefault(wire, []).append(py)
    sides: dict[str, tuple[str, set[str]]] = {}
    pointers: dict[str, str] = {}  # wire name -> where meta.json lists it
    for side, entries in schema.methods.items():
        for key, wire in entries:
            handler, seen = sides.get(wire, (snake(key), set()))
            seen.add(side)
            sides[wire] = (handler, seen)
            pointers.setdefault(wire, f"/{side}Methods/{key}")
    problems: list[Problem] = []
    out: list[Method] = []
    for wire, (handler, seen) in sorted(sides.items()):
        names = tagged.get(wire) or _by_naming(wire, by_name)
        result = next((n for n in names if n.endswith("Response")), None)
        candidates = [n for n in names if not n.endswith("Response")]
        params = next((n for n in candidates if not n.endswith("Notification")), None) if result else None
        params = params or next(iter(candidates), None)
        # Both a request and a notification type for one method: it can be sent either way.
        also_notification = next((n for n in candidates if n != params and n.endswith("Notification")), None)
        if params is None:
            problems.append(
                Problem(
                    f"meta.json lists method {wire!r} but no type describes its params",
                    str(schema.files.meta),
                    pointers[wire],
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
        doc = _summary(by_name[params].doc if params in by_name else "")
        taken = _field_names(by_name, params, also_notification if is_request else None)
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
                doc=doc,
                optional=wire not in BASELINE,
                runtime=wire.startswith("$/"),
                notification_params=also_notification if is_request else None,
                notification_handler=f"{handler}_notification" if is_request and also_notification else None,
                receiver=free_name("self", taken, "_self"),
                timeout_arg=free_name("timeout", taken, "timeout_"),
            )
        )
    if problems:
        raise CodegenError(problems)
    return tuple(out)


def _field_names(by_name: dict[str, Definition], *params: str | None) -> set[str]:
    """The Python field names of the params types: a proxy's keyword-form arguments."""
    return {f.py for name in params if name for d in [by_name.get(name)] if isinstance(d, ObjectDef) for f in d.fields}


def _by_naming(wire: str, by_name: dict[str, Definition]) -> list[str]:
    """Without x-method: the `*Request`/`*Response`/`*Notification` types named after the method.

    A candidate's words must all come from the method name; the one holding the method's last
    word (its action: `session/cancel` -> CancelNotification) wins, then the larger overlap.
    A tie is left unmapped (the caller reports it) rather than guessed.
    """
    want_words = [_stem(w) for w in words(pascal(wire.replace("/", "_")))]
    want = set(want_words)
    best: dict[str, list[tuple[tuple[bool, int], str]]] = {}
    for name in by_name:
        suffix = next((s for s in _SUFFIXES if name.endswith(s)), None)
        if suffix is None or name == suffix:
            continue
        have = {_stem(w) for w in words(name[: -len(suffix)])}
        if not have or not have <= want:
            continue
        kind = "Response" if suffix == "Response" else "params"
        best.setdefault(kind, []).append(((want_words[-1] in have, len(have)), name))
    found: list[str] = []
    for ranked in best.values():
        ranked.sort(reverse=True)
        if len(ranked) == 1 or ranked[0][0] != ranked[1][0]:
            found.append(ranked[0][1])
    return found


def _stem(word: str) -> str:
    """`Sessions` -> `session`: method names say `session/list`, types `ListSessionsRequest`."""
    word = word.lower()
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _summary(doc: str) -> str:
    """The first paragraph that says what the method does (not the UNSTABLE banner)."""
    for paragraph in doc.split("\n\n"):
        text = paragraph.strip()
        if text and text != "**UNSTABLE**" and not text.startswith("This capability is not part of the spec"):
            return text
    return ""
