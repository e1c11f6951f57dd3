"""Stage 3 — render: the IR through Jinja templates, one template per output file.

Templates only print; the small filters here translate IR type expressions into the Python
spellings a template needs (a type hint, a decode expression, an encode expression).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import jinja2
import jinja2.bccache

from .build_contrib import build_contrib
from .build_sessions import build_sessions
from .exports import package_exports, resume_methods
from .format import LINE_LENGTH
from .ir import (
    Builder,
    BuilderExpr,
    BuilderParam,
    Const,
    DefaultScalar,
    DictExpr,
    EnumDef,
    Field,
    ListExpr,
    ListOf,
    LiteralOf,
    MapOf,
    New,
    ObjectDef,
    Package,
    Ref,
    Scalar,
    TypeExpr,
    UnionDef,
)
from .pagers import find_pagers
from .render_decode import DecodePlanner
from .render_types import keyword_params, keyword_union
from .sdk_builders import SDK_ORDER
from .template_code import stored_code
from .templates import CustomTemplates, blame, loader, render_error, runtime_source

# output file -> template
FILES = {
    "__init__.py": "__init__.py.jinja",
    "helpers.py": "helpers.py.jinja",
    "contrib.py": "contrib.py.jinja",
    "types.py": "types.py.jinja",
    "methods.py": "methods.py.jinja",
    "py.typed": "py.typed.jinja",
}
# output file -> plain Python source in runtime/: the same for every schema and role, so it is
# kept as real Python (linted and type-checked as such) and only gets the generated header.
RUNTIME_FILES = {
    "connection.py": "connection.py",
    "connection_base.py": "connection_base.py",
    "connection_inbound.py": "connection_inbound.py",
    "contrib_support.py": "contrib_support.py",
    "dispatch.py": "dispatch.py",
    "gchold.py": "gchold.py",
    "jsonline.py": "jsonline.py",
    "jsonvalue.py": "jsonvalue.py",
    "process.py": "process.py",
    "proctable.py": "proctable.py",
    "serde.py": "serde.py",
    "slots.py": "slots.py",
    "streams.py": "streams.py",
    "wiretap.py": "wiretap.py",
    # Test tooling, in its own subpackage so that the top level shows what an agent or client
    # imports (the conformance kit, scripted peers, in-memory streams).
    "testing/__init__.py": "testing/__init__.py",
    "testing/client_checks.py": "testing/client_checks.py",
    "testing/client_conformance.py": "testing/client_conformance.py",
    "testing/client_verdicts.py": "testing/client_verdicts.py",
    "testing/conformance.py": "testing/conformance.py",
    "testing/conformance_checks.py": "testing/conformance_checks.py",
    "testing/conformance_harness.py": "testing/conformance_harness.py",
    "testing/conformance_messages.py": "testing/conformance_messages.py",
    "testing/conformance_output.py": "testing/conformance_output.py",
    "testing/conformance_probes.py": "testing/conformance_probes.py",
    "testing/conformance_probes_session.py": "testing/conformance_probes_session.py",
    "testing/conformance_probes_restart.py": "testing/conformance_probes_restart.py",
    "testing/conformance_probes_turn.py": "testing/conformance_probes_turn.py",
    "testing/conformance_probes_wire.py": "testing/conformance_probes_wire.py",
    "testing/conformance_report.py": "testing/conformance_report.py",
    "testing/conformance_rules.py": "testing/conformance_rules.py",
    "testing/conformance_rules_session.py": "testing/conformance_rules_session.py",
    "testing/conformance_traffic.py": "testing/conformance_traffic.py",
    "testing/memstream.py": "testing/memstream.py",
    "testing/probe.py": "testing/probe.py",
    "testing/probe_relay.py": "testing/probe_relay.py",
    "testing/probe_scenario.py": "testing/probe_scenario.py",
    "testing/runners.py": "testing/runners.py",
    "testing/scripted.py": "testing/scripted.py",
}
ROLE_FILES = {"agent": "agent.py", "client": "client.py"}
# Templates only one role's package gets (output file -> template), and the context entry that
# must not be None for the file to be made (a schema without sessions gets no `sessions.py`).
ROLE_TEMPLATES: dict[str, dict[str, str]] = {"agent": {"sessions.py": "sessions.py.jinja"}, "client": {}}
MADE_WHEN = {"sessions.py": "sessions"}
# Runtime sources only one role's package gets: output file -> runtime source, per role.
ROLE_RUNTIME_FILES: dict[str, dict[str, str]] = {
    # The server side of the remote transport (an ASGI app): agents are what is served.
    "agent": {
        "principal.py": "principal.py",
        "remote.py": "remote_server.py",
        "remote_auth.py": "remote_auth.py",
        "remote_limits.py": "remote_limits.py",
        "remote_link.py": "remote_link.py",
        "remote_rate.py": "remote_rate.py",
        "remote_server_http.py": "remote_server_http.py",
        "remote_server_sse.py": "remote_server_sse.py",
        "remote_server_ws.py": "remote_server_ws.py",
        "remote_wire.py": "remote_wire.py",
        # Where the session layer keeps sessions: the store protocol and the in-memory store.
        "session_store.py": "session_store.py",
        # The bundled persistent stores, `open_store(url)`, and the store protocol's own checks.
        "session_sql.py": "session_sql.py",
        "session_sqlite.py": "session_sqlite.py",
        "session_postgres.py": "session_postgres.py",
        "session_stores.py": "session_stores.py",
        # The session layer's schema-independent core (sessions.py wraps it in typed handlers).
        "session_layer.py": "session_layer.py",
        "session_live.py": "session_live.py",
        "session_claims.py": "session_claims.py",
        "testing/store_checks.py": "testing/store_checks.py",
        # check-client --listen: the probe agent served on this package's asgi_app.
        "testing/client_remote.py": "testing/client_remote.py",
    },
    # Reaching a remote agent (and checking one over the remote transport) is the client's business.
    "client": {
        "remote_client.py": "remote_client.py",
        "remote_cookies.py": "remote_cookies.py",
        "remote_http.py": "remote_http.py",
        "remote_messages.py": "remote_messages.py",
        "remote_options.py": "remote_options.py",
        "remote_sse.py": "remote_sse.py",
        "remote_ws.py": "remote_ws.py",
        "testing/conformance_remote.py": "testing/conformance_remote.py",
    },
}


def runtime_sources() -> set[str]:
    """Every runtime source some package is made from."""
    return set(RUNTIME_FILES.values()).union(*(files.values() for files in ROLE_RUNTIME_FILES.values()))


class Renderer(DecodePlanner):
    """Every filter the templates use: hints and defaults (TypeView), decoding
    (DecodePlanner), and encoding and codec references (here)."""

    # -- encoding ------------------------------------------------------------------
    def enc(self, t: TypeExpr, v: str, where: str = "") -> str:
        """An expression encoding `v` of type `t`; `where` (the field's wire name) names an open
        value's place in the error a value JSON cannot hold raises."""
        t = self.alias_target(t)
        if isinstance(t, Scalar) and t.kind in ("json", "object"):
            # Open: checked and converted (generated objects, datetimes...) as plain JSON.
            return f"{self.serde('open_json')}({v}, {where!r})"
        if isinstance(t, (Scalar, LiteralOf)):
            return v
        if isinstance(t, ListOf):
            item = self.enc(t.item, "x", where)
            return v if item == "x" else f"[{item} for x in {v}]"
        if isinstance(t, MapOf):
            item = self.enc(t.value, "x", where)
            if item.startswith(self.serde("open_json")):
                return self.enc(Scalar("json"), v, where)  # a map of open values is one open value
            return v if item == "x" else f"{{k: {item} for k, x in {v}.items()}}"
        target = self.defs.get(t.name)
        if isinstance(target, EnumDef):
            return v
        if isinstance(target, UnionDef) and (target.scalars or target.arrays):
            return f"encode_{t.name}({v})"
        return f"{v}.to_dict()"

    def differs_from_default(self, f: Field, expr: str) -> str:
        """`expr` differs from the field's default. Templates put it first in an `or`: a long
        condition ending in a call (`!= Caps(a=False)`) is split differently by black and ruff."""
        assert f.default is not None
        if isinstance(f.default, DefaultScalar) and (f.default.value is None or isinstance(f.default.value, bool)):
            return f"{expr} is not {f.default.value!r}"
        return f"{expr} != {self.default(f.default)}"

    def decoder_ref(self, name: str) -> str:
        kind = self.defs[name].kind
        return f"types.{name}.from_dict" if kind == "object" else f"types.decode_{name}"

    def encoder_ref(self, name: str) -> str:
        kind = self.defs[name].kind
        return f"types.{name}.to_dict" if kind == "object" else f"types.encode_{name}"

    # -- helpers.py ----------------------------------------------------------------
    def param_hint(self, p: BuilderParam) -> str:
        t = p.type
        hint = f"Iterable[{self.hint(t.item, True)}]" if p.iterable and isinstance(t, ListOf) else self.hint(t, True)
        return hint + (" | None" if p.nullable else "") + (" | types.Unset" if p.unset else "")

    def builder_expr(self, e: BuilderExpr) -> str:
        if isinstance(e, Ref):
            value = f"[*{e.param}]" if e.to_list else e.param
            return f"types.UNSET if {e.param} is None else {value}" if e.absent_if_none else value
        if isinstance(e, Const):
            return repr(e.value)
        if isinstance(e, New):
            return f"types.{e.cls}(" + ", ".join(f"{k}={self.builder_expr(v)}" for k, v in e.args) + ")"
        if isinstance(e, ListExpr):
            return "[" + ", ".join(self.builder_expr(i) for i in e.items) + "]"
        assert isinstance(e, DictExpr)
        return "{" + ", ".join(f"{k!r}: {self.builder_expr(v)}" for k, v in e.items) + "}"

    def helpers_imports(self, builders: tuple[Builder, ...]) -> list[str]:
        """The imports helpers.py needs, decided from its builders and their parameters' types
        (`types` too only when there is a builder: a schema may give it none)."""
        params = [p for b in builders for p in b.params]
        hints = [self.param_hint(p) for p in params]
        needs = {
            "from collections.abc import Iterable": any(p.iterable for p in params),
            "import typing": any("typing." in h for h in hints),
            "from typing import Any": any(_mentions_any(p.type) for p in params),
        }
        # Each group after a blank line (the template writes none of its own: black and ruff
        # disagree on two blank lines after `from __future__`, which an empty file would get).
        lines = [line for line, needed in needs.items() if needed]
        return ([""] + lines if lines else []) + (["", "from . import types"] if builders else [])


def _mentions_any(t: TypeExpr) -> bool:
    if isinstance(t, ListOf):
        return _mentions_any(t.item)
    if isinstance(t, MapOf):
        return _mentions_any(t.value)
    return t == Scalar("json")


class _MemoryBytecodeCache(jinja2.BytecodeCache):
    """Compiled templates kept for the process: `generate` renders several packages, and each
    render has its own environment (its filters close over that package). Jinja checks the
    source checksum on load, so an edited or custom template is never served stale. A template
    not compiled yet in this process starts from its stored Jinja output when that was made
    from the same text under the same settings (`codegen.template_code`)."""

    def __init__(self) -> None:
        self._store: dict[str, bytes] = {}

    def get_bucket(
        self, environment: jinja2.Environment, name: str, filename: str | None, source: str
    ) -> jinja2.bccache.Bucket:
        bucket = super().get_bucket(environment, name, filename, source)
        if bucket.code is None:
            python = stored_code(environment, name, bucket.checksum)
            if python is not None:  # compiled as Jinja compiles its own output (Environment._compile)
                bucket.code = compile(python, filename or "<template>", "exec")
                self.set_bucket(bucket)
        return bucket

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        data = self._store.get(bucket.key)
        if data is not None:
            bucket.bytecode_from_string(data)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self._store[bucket.key] = bucket.bytecode_to_string()


_BYTECODE = _MemoryBytecodeCache()


def environment(renderer: Renderer, custom: CustomTemplates | None = None) -> jinja2.Environment:
    """The Jinja environment: bundled templates, overridden by `custom` ones of the same name."""
    env = jinja2.Environment(
        loader=loader(custom),
        bytecode_cache=_BYTECODE,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(
        hint=renderer.hint,
        field_hint=renderer.field_hint,
        plan=renderer.plan,
        failure=renderer.failure,
        fallback=renderer.fallback,
        enum_dec=renderer.enum_dec,
        object_plan=renderer.object_plan,
        dec=renderer.dec,
        enc=renderer.enc,
        fn=renderer.fn,
        default=renderer.default,
        pyrepr=repr,
        decoder_ref=renderer.decoder_ref,
        differs_from_default=renderer.differs_from_default,
        encoder_ref=renderer.encoder_ref,
        docstring=_docstring,
        param_hint=renderer.param_hint,
        builder_expr=renderer.builder_expr,
    )
    env.filters["keyword_params"] = functools.partial(keyword_params, renderer)
    env.filters["keyword_union"] = functools.partial(keyword_union, renderer)
    env.tests.update(mutable_default=renderer.is_mutable_default)
    return env


def _docstring(text: str, indent: int = 4, continued: bool = False) -> str:
    """A safe triple-quoted docstring body (schema prose may hold backslashes and quotes).

    `continued`: the template already wrote lines before this body. Where the closing quotes
    go is decided here, as black does it (on their own line when the last line of a multi-line
    docstring would run past the line length), so every formatter keeps the same layout.
    """
    body = text.strip().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body += " "
    pad = " " * indent
    lines = [(pad + line) if line.strip() else "" for line in body.splitlines()]
    out = "\n".join(lines).lstrip()
    if (continued or len(lines) > 1) and lines and len(lines[-1].rstrip()) + 3 > LINE_LENGTH:
        out += "\n" + pad
    return out


def template_context(package: Package, renderer: Renderer) -> dict[str, Any]:
    """What every template receives (documented in docs/templates.md)."""
    contrib, resume = build_contrib(package), resume_methods(package)
    return {
        "pkg": package,
        "objects": [d for d in package.definitions if isinstance(d, ObjectDef)],
        "enums": [d for d in package.definitions if isinstance(d, EnumDef)],
        "unions": [d for d in package.definitions if isinstance(d, UnionDef)],
        "aliases": renderer.aliases_in_order(),
        "defs": renderer.defs,
        "typing_names": renderer.typing_names(),
        "dataclasses_names": renderer.dataclasses_names(),
        "serde_imports": renderer.serde_imports(),
        "handled": package.handled(),
        "called": package.called(),
        # What a role module uses of methods.py, so it imports nothing unused (a schema may give
        # a role nothing to call, or only baseline methods to answer).
        "uses_method_names": bool(package.called())
        or any(m.optional and m.kind == "request" and not m.runtime for m in package.handled()),
        "proxy_has_methods": bool(package.called()),
        "helpers_imports": renderer.helpers_imports(package.builders),
        "sdk_builders_missing": [n for n in SDK_ORDER if n not in {b.name for b in package.builders}],
        "resume": resume,
        "pagers": find_pagers(package),
        "contrib": contrib,
        "sessions": build_sessions(package),
        "exports": package_exports(package, contrib, resume),
    }


def sources(role: str) -> dict[str, str]:
    """Output file -> the template (`*.jinja`) or runtime source (`*.py`) it is made from."""
    files = dict(FILES)
    files[ROLE_FILES[role]] = f"{role}.py.jinja"
    files.update(ROLE_TEMPLATES[role])
    files.update(runtime_files(role))
    return files


def runtime_files(role: str) -> dict[str, str]:
    """The runtime output files (-> their source) a package of `role` gets."""
    return {**RUNTIME_FILES, **ROLE_RUNTIME_FILES[role]}


@dataclass(frozen=True)
class Rendered:
    """The rendered files (relative path -> text) and, per file, the custom templates that shaped it.

    `runtime`: output file -> (its rendered header, the bundled runtime source after it), for
    the files made of a bundled runtime source (see `codegen.format.check_syntax`).
    """

    files: dict[str, str]
    custom: dict[str, tuple[str, ...]]
    runtime: dict[str, tuple[str, str]] = field(default_factory=dict)


def render_package(package: Package, custom: CustomTemplates | None = None) -> Rendered:
    """Render every output file of the package, with `custom` templates overriding bundled ones."""
    renderer = Renderer(package)
    env = environment(renderer, custom)
    ctx = template_context(package, renderer)
    out: dict[str, str] = {}
    bundled: dict[str, tuple[str, str]] = {}
    header: str | None = None
    for path, source in sources(package.role).items():
        if path in MADE_WHEN and ctx[MADE_WHEN[path]] is None:
            continue
        try:
            if source in runtime_sources():
                if header is None:
                    header = env.get_template("_runtime_header.jinja").render(ctx)
                body = runtime_source(source, custom)
                out[path] = header + body
                if custom is None or not custom.has(source):
                    bundled[path] = (header, body)
            else:
                out[path] = env.get_template(source).render(ctx)
        except Exception as exc:  # a bundled template failing is a bug; a custom one, bad input
            if custom is None:
                raise
            raise render_error(exc, custom, path) from None
    return Rendered(out, blame(env, custom, sources(package.role)), bundled)


def render(package: Package, custom: CustomTemplates | None = None) -> dict[str, str]:
    """Render every output file of the package: relative path -> source text."""
    return render_package(package, custom).files
