"""Decide the generated package's public names: what its `__init__` imports from each module
and lists in `__all__`, by role and by what the schema has (terminals, a resumable session)."""

from __future__ import annotations

from dataclasses import dataclass

from .ir import AliasDef, Method, Package, Scalar
from .ir_contrib import ContribPlan


@dataclass(frozen=True)
class Exports:
    """What the package's `__init__` imports from its modules and lists in `__all__`."""

    imports: tuple[tuple[str, tuple[str, ...]], ...]  # (module, names), in import order
    names: tuple[str, ...]  # `__all__`: the role's base class and proxy first, then its own names, then the rest


# Re-exported by every package, from each module (besides what the role module gives).
_COMMON_EXPORTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("connection", ("Connection", "ConnectionClosed", "InvalidResponse", "MessageTooLarge", "Tap", "WireLog")),
    ("dispatch", ("Dispatcher", "RequestError")),
    ("methods", ("METHODS", "PROTOCOL_VERSION", "MethodSpec")),
)
_TYPES_EXPORTS = ("UNSET", "DecodeContext", "DecodeError", "LenientWarning", "Unset", "or_none")
_MODULES = ("contrib", "helpers", "types")  # `from . import ...`
_CONSTANTS = ("SCHEMA_RELEASE", "SCHEMA_SHA256", "GENERATOR_VERSION")  # defined in `__init__` itself


def package_exports(package: Package, contrib: ContribPlan, resume: tuple[Method, Method] | None) -> Exports:
    """The package's public names: the role module's (base class, peer proxy, the terminal handle
    where the schema has terminals, how to run or connect: `reconnect_and_load` where `resume`,
    see `resume_methods`), the role's transports (an agent's ASGI app; a client's agent process
    and remote agent), and the names every package has."""
    base, proxy = package.role.capitalize(), package.peer.capitalize() + "Proxy"
    terminal = ["TerminalHandle"] if contrib.terminal else []
    transports: list[tuple[str, tuple[str, ...]]]
    if package.role == "agent":
        runs = ["run_agent"]
        transports = [("remote", ("AsgiApp", "AuthRequest", "BearerTokens", "asgi_app"))]
    else:
        reconnect = ["reconnect_and_load"] if resume is not None else []
        runs = ["connect", "connect_remote", *reconnect, "spawn_agent"]
        transports = [("process", ("AgentProcess",)), ("remote_client", ("RemoteAgent", "RemoteUnavailable"))]
    role_module = (package.role, (*sorted([base, proxy]), *terminal, *runs))
    imports = (role_module, *_COMMON_EXPORTS, *transports, ("types", _TYPES_EXPORTS))
    own = sorted([*runs, *(name for _, names in transports for name in names)])
    rest = {name for _, names in (*_COMMON_EXPORTS, ("types", _TYPES_EXPORTS)) for name in names}
    rest.update(terminal, _MODULES, _CONSTANTS)
    return Exports(imports, (base, proxy, *own, *sorted(rest)))


def resume_methods(package: Package) -> tuple[Method, Method] | None:
    """`initialize` and `session/load`, when this role calls both as requests with a result
    (not JSON null, as `session/load`'s is in the oldest releases): a client then gets
    `reconnect_and_load`, which resumes a session on a new remote connection and returns both answers."""
    nulls = {d.name for d in package.definitions if isinstance(d, AliasDef) and d.target == Scalar("null")}
    called = {
        m.wire: m
        for m in package.called()
        if m.kind == "request" and m.params and m.result and m.result not in nulls
    }
    if "initialize" in called and "session/load" in called:
        return called["initialize"], called["session/load"]
    return None
