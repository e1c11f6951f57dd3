"""Stage 2c — the builders of `helpers.py`, decided from the schema (no class name is assumed).

The unions are found by where the protocol uses them: `SessionUpdate` is the `update` field of
the `session/update` params, `ContentBlock` the item of the `session/prompt` params' `prompt`,
`ToolCallContent` the item of a tool-call update's `content`; variants are found by their tag.

1. The official Python SDK's builders (`acp.helpers`, 0.12.1), with its names and parameters
   and the same JSON on the same call. One is generated only where it fits the schema: its
   variant exists, every field it sets exists (a value it fixes, such as `kind="read"`, is one
   the field takes) and it sets every required field. Otherwise it is left out (in v2 a message
   chunk requires a `messageId`, which `update_agent_message(content)` cannot give).
   The SDK's own parameters keep the SDK's meaning: `None` leaves the field out.
   Every other field of the variant follows as a keyword-only parameter defaulting to
   `types.UNSET` (absent), where `None` is JSON null as everywhere in the generated types.
2. A builder for every other variant of `SessionUpdate`, `ContentBlock` and `ToolCallContent`,
   all keyword-only: `update_<tag>` (`_update`/`_chunk` dropped where that name is free; a list
   field named like the tag's plural names it: `update_config_options`), `<tag>_block`,
   `tool_<tag>_content`.

A field with a schema default is never a builder parameter (the builder leaves it at its default).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from .errors import CodegenError, Problem
from .ir import (
    AliasDef,
    Builder,
    BuilderExpr,
    BuilderParam,
    Const,
    Definition,
    DictExpr,
    EnumDef,
    Field,
    ListExpr,
    ListOf,
    LiteralOf,
    Method,
    Named,
    New,
    ObjectDef,
    Ref,
    Scalar,
    TypeExpr,
    UnionDef,
)
from .naming import is_identifier, snake
from .sdk_builders import CONTENT, PLAIN, SDK_ORDER, TEXT_FORMS, TOOL, UPDATE, P, kw


class HelperPlanner:
    """Decides the builders for one schema's definitions and methods."""

    def __init__(self, definitions: tuple[Definition, ...], methods: tuple[Method, ...]) -> None:
        self.defs = {d.name: d for d in definitions}
        self.methods = {m.wire: m for m in methods}
        self.unions: dict[str, UnionDef] = {}
        self.out: list[Builder] = []
        self.done: set[tuple[str, str]] = set()  # (union role, tag) with a builder
        for role, found in ((UPDATE, self._update_union()), (CONTENT, self._content_union())):
            if found is not None:
                self.unions[role] = found
        tool = self._tool_union()
        if tool is not None:
            self.unions[TOOL] = tool

    # -- finding the unions and their variants --------------------------------------------
    def _params_field(self, wire: str, field: str) -> TypeExpr | None:
        method = self.methods.get(wire)
        params = self.defs.get(method.params) if method and method.params else None
        if isinstance(params, ObjectDef):
            return next((f.type for f in params.fields if f.py == field), None)
        return None

    def _union(self, t: TypeExpr | None) -> UnionDef | None:
        if isinstance(t, ListOf):
            t = t.item
        found = self.defs.get(t.name) if isinstance(t, Named) else None
        return found if isinstance(found, UnionDef) else None

    def _update_union(self) -> UnionDef | None:
        return self._union(self._params_field("session/update", "update"))

    def _content_union(self) -> UnionDef | None:
        return self._union(self._params_field("session/prompt", "prompt"))

    def _tool_union(self) -> UnionDef | None:
        for tag in ("tool_call_update", "tool_call"):
            content = _field(self.variant(UPDATE, tag), "content")
            union = self._union(content.type) if content else None
            if union is not None:
                return union
        return None

    def variant(self, role: str, tag: str) -> ObjectDef | None:
        """The object variant of union `role` with tag `tag`, if the schema has it."""
        return next((obj for t, obj in self.tagged(role) if t == tag), None)

    def object_of(self, t: TypeExpr) -> ObjectDef | None:
        """The object type `t` names (or the items of list `t` name)."""
        if isinstance(t, ListOf):
            t = t.item
        found = self.defs.get(t.name) if isinstance(t, Named) else None
        return found if isinstance(found, ObjectDef) else None

    def tagged(self, role: str) -> Iterator[tuple[str, ObjectDef]]:
        union = self.unions.get(role)
        for v in union.variants if union else ():
            found = self.object_of(v.type)
            if v.tag_value is not None and found is not None:
                yield v.tag_value, found

    def takes(self, f: Field, value: str) -> bool:
        """A fixed string `value` fits field `f` (a string, or an enum that has it)."""
        t = self.alias_target(f.type)
        if isinstance(t, Scalar):
            return t.kind in ("str", "json")
        if isinstance(t, LiteralOf):
            return value in t.values
        target = self.defs.get(t.name) if isinstance(t, Named) else None
        return isinstance(target, EnumDef) and (target.open or value in [v.value for v in target.values])

    def alias_target(self, t: TypeExpr) -> TypeExpr:
        while isinstance(t, Named) and isinstance(self.defs.get(t.name), AliasDef):
            alias = self.defs[t.name]
            assert isinstance(alias, AliasDef)
            t = alias.target
        return t

    # -- building ---------------------------------------------------------------------------
    def sdk_builder(
        self,
        name: str,
        obj: ObjectDef | None,
        params: tuple[P, ...],
        fixed: dict[str, BuilderExpr] | None = None,
        extra_params: tuple[BuilderParam, ...] = (),
    ) -> Builder | None:
        """The SDK builder `name` over `obj`, or None where it does not fit (see the module doc)."""
        if obj is None:
            return None
        fixed = fixed or {}
        fields = {f.py: f for f in obj.fields}
        if any(k not in fields or fields[k].default is not None for k in fixed):
            return None
        made: list[BuilderParam] = []
        args: dict[str, BuilderExpr] = dict(fixed)
        for p in params:
            f = fields.get(p.target)
            if f is None or f.default is not None or (p.optional and f.required):
                return None
            if p.iterable and not isinstance(f.type, ListOf):
                return None
            if p.default is not None and not self.takes(f, p.default):
                return None
            default = "None" if p.optional else (repr(p.default) if p.default is not None else None)
            made.append(
                BuilderParam(
                    p.name,
                    f.type,
                    default,
                    p.keyword_only,
                    nullable=f.nullable or p.optional,
                    iterable=p.iterable,
                )
            )
            args[f.py] = Ref(p.name, absent_if_none=p.optional, to_list=p.iterable)
        made += extra_params
        if any(f.required and f.py not in args for f in obj.fields):
            return None
        return self.finish(name, obj, made, args, sdk=True)

    def finish(
        self, name: str, obj: ObjectDef, params: list[BuilderParam], args: dict[str, BuilderExpr], sdk: bool
    ) -> Builder:
        """Every field not set yet and without a default becomes a keyword-only parameter."""
        taken = {p.name for p in params}
        for f in obj.fields:
            # A field named `types` would shadow the module the body builds with: left to the class.
            if f.py in args or f.default is not None or f.py in taken or f.py == "types":
                continue
            optional = not f.required
            params.append(
                BuilderParam(
                    f.py, f.type, "types.UNSET" if optional else None, True, nullable=f.nullable, unset=optional
                )
            )
            args[f.py] = Ref(f.py)
        # Required keyword-only parameters first: the order a reader expects (mypy does not mind).
        params.sort(key=lambda p: (p.keyword_only, p.keyword_only and p.default is not None))
        body = New(obj.name, tuple((f.py, args[f.py]) for f in obj.fields if f.py in args))
        what = "the official SDK's builder of the same name" if sdk else "every field as a keyword"
        unstable = "\n\n**UNSTABLE**: only in the unstable schema." if obj.unstable else ""
        doc = f"`types.{obj.name}`, {what}.\n\n{_summary(obj.doc)}".strip() + unstable
        return Builder(name, tuple(params), body, doc, sdk)

    def add(self, builder: Builder | None, role: str = "", tag: str = "") -> Builder | None:
        if builder is not None:
            self.out.append(builder)
            if role:
                self.done.add((role, tag))
        return builder


def _field(obj: ObjectDef | None, py: str) -> Field | None:
    return next((f for f in obj.fields if f.py == py), None) if obj else None


def _summary(doc: str) -> str:
    first = doc.strip().split("\n\n")[0].strip()
    return "" if first == "**UNSTABLE**" else first


def _text_forms(h: HelperPlanner, made: dict[str, Builder]) -> None:
    """`update_agent_message_text(text)`: the chunk of a text block."""
    text_block = made.get("text_block")
    content = h.unions.get(CONTENT)
    if text_block is None or content is None:
        return
    text = next(p for p in text_block.params if p.name == "text")
    for ((name, _, tag, _),) in ((x,) for x in PLAIN if x[0] in TEXT_FORMS):
        chunk = h.variant(UPDATE, tag)
        field = _field(chunk, "content")
        if name not in made or field is None or field.type != Named(content.name, "union"):
            continue
        block = New(text_block.body.cls, (("text", Ref("text")),))
        param = BuilderParam("text", text.type, None, False)
        h.add(h.sdk_builder(f"{name}_text", chunk, (), {"content": block}, (param,)))


_EDIT_CONTENT_DOC = (
    "\n\n`content` is the edit's payload, kept as the SDK keeps it: in `raw_input` as\n"
    "`{\"path\": path, \"content\": content}`, any JSON value. A generated object there (such as a\n"
    "`tool_diff_content(...)` diff) encodes as its own `to_dict()`, at any depth; a value JSON\n"
    "cannot hold (a set, NaN, ...) raises TypeError or ValueError naming its path\n"
    "(`rawInput.content...`) when the call is encoded. To show the edit in the client's UI, pass\n"
    "content blocks in `extra_options`."
)


def _tool_call_forms(h: HelperPlanner) -> None:
    """`start_read_tool_call` / `start_edit_tool_call`: a pending read or edit of one path."""
    start = h.variant(UPDATE, "tool_call")
    locations = _field(start, "locations")
    raw_input = _field(start, "raw_input")
    kind, status = _field(start, "kind"), _field(start, "status")
    if None in (start, locations, raw_input, kind, status):
        return
    assert start and locations and raw_input and kind and status
    location = h.object_of(locations.type) if isinstance(locations.type, ListOf) else None
    path = _field(location, "path")
    if location is None or path is None or raw_input.type not in (Scalar("json"), Scalar("object")):
        return
    if any(f.required and f.py != "path" for f in location.fields) or not h.takes(status, "pending"):
        return
    at = New(location.name, (("path", Ref("path")),))
    options = P("extra_options", "content", keyword_only=True, optional=True, iterable=True)
    for name, value, raw in (("start_read_tool_call", "read", ()), ("start_edit_tool_call", "edit", ("content",))):
        if not h.takes(kind, value):
            continue
        params = [BuilderParam("path", path.type, None, False)]
        params += [BuilderParam(r, Scalar("json"), None, False) for r in raw]
        fixed: dict[str, BuilderExpr] = {
            "kind": Const(value),
            "status": Const("pending"),
            "locations": ListExpr((at,)),
            "raw_input": DictExpr(tuple((k, Ref(k)) for k in ("path", *raw))),
        }
        built = h.sdk_builder(name, start, (P("tool_call_id"), P("title"), options), fixed, tuple(params))
        if built is not None and raw:
            # The SDK puts `content` in raw input; say so, and that objects in it encode right.
            built = replace(built, doc=built.doc + _EDIT_CONTENT_DOC)
        h.add(built)


def _objects(h: HelperPlanner) -> None:
    """The SDK builders of objects that are no union variant: plan entries, resources, the notification."""
    entries = _field(h.variant(UPDATE, "plan"), "entries")
    entry = h.object_of(entries.type) if entries else None
    if entry is not None:
        priority = P("priority", keyword_only=True, default="medium")
        h.add(
            h.sdk_builder(
                "plan_entry", entry, (P("content"), priority, P("status", keyword_only=True, default="pending"))
            )
        )
    method = h.methods.get("session/update")
    notification = h.defs.get(method.params) if method and method.params else None
    if isinstance(notification, ObjectDef) and UPDATE in h.unions:
        h.add(h.sdk_builder("session_notification", notification, (P("session_id"), P("update"))))
    field = _field(h.variant(CONTENT, "resource"), "resource")
    resource = h._union(field.type) if field else None
    for name, key in (("embedded_text_resource", "text"), ("embedded_blob_resource", "blob")):
        for v in resource.variants if resource else ():
            found = h.object_of(v.type)
            if found is not None and any(f.py == key and f.required for f in found.fields):
                h.add(h.sdk_builder(name, found, (P("uri"), P(key), kw("mime_type"))))
                break


def _generic_names(h: HelperPlanner, role: str, taken: set[str]) -> list[tuple[str, ObjectDef]]:
    """(name, variant) for each variant of `role` without an SDK builder (see the module doc)."""
    rest = [(tag, obj) for tag, obj in h.tagged(role) if (role, tag) not in h.done]

    def short(tag: str, obj: ObjectDef) -> str:
        if role == CONTENT:
            return f"{snake(tag)}_block"
        if role == TOOL:
            return f"tool_{snake(tag)}_content"
        stem = snake(tag.removesuffix("_update").removesuffix("_chunk"))
        lists = [f.py for f in obj.fields if f.required and isinstance(f.type, ListOf)]
        return f"update_{stem}s" if lists == [f"{stem}s"] else f"update_{stem}"

    def full(tag: str) -> str:
        return {CONTENT: "content_block_", TOOL: "tool_call_content_"}.get(role, "update_") + snake(tag)

    shorts = {tag: short(tag, obj) for tag, obj in rest}
    out: list[tuple[str, ObjectDef]] = []
    for tag, obj in rest:
        others = {full(t) for t, _ in h.tagged(role) if t != tag} | {n for t, n in shorts.items() if t != tag}
        name = shorts[tag] if shorts[tag] not in taken | others else full(tag)
        union = h.unions[role]
        if name in taken or not is_identifier(name):
            raise CodegenError(
                [
                    Problem(
                        f"the builder for variant {tag!r} of {union.name} would be named {name!r}, which is taken"
                        " or not a Python name",
                        pointer=union.pointer,
                        fix="give the variant a distinct tag",
                    )
                ]
            )
        taken.add(name)
        out.append((name, obj))
    return out


def plan_builders(definitions: tuple[Definition, ...], methods: tuple[Method, ...]) -> tuple[Builder, ...]:
    """Every builder of `helpers.py` for this schema, in the SDK's order, then the others."""
    h = HelperPlanner(definitions, methods)
    made: dict[str, Builder] = {}
    for name, role, tag, params in PLAIN:
        built = h.add(h.sdk_builder(name, h.variant(role, tag), params), role, tag)
        if built is not None:
            made[name] = built
    _text_forms(h, made)
    _tool_call_forms(h)
    _objects(h)
    taken = {b.name for b in h.out}
    for role in (CONTENT, TOOL, UPDATE):
        for name, obj in _generic_names(h, role, taken):
            h.add(h.finish(name, obj, [], {}, sdk=False))
    order = {name: i for i, name in enumerate(SDK_ORDER)}
    return tuple(sorted(h.out, key=lambda b: order.get(b.name, len(order))))
