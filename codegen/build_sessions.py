"""Decide what `sessions.py` (the agent's session layer) holds for the schema being generated.

Found by structure: methods by wire name, result fields by wire name, update kinds by their
`sessionUpdate` tag. A method whose params or result is not an object type is left to the
author (not served); a schema without `session/new` and `session/prompt` gets no layer.
"""

from __future__ import annotations

from .ir import Definition, Field, ListOf, Method, Named, ObjectDef, Package, TypeExpr, UnionDef
from .ir_sessions import Served, SessionsPlan, Unserved
from .render_types import TypeView

# wire method -> the SessionCore coroutine serving it
SERVED = {
    "session/new": "new",
    "session/load": "load",
    "session/list": "list",
    "session/resume": "resume",
    "session/close": "close",
    "session/delete": "delete",
    "session/set_mode": "set_mode",
    "session/set_config_option": "set_config_option",
    "session/prompt": "prompt",
    "session/cancel": "cancel",
}


class _Schema:
    def __init__(self, package: Package) -> None:
        self.pkg = package
        self.view = TypeView(package)
        self.defs: dict[str, Definition] = self.view.defs

    def obj(self, t: TypeExpr | str | None) -> ObjectDef | None:
        if isinstance(t, str) or t is None:
            d = self.defs.get(t) if t else None
        else:
            target = self.view.alias_target(t)
            d = self.defs.get(target.name) if isinstance(target, Named) else None
        return d if isinstance(d, ObjectDef) else None

    def field(self, obj: ObjectDef | None, wire: str) -> Field | None:
        return next((f for f in obj.fields if f.wire == wire), None) if obj else None

    def first_field(self, obj: ObjectDef | None, *wires: str) -> Field | None:
        return next((f for w in wires if (f := self.field(obj, w)) is not None), None)

    def obj_name(self, t: TypeExpr) -> str | None:
        d = self.obj(t)
        return d.name if d is not None else None

    def item(self, t: TypeExpr) -> TypeExpr | None:
        target = self.view.alias_target(t)
        return target.item if isinstance(target, ListOf) else None

    def hint(self, t: TypeExpr) -> str:
        return self.view.hint(t, qualified=True)

    def method(self, wire: str) -> Method | None:
        return next((m for m in self.pkg.handled() if m.wire == wire), None)

    def params_ok(self, name: str | None) -> bool:
        d = self.defs.get(name) if name else None
        if isinstance(d, UnionDef):  # e.g. set_config_option: one object per value kind
            return not d.arrays and not d.scalars and d.objects is not None
        return isinstance(d, ObjectDef)


def _served(s: _Schema, m: Method, core: str) -> Served | None:
    if not s.params_ok(m.params):
        return None
    if m.kind == "notification":
        return Served(m.wire, m.handler, core, f"types.{m.params}", None, ())
    result = s.obj(m.result)
    if result is None:
        return None
    return Served(
        m.wire, m.handler, core, f"types.{m.params}", f"types.{result.name}", tuple(f.wire for f in result.fields)
    )


def _tags(s: _Schema, t: TypeExpr) -> tuple[str, ...]:
    target = s.view.alias_target(t)
    union = s.defs.get(target.name) if isinstance(target, Named) else None
    if not isinstance(union, UnionDef) or union.objects is None:
        return ()
    return tuple(v.tag_value for v in union.objects.tagged if v.tag_value is not None)


def build_sessions(package: Package) -> SessionsPlan | None:
    """The session layer's plan, or None when the schema (or the role) gets no layer."""
    if package.role != "agent":
        return None
    s = _Schema(package)
    served: list[Served] = []
    for wire, core in SERVED.items():
        m = s.method(wire)
        found = _served(s, m, core) if m is not None else None
        if found is not None:
            served.append(found)
    wires = {x.wire for x in served}
    prompt_method = s.method("session/prompt")
    prompt = s.obj(prompt_method.params if prompt_method else None)
    prompt_field = s.field(prompt, "prompt")
    block = s.item(prompt_field.type) if prompt_field else None
    notify = next((m for m in package.called() if m.wire == "session/update"), None)
    update = s.field(s.obj(notify.params if notify else None), "update")
    if not {"session/new", "session/prompt", "session/cancel"} <= wires or block is None or update is None:
        return None
    served_handlers = {x.handler for x in served}
    unserved = tuple(
        Unserved(m.handler, m.const, f"types.{m.params}", None if m.result is None else f"types.{m.result}")
        for m in package.handled()
        if not m.optional and not m.runtime and m.handler not in served_handlers and m.wire != "initialize"
        and m.params is not None
    )  # fmt: skip
    new_result = s.obj(next(m.result for m in package.handled() if m.wire == "session/new"))
    modes_field = s.field(new_result, "modes")
    modes = s.obj(modes_field.type) if modes_field else None
    available = s.field(modes, "availableModes")
    mode_item = s.item(available.type) if available else None
    options = s.field(new_result, "configOptions")
    option_item = s.item(options.type) if options else None
    init = s.method("initialize")
    init_result = s.obj(init.result if init else None)
    # The protocol's names for them: v1 `agentCapabilities`/`agentInfo`/`sessionCapabilities`,
    # v2 `capabilities`/`info`/`session`.
    caps = s.first_field(init_result, "agentCapabilities", "capabilities")
    initialize = None
    if init is not None and caps is not None and s.field(init_result, "protocolVersion") and s.obj(caps.type):
        initialize = _served(s, init, "initialize")
    session_caps = s.first_field(s.obj(caps.type) if caps else None, "sessionCapabilities", "session")
    session_caps_obj = s.obj(session_caps.type) if session_caps else None
    info_item = None
    listing = next((m for m in package.handled() if m.wire == "session/list"), None)
    sessions_field = s.field(s.obj(listing.result if listing else None), "sessions")
    if sessions_field is not None:
        info_item = s.obj(s.item(sessions_field.type))
    agent_info = s.first_field(init_result, "agentInfo", "info")
    builders = {b.name for b in package.builders}
    return SessionsPlan(
        served=tuple(served),
        unserved=unserved,
        prompt_block=s.hint(block),
        update=s.hint(update.type),
        update_tags=_tags(s, update.type),
        mode=s.hint(mode_item) if mode_item is not None and s.obj(mode_item) else None,
        config_option=s.hint(option_item) if option_item is not None else None,
        initialize=initialize,
        capabilities=s.hint(caps.type) if caps else "",
        implementation=s.hint(agent_info.type) if agent_info else None,
        capabilities_field=caps.wire if caps else "",
        info_field=agent_info.wire if agent_info else None,
        info_required=bool(agent_info and agent_info.required),
        session_capabilities_field=session_caps.wire if session_caps else "",
        # The keys that say a session method is served: typed `Session<Key>Capabilities`
        # (v1 `list`, `delete`, ...; not v2's `prompt`, a PromptCapabilities).
        session_capabilities=tuple(
            f.wire
            for f in (session_caps_obj.fields if session_caps_obj else ())
            if s.obj_name(f.type) == f"Session{f.wire[:1].upper()}{f.wire[1:]}Capabilities"
        ),
        info_fields=tuple(f.wire for f in info_item.fields) if info_item else (),
        say="update_agent_message_text" if "update_agent_message_text" in builders else None,
        think="update_agent_thought_text" if "update_agent_thought_text" in builders else None,
    )
