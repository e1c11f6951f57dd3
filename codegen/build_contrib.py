"""Decide what `contrib.py` and the terminal handle hold for the schema being generated.

Everything is found by structure: the `session/update` params type and its union, the union's
variants by their `sessionUpdate` tag, the permission request by its method, the terminal
methods by their wire names. Whatever a helper needs and the schema lacks makes that helper
None (not generated), so no generated line refers to a type the schema does not have.
"""

from __future__ import annotations

import re
from typing import Literal

from .ir import Definition, EnumDef, Field, ListOf, Method, Named, ObjectDef, Package, TypeExpr, UnionDef
from .ir_contrib import (
    AccumulatorPlan,
    BrokerPlan,
    ChunkKind,
    ContribPlan,
    InfoField,
    Latest,
    SessionInfoPlan,
    TerminalPlan,
    ToolField,
    TrackerPlan,
)
from .render_types import TypeView

# The SDK's view fields first, in its order; any other field of the schema's tool call follows.
SDK_TOOL_FIELDS = ("title", "kind", "status", "content", "locations", "raw_input", "raw_output")
CHUNKS: tuple[tuple[str, str, Literal["user", "agent", "thought"]], ...] = (
    ("user_message_chunk", "user_messages", "user"),
    ("agent_message_chunk", "agent_messages", "agent"),
    ("agent_thought_chunk", "agent_thoughts", "thought"),
)
# tag -> (snapshot attribute, the variant's field holding the value; None: the whole update)
LATEST = (
    ("plan", "plan_entries", "entries"),
    ("available_commands_update", "available_commands", "available_commands"),
    ("current_mode_update", "current_mode_id", "current_mode_id"),
    ("config_option_update", "config_options", "config_options"),
    ("usage_update", "usage", None),
)
DEFAULT_OPTION_KINDS = ("allow_once", "allow_always", "reject_once")
TERMINAL_METHODS = ("terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release")


class _Schema:
    def __init__(self, package: Package) -> None:
        self.pkg = package
        self.view = TypeView(package)
        self.defs: dict[str, Definition] = self.view.defs

    def obj(self, name: str | None) -> ObjectDef | None:
        d = self.defs.get(name) if name else None
        return d if isinstance(d, ObjectDef) else None

    def named(self, t: TypeExpr, kind: type[ObjectDef] | type[UnionDef] | type[EnumDef]) -> Definition | None:
        t = self.view.alias_target(t)
        d = self.defs.get(t.name) if isinstance(t, Named) else None
        return d if isinstance(d, kind) else None

    def variants(self, union: UnionDef) -> dict[str, ObjectDef]:
        """tag value -> variant class, for the tagged object variants."""
        out: dict[str, ObjectDef] = {}
        for v in union.objects.tagged if union.objects else ():
            d = self.named(v.type, ObjectDef)
            if v.tag_value is not None and isinstance(d, ObjectDef):
                out[v.tag_value] = d
        return out

    def hint(self, t: TypeExpr) -> tuple[str, bool]:
        """(the value's hint, or a list's item's; is a list)."""
        target = self.view.alias_target(t)
        if isinstance(target, ListOf):
            return self.view.hint(target.item, qualified=True), True
        return self.view.hint(t, qualified=True), False

    def method(self, wire: str) -> Method | None:
        return next((m for m in self.pkg.methods if m.wire == wire), None)


def _field(obj: ObjectDef | None, py: str) -> Field | None:
    return next((f for f in obj.fields if f.py == py), None) if obj else None


def _required(obj: ObjectDef) -> set[str]:
    return {f.py for f in obj.fields if f.required}


def _text_block(s: _Schema, blocks: Definition | None) -> str | None:
    """The `text` variant of a content-block union, when building it takes `text` alone."""
    if not isinstance(blocks, UnionDef):
        return None
    text = s.variants(blocks).get("text")
    if text is None or _required(text) != {"text"}:
        return None
    return text.name


def _tool_fields(s: _Schema, update: ObjectDef, start: ObjectDef | None) -> tuple[ToolField, ...]:
    fields = [f for f in update.fields if f.py not in ("tool_call_id", "meta")]
    fields.sort(key=lambda f: SDK_TOOL_FIELDS.index(f.py) if f.py in SDK_TOOL_FIELDS else len(SDK_TOOL_FIELDS))
    out: list[ToolField] = []
    for f in fields:
        hint, is_list = s.hint(f.type)
        other = _field(start, f.py)
        in_start = other is not None and other.type == f.type
        required = in_start and other is not None and other.required
        status = s.named(f.type, EnumDef)
        progressing = (
            f.py == "status" and isinstance(status, EnumDef) and "in_progress" in {v.value for v in status.values}
        )
        out.append(ToolField(f.py, hint, is_list, in_start, required, repr("in_progress") if progressing else None))
    return tuple(out)


def _session_update(s: _Schema) -> tuple[ObjectDef, UnionDef] | None:
    """The `session/update` params class and the union of its `update` field."""
    method = s.method("session/update")
    notification = s.obj(method.params if method else None)
    update = _field(notification, "update")
    union = s.named(update.type, UnionDef) if update else None
    if notification is None or _field(notification, "session_id") is None or not isinstance(union, UnionDef):
        return None
    return notification, union


def _accumulator(s: _Schema) -> AccumulatorPlan | None:
    found = _session_update(s)
    if found is None:
        return None
    notification, union = found
    objects = union.objects
    if objects is None or objects.keyed or objects.fallback or union.arrays or union.scalars:
        return None  # `_fold` matches the tagged variants (and the unknown one) only
    variants = s.variants(union)
    if len(variants) != len(objects.tagged):
        return None
    folded: set[str] = set()
    chunks: list[ChunkKind] = []
    text_cls: str | None = None
    block: TypeExpr | None = None
    for tag, attr, role in CHUNKS:
        v = variants.get(tag)
        content = _field(v, "content")
        if v is None or content is None or (block is not None and content.type != block):
            continue
        block = content.type
        mid = _field(v, "message_id")
        presence: Literal["absent", "optional", "required"] = "absent"
        if mid is not None:
            presence = "required" if mid.required and not mid.nullable else "optional"
        chunks.append(ChunkKind(tag, v.name, attr, role, presence))
        text_cls = text_cls or _text_block(s, s.named(content.type, UnionDef))
        folded.add(tag)
    start, progress = variants.get("tool_call"), variants.get("tool_call_update")
    if progress is not None and _field(progress, "tool_call_id") is None:
        progress = None
    if start is not None and (progress is None or _field(start, "tool_call_id") is None):
        start = None
    folded.update(tag for tag, v in (("tool_call", start), ("tool_call_update", progress)) if v is not None)
    latest: list[Latest] = []
    for tag, attr, source in LATEST:
        v = variants.get(tag)
        if v is None:
            continue
        if source is None:
            latest.append(Latest(tag, v.name, attr, None, f"types.{v.name}", False))
        elif (f := _field(v, source)) is not None and f.required:
            hint, is_list = s.hint(f.type)
            latest.append(Latest(tag, v.name, attr, source, hint, is_list))
        else:
            continue
        folded.add(tag)
    info: SessionInfoPlan | None = None
    if (v := variants.get("session_info_update")) is not None and not _required(v):
        info = SessionInfoPlan(
            v.name, tuple(InfoField(f.py, s.view.hint(f.type, qualified=True)) for f in v.fields if f.py != "meta")
        )
        folded.add("session_info_update")
    return AccumulatorPlan(
        notification=notification.name,
        update_union=union.name,
        chunks=tuple(chunks),
        tool_call_start=start.name if start else None,
        tool_call_update=progress.name if progress else None,
        tool_fields=_tool_fields(s, progress, start) if progress else (),
        latest=tuple(latest),
        session_info=info,
        others=tuple(v.name for tag, v in variants.items() if tag not in folded),
        unknown_cls=objects.unknown_class,
        block_hint=s.hint(block)[0] if block is not None else "",
        text_cls=text_cls,
    )


def _tracker(s: _Schema) -> TrackerPlan | None:
    found = _session_update(s)
    permission = s.method("session/request_permission")
    carried = _field(s.obj(permission.params if permission else None), "tool_call")
    tool_call = s.named(carried.type, ObjectDef) if carried else None
    if found is None or not isinstance(tool_call, ObjectDef):
        return None
    variants = s.variants(found[1])
    start, progress = variants.get("tool_call"), variants.get("tool_call_update")
    if start is None or progress is None or _required(start) != {"tool_call_id", "title"}:
        return None
    fields = _tool_fields(s, progress, start)
    for obj in (progress, tool_call):
        if _required(obj) != {"tool_call_id"} or _field(obj, "tool_call_id") is None:
            return None
    for f in fields:
        carried_field, progress_field = _field(tool_call, f.py), _field(progress, f.py)
        if (
            not f.in_start
            or carried_field is None
            or progress_field is None
            or carried_field.type != progress_field.type
        ):
            return None
    if not any(f.py == "title" for f in fields):
        return None
    content_cls: str | None = None
    text_cls: str | None = None
    content = _field(progress, "content")
    items = s.view.alias_target(content.type) if content else None
    contents = s.named(items.item, UnionDef) if isinstance(items, ListOf) else None
    wrapper = s.variants(contents).get("content") if isinstance(contents, UnionDef) else None
    block = _field(wrapper, "content")
    streamed = {"title", "status", "content"} <= {f.py for f in fields}
    if streamed and wrapper is not None and block is not None and _required(wrapper) == {"content"}:
        text_cls = _text_block(s, s.named(block.type, UnionDef))
        content_cls = wrapper.name if text_cls else None
    return TrackerPlan(start.name, progress.name, tool_call.name, fields, content_cls, text_cls)


def _broker(s: _Schema, tracker: TrackerPlan | None) -> tuple[BrokerPlan | None, str | None]:
    """The broker, and the option class when the default options can be built."""
    method = s.method("session/request_permission")
    request = s.obj(method.params if method else None)
    if method is None or request is None or method.result is None:
        return None, None
    options = _field(request, "options")
    items = s.view.alias_target(options.type) if options else None
    option = s.named(items.item, ObjectDef) if isinstance(items, ListOf) else None
    kind = _field(option, "kind") if isinstance(option, ObjectDef) else None
    kinds = s.named(kind.type, EnumDef) if kind else None
    if not isinstance(option, ObjectDef) or _required(option) != {"option_id", "name", "kind"}:
        return None, None
    if not isinstance(kinds, EnumDef) or not set(DEFAULT_OPTION_KINDS) <= {v.value for v in kinds.values}:
        return None, None
    if tracker is None or _required(request) != {"session_id", "tool_call", "options"}:
        return None, option.name
    if not any(f.py == "content" for f in tracker.fields):
        return None, option.name
    return BrokerPlan(request.name, method.result, option.name, method.handler), option.name


def _terminal(s: _Schema) -> TerminalPlan | None:
    if s.pkg.role != "agent":
        return None
    called = {m.wire: m for m in s.pkg.called()}
    create = called.get("terminal/create")
    created = s.obj(create.result if create else None)
    if create is None or created is None or _field(created, "terminal_id") is None:
        return None
    if _field(s.obj(create.params), "session_id") is None:
        return None
    found: list[tuple[str, str, str]] = []
    for wire in TERMINAL_METHODS:
        m = called.get(wire)
        params = s.obj(m.params if m else None)
        if m is None or params is None or m.result is None or _required(params) != {"session_id", "terminal_id"}:
            return None
        if m.timeout_arg != "timeout":  # the handle's methods pass `timeout=` on
            return None
        found.append((m.handler, m.result, params.name))
    (out, wait, kill, release) = found
    return TerminalPlan(
        create=create,
        output=out[:2],
        wait_for_exit=wait[:2],
        kill=kill[:2],
        release=release[:2],
        output_request=out[2],
        wait_request=wait[2],
        kill_request=kill[2],
        release_request=release[2],
    )


def _imports(
    a: AccumulatorPlan | None, t: TrackerPlan | None, b: BrokerPlan | None, options: str | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The import lines `contrib.py` needs and its `__all__`: exactly the names it uses."""
    fields = t.fields if t else a.tool_fields if a and a.tool_call_update else ()
    view = t is not None or bool(a and a.tool_call_update)
    hints = [f.hint for f in fields]
    if a:
        hints += [x.hint for x in a.latest] + ([f.hint for f in a.session_info.fields] if a.session_info else [])
    support: set[str] = set()
    exports: set[str] = set()
    if view:
        exports |= {"ToolCallView", "TrackedToolCallView"}
    if a:
        support |= {"Subscribers", "SessionNotificationMismatchError", "SessionSnapshotUnavailableError"}
        exports |= {"SessionAccumulator", "SessionSnapshot"}
        if a.tool_call_update:
            support |= {"keep_items" if f.is_list else "keep" for f in a.tool_fields} | {"ToolCallLog"}
        if a.tool_call_start:
            support |= {"items" if f.is_list else "present" for f in a.tool_fields if f.in_start}
        if a.chunks:
            support.add("MessageLog")
            exports |= {"Message", "MessageChunk"}
        if any(c.message_id == "optional" for c in a.chunks):
            support.add("present")
        if a.session_info:
            exports.add("SessionInfoState")
    if t:
        support |= {"new_tool_call_id", "UnknownToolCallError"}
        support |= {"items" if f.is_list else "wire" for f in t.fields} | {"wire_items" for f in t.fields if f.is_list}
        exports.add("ToolCallTracker")
    if b:
        support |= {"MissingToolCallError", "MissingPermissionOptionsError", "PermissionBrokerError"}
        exports.add("PermissionBroker")
    if options:
        exports.add("default_permission_options")
    exports |= {n for n in support if n.endswith("Error")}
    lines: list[str] = []
    if b:
        lines.append("import copy")
    if any("typing." in h for h in hints):
        lines.append("import typing")
    abc = [n for n, used in (("Awaitable", b), ("Callable", a or t or b), ("Sequence", t or b)) if used]
    if abc:
        lines.append(f"from collections.abc import {', '.join(abc)}")
    if a or t:
        lines.append("from dataclasses import dataclass")
    any_hint = any(re.search(r"\bAny\b", h) for h in hints)
    # TYPE_CHECKING and Any: the snapshot's lazy __getattr__, hidden from type checkers.
    typing = [n for n, used in (("TYPE_CHECKING", a), ("Any", any_hint or a), ("TypeAlias", a and a.chunks)) if used]
    if typing:
        lines.append(f"from typing import {', '.join(typing)}")
    if lines and (support or exports):
        lines.append("")  # between the standard library and the package's own modules
    if support or exports:
        lines.append("from . import types")
    if support:
        lines.append(f"from .contrib_support import {', '.join(sorted(support, key=lambda n: (n[0].islower(), n)))}")
    unset = [n for n, used in (("UNSET", t or (a and a.session_info)), ("Unset", t)) if used]
    if unset:
        lines.append(f"from .types import {', '.join(unset)}")
    return tuple(lines), tuple(sorted(exports, key=lambda n: (n[0].islower(), n)))


def build_contrib(package: Package) -> ContribPlan:
    """The contrib helpers and terminal handle this package's schema supports."""
    s = _Schema(package)
    accumulator, tracker = _accumulator(s), _tracker(s)
    broker, options = _broker(s, tracker)
    imports, exports = _imports(accumulator, tracker, broker, options)
    return ContribPlan(accumulator, tracker, broker, options, _terminal(s), imports, exports)
