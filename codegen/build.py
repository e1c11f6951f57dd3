"""Stage 2b — assemble the IR `Package`: definitions + the method table for one role.

Methods come from meta.json (which side handles each). Whether each is a request or a
notification, and its params/result types, come from the evidence build_methods gathers
(`x-method`/`x-side`, `*Request`/`*Response`/`*Notification` naming, the message unions'
variants, inline ones included); conflicting or missing evidence stops with the method's
meta.json entry and the type's JSON pointer. The finished IR is checked by `invariants`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import __version__
from .build_helpers import plan_builders
from .build_keywords import with_keyword_unions
from .build_methods import Evidence, Kind, Leaf, by_naming, gather, stem, suffix_of
from .build_types import TypeBuilder
from .classmodel import build_class_model
from .errors import CodegenError, Problem
from .invariants import check_invariants
from .ir import Builder, Definition, Method, ObjectDef, Package, Side
from .load import LoadedSchema
from .naming import free_name, snake, upper_snake
from .shapes import ptr_escape

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


@dataclass(frozen=True)
class Api:
    """The role-independent part of the IR: every definition and the method table.

    Built once per (schema, unstable) pair; `build_package` adds what a role and target choose.
    """

    schema: LoadedSchema
    definitions: tuple[Definition, ...]
    methods: tuple[Method, ...]
    builders: tuple[Builder, ...] = ()


def build_api(schema: LoadedSchema) -> Api:
    model = build_class_model({"$defs": schema.defs})
    types = TypeBuilder(schema, model)
    definitions = types.build()
    methods = _methods(schema, types, definitions)
    # Result types made for inline response variants join the definitions.
    definitions = with_keyword_unions(tuple(types.out.values()))
    check_invariants(schema, definitions, methods)
    return Api(schema, definitions, methods, plan_builders(definitions, methods))


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
        builders=api.builders,
    )


def _methods(schema: LoadedSchema, types: TypeBuilder, definitions: tuple[Definition, ...]) -> tuple[Method, ...]:
    by_name = {d.name: d for d in definitions}
    ev = gather(schema)
    sides: dict[str, tuple[str, set[str]]] = {}
    pointers: dict[str, str] = {}  # wire name -> where meta.json lists it
    for side, entries in schema.methods.items():
        for key, wire in entries:
            handler, seen = sides.get(wire, (snake(key), set()))
            seen.add(side)
            sides[wire] = (handler, seen)
            pointers.setdefault(wire, f"/{side}Methods/{ptr_escape(key)}")
    problems: list[Problem] = []
    out: list[Method] = []
    for wire, (handler, seen) in sorted(sides.items()):
        shape = _shape(schema, ev, wire, pointers[wire], problems)
        if shape is None:
            continue
        params, result, also_notification = shape
        result_py = None
        if result is not None:
            result_py = types.result_type(
                result.name, result.inline, result.pointer, wire, wire not in schema.stable_methods
            )
        x_sides = {ev.x_side.get(n, "") for n in (params, also_notification, result and result.name) if n}
        handled: Side
        if "protocol" in seen or "both" in x_sides or {"agent", "client"} <= seen:
            handled = "both"
        else:
            handled = "agent" if "agent" in seen else "client"
        params_py = types.py[params]
        doc = _summary(by_name[params_py].doc if params_py in by_name else "")
        notification_py = types.py[also_notification] if also_notification else None
        taken = _field_names(by_name, params_py, notification_py)
        out.append(
            Method(
                wire=wire,
                const=upper_snake(handler),
                handled_by=handled,
                kind="request" if result_py is not None else "notification",
                params=params_py,
                result=result_py,
                handler=handler,
                unstable=wire not in schema.stable_methods,
                doc=doc,
                optional=wire not in BASELINE,
                runtime=wire.startswith("$/"),
                notification_params=notification_py,
                notification_handler=f"{handler}_notification" if also_notification else None,
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


def _shape(
    schema: LoadedSchema, ev: Evidence, wire: str, meta_pointer: str, problems: list[Problem]
) -> tuple[str, Leaf | None, str | None] | None:
    """(params type, result (None: a notification), params type when also sent as a notification).

    Each params type is a request or a notification by its name's suffix and by the message
    union holding it; a result is its response type (`x-method`, naming, or the response
    union's variant named after the request, inline ones included; a null result counts).
    """
    meta = str(schema.files.meta)

    def stop(what: str, fix: str, pointer: str = meta_pointer, file: str = meta) -> None:
        problems.append(Problem(f"method {wire!r} (meta.json {meta_pointer}): {what}", file, pointer, fix))

    tagged = ev.by_method(wire)
    names = tagged or by_naming(wire, list(schema.defs))
    responses = [n for n in names if _kind(ev, n) == "Response"]
    params_types = [n for n in names if _kind(ev, n) != "Response"]
    if not params_types:
        stop(
            "no type describes its params",
            f'add a type with "x-method": "{wire}" to the schema, or drop the method from meta.json',
        )
        return None
    kinds: dict[str, Kind | None] = {}
    for name in params_types:
        by_suffix, by_union = suffix_of(name), ev.in_union(name)
        if by_suffix is not None and by_union is not None and by_suffix != by_union:
            stop(
                f"its params type {name!r} is named a {by_suffix.lower()} but is a variant of a"
                f" {by_union.lower()} union",
                "rename the type or move it to the right union",
                ev.leaves[name].pointer,
                schema.schema_file,
            )
            return None
        kinds[name] = by_suffix or by_union
    requests = [n for n in params_types if kinds[n] == "Request"]
    notifications = [n for n in params_types if kinds[n] == "Notification"]
    unknown = [n for n in params_types if kinds[n] is None]
    if len(responses) > 1 or len(requests) + len(unknown) > 1 or len(notifications) > 1:
        stop(
            "several types claim to be its params or result: " + ", ".join(names),
            f'keep one request (or notification) and one response type with "x-method": "{wire}"',
            f"/$defs/{ptr_escape(names[0])}",
            schema.schema_file,
        )
        return None
    request = next(iter(requests + unknown), None)
    if request is None:  # only a notification type
        if responses:
            stop(
                f"its params type {notifications[0]!r} is a notification, but {responses[0]!r} is its response",
                "name the params type *Request (and list it in the request union), or drop the response",
                f"/$defs/{ptr_escape(responses[0])}",
                schema.schema_file,
            )
            return None
        return notifications[0], None, None
    result = _result(schema, ev, wire, request, responses)
    if result is None:
        if kinds[request] is None:
            stop(
                f"cannot tell whether it is a request or a notification: its params type {request!r} is"
                " named neither *Request nor *Notification, sits in no request or notification union,"
                " and no response type names it",
                f'name the type *Request or *Notification, or give its response type "x-method": "{wire}"',
                f"/$defs/{ptr_escape(request)}",
                schema.schema_file,
            )
        else:
            stop(
                f"request {request!r} has no result type: no response type has"
                f' "x-method": "{wire}", none is named {stem(request) + "Response"!r} or after the'
                " method, and no response union has a variant of such a name",
                f'add the response type with "x-method": "{wire}" (a null result is {{"type": "null"}})',
                f"/$defs/{ptr_escape(request)}",
                schema.schema_file,
            )
        return None
    return request, result, (notifications[0] if notifications else None)


def _kind(ev: Evidence, name: str) -> Kind | None:
    return suffix_of(name) or ev.in_union(name)


def _result(schema: LoadedSchema, ev: Evidence, wire: str, request: str, responses: list[str]) -> Leaf | None:
    """The response type of `request`: one named by x-method/naming, else the one named after it."""
    if responses:
        return Leaf(responses[0], "Response", f"/$defs/{ptr_escape(responses[0])}")
    paired = stem(request) + "Response"
    if paired in schema.defs and ev.x_method.get(paired) is None:
        return Leaf(paired, "Response", f"/$defs/{ptr_escape(paired)}")
    leaf = ev.leaves.get(paired)
    if leaf is not None and leaf.kind == "Response" and leaf.inline is not None:
        return leaf
    # Named after the method rather than the request (`KillTerminalCommandRequest` answered by
    # `KillTerminalResponse`): the one untagged response whose words are the method's, if unique.
    untagged = [n for n in schema.defs if suffix_of(n) == "Response" and n not in ev.x_method and n not in ev.unions]
    untagged += [n for n, leaf in ev.leaves.items() if leaf.kind == "Response" and leaf.inline is not None]
    named = [n for n in by_naming(wire, untagged) if suffix_of(n) == "Response"]
    if named:
        found = ev.leaves.get(named[0])
        if named[0] not in schema.defs and found is not None:
            return found
        return Leaf(named[0], "Response", f"/$defs/{ptr_escape(named[0])}")
    return None


def _summary(doc: str) -> str:
    """The first paragraph that says what the method does (not the UNSTABLE banner)."""
    for paragraph in doc.split("\n\n"):
        text = paragraph.strip()
        if text and text != "**UNSTABLE**" and not text.startswith("This capability is not part of the spec"):
            return text
    return ""
