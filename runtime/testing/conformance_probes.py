"""The conformance probes of the connection itself: initialize (with what its answer says about
the agent), version negotiation, session/new, authentication, JSON-RPC ids, unknown methods
and notifications, invalid params, and the informational probes. Each drives a fresh agent
and settles the checks it covers. (`conformance` is the public façade; `conformance_harness`
holds what every probe builds on.)"""

from __future__ import annotations

from typing import Any, Final

from .. import types
from ..dispatch import INVALID_PARAMS, METHOD_NOT_FOUND
from ..methods import METHODS, PROTOCOL_VERSION
from .conformance_checks import UNSUPPORTED_VERSION, Outcome
from .conformance_harness import (
    AUTH_REQUIRED,
    SESSION_REFUSED,
    Fail,
    Harness,
    NotTestable,
    Skip,
    error_text,
)
from .conformance_messages import well_formed_error
from .runners import AgentRun, Line, as_list, as_object

PASSED: Final[Outcome] = ("passed", "", None, [])


def passed(detail: str = "", warnings: list[str] | None = None) -> Outcome:
    return ("passed", detail, None, warnings or [])


class CoreProbes(Harness):
    """The probes of the connection; one method per probe."""

    async def initialize(self) -> tuple[Outcome, Outcome, Outcome, Outcome]:
        """initialize, agent-info, auth-methods-unique, auth-no-terminal, from one answer. The
        gate: the other probes start their agents once this one has its answer."""
        try:
            return await self._initialize()
        finally:
            self.open_gate()  # however it ended (if not open yet: a bug, but nothing hangs)

    async def _initialize(self) -> tuple[Outcome, Outcome, Outcome, Outcome]:
        cannot_run = ""
        try:
            async with self.agent(self.options.eof_timeout, gate=False) as run:
                self.eof_runs.append(("after initialize", run))
                reply = await self.call(
                    run,
                    "initialize",
                    self.initialize_params(PROTOCOL_VERSION),
                    self.options.startup_timeout,
                )
                if reply.ok:
                    version = reply.get("protocolVersion")
                    if isinstance(version, int) and not isinstance(version, bool):
                        self.accepted_version = version
                    self.init_answer = as_object(reply.result) or {}
                    self.init_line = reply.response
                    self.open_gate()
        except OSError as exc:
            self.open_gate(f"cannot start it: {exc}", "blocked: the agent cannot be started")
            raise Fail(f"cannot start the agent: {exc}") from None
        if not reply.ok:
            why = self.why(run, reply)
            if reply.closed:
                cannot_run = "it exited before answering initialize" + _stderr_tail(run)
                blocked = "blocked: the agent exited before answering initialize"
            else:
                blocked = f"blocked by initialize: {why}"
            self.open_gate(cannot_run, blocked)
            untested: Outcome = ("not testable", "initialize did not pass", None, [])
            self.blocked.update(
                dict.fromkeys(("agent-info", "auth-methods-unique", "auth-no-terminal"), blocked)
            )
            return (
                ("failed", f"initialize failed: {why}", reply.response, []),
                untested,
                untested,
                untested,
            )
        result = reply.result
        # Through METHODS, not types.InitializeResponse: the package stays type-correct for a
        # schema without `initialize` (the check is then not testable).
        spec = METHODS.get("initialize")
        if spec is None or spec.decode_result is None:
            raise NotTestable("the schema defines no initialize request")
        try:
            decoded: Any = spec.decode_result(result, None)
        except types.DecodeError as exc:
            raise Fail(
                f"the response does not fit InitializeResponse: {exc}", reply.response
            ) from None
        version = decoded.protocol_version
        main: Outcome = passed(f"protocolVersion {version}")
        if version != PROTOCOL_VERSION:  # allowed: an agent without it answers its latest
            asked = PROTOCOL_VERSION
            note = f"asked for {asked}, the agent chose {version}: the checks assume {asked}"
            main = passed(f"protocolVersion {version}", [note])
        answer = as_object(result) or {}
        return (
            main,
            self._agent_info(answer, reply.response),
            *self._auth_methods(answer, reply.response),
        )

    def _agent_info(self, answer: dict[str, Any], line: Line | None) -> Outcome:
        info = as_object(answer.get("agentInfo"))
        if info is None:
            return ("failed", "no agentInfo in the initialize answer", line, [])
        missing = [key for key in ("name", "version") if not isinstance(info.get(key), str)]
        if missing:
            return ("failed", f"agentInfo has no {' or '.join(missing)}", line, [])
        return passed(f"{info['name']} {info['version']}")

    def _auth_methods(self, answer: dict[str, Any], line: Line | None) -> tuple[Outcome, Outcome]:
        methods = [as_object(m) or {} for m in as_list(answer.get("authMethods")) or []]
        ids = [m.get("id") for m in methods]
        duplicates = sorted({str(i) for i in ids if ids.count(i) > 1})
        unique: Outcome = (
            passed(f"{len(ids)} methods")
            if not duplicates
            else ("failed", f"duplicate ids {duplicates}", line, [])
        )
        terminal = [m.get("id") for m in methods if m.get("type") == "terminal"]
        if terminal:
            detail = (
                f"terminal auth methods {terminal} advertised to a client without auth.terminal"
            )
            return unique, ("failed", detail, line, [])
        return unique, PASSED

    async def initialize_version(self) -> Outcome:
        async with self.agent() as run:
            params = self.initialize_params(UNSUPPORTED_VERSION)
            reply = await self.call(run, "initialize", params, self.options.startup_timeout)
        accepted = self.accepted_version
        if accepted > PROTOCOL_VERSION:
            raise Fail(
                f"answered version {accepted} to an initialize asking for {PROTOCOL_VERSION}: an "
                f"agent that supports {PROTOCOL_VERSION} must answer it, and a version above the "
                "one asked leaves no verdict of this kit meaningful",
                self.init_line,
            )
        if not reply.ok:
            raise Fail(f"initialize failed: {self.why(run, reply)}", reply.response)
        answered = reply.get("protocolVersion")
        if not isinstance(answered, int) or isinstance(answered, bool):
            raise Fail("protocolVersion is not an integer", reply.response)
        if answered == UNSUPPORTED_VERSION:
            raise Fail(
                f"answered version {answered}, which does not exist: an agent that does not "
                "support the requested version must answer the latest one it supports",
                reply.response,
            )
        if answered < accepted:
            raise Fail(
                f"answered version {answered}, but it accepted version {accepted}: its latest "
                "version cannot be lower",
                reply.response,
            )
        return passed(f"answered {answered}")

    async def session_new(self) -> tuple[Outcome, Outcome]:
        """session-new (two calls, two ids) and auth-not-required. The agent is left with live
        sessions: exit-on-eof sees whether it exits on EOF then."""
        async with self.agent(self.options.eof_timeout) as run:
            entry = len(self.eof_runs)
            self.eof_runs.append(("after initialize, before session/new", run))
            init, _ = await self.setup(run, session=False)
            advertised = bool(as_list(init.get("authMethods")))
            params = self.new_params()
            first = await self.call(run, "session/new", params, self.options.startup_timeout)
            second = await self.call(run, "session/new", params) if first.ok else first
            # exit-on-eof says what state the agent was left in
            state = "with a live session" if first.ok else "after a failed session/new"
            self.eof_runs[entry] = (state, run)
        if first.error_code == AUTH_REQUIRED:
            self.blocked["session-new"] = self.auth_hint(init)
            if advertised:
                untested: Outcome = (
                    "not testable",
                    f"session/new needs authentication ({error_text(first)})",
                    None,
                    [],
                )
                return untested, ("skipped", "auth methods are advertised", None, [])
            if not advertised:
                detail = (
                    f"session/new answered {error_text(first)}, but no auth method is advertised"
                )
                return ("not testable", "session/new needs authentication", None, []), (
                    "failed",
                    detail,
                    first.response,
                    [],
                )
            raise NotTestable(
                f"session/new needs authentication ({error_text(first)})", self.auth_hint(init)
            )
        auth: Outcome = (
            ("skipped", "auth methods are advertised", None, []) if advertised else PASSED
        )
        ids: list[str] = []
        for reply in (first, second):
            if not reply.ok and reply.response is not None and well_formed_error(reply.error):
                # An agent may refuse sessions for want of its backend or credentials (an
                # internal error, say): that blocks the check, it breaks no rule.
                self.blocked["session-new"] = SESSION_REFUSED
                detail = f"session/new failed: {error_text(reply)}"
                return ("not testable", detail, None, []), auth
            if not reply.ok:
                return (
                    ("failed", f"session/new failed: {self.why(run, reply)}", reply.response, []),
                    auth,
                )
            session_id = reply.get("sessionId")
            if not isinstance(session_id, str) or not session_id:
                return (("failed", "no sessionId in the response", reply.response, []), auth)
            ids.append(session_id)
        if ids[0] == ids[1]:
            return (
                (
                    "failed",
                    f"two session/new calls answered the same id {ids[0]!r}",
                    second.response,
                    [],
                ),
                auth,
            )
        return PASSED, auth

    async def authenticate(self) -> Outcome:
        method = self.options.auth_method
        if method is None:
            raise Skip("no --auth-method given")
        async with self.agent() as run:
            init = as_object((await self.initialized(run)).result) or {}
            ids = [(as_object(m) or {}).get("id") for m in as_list(init.get("authMethods")) or []]
            if method not in ids:
                raise NotTestable(
                    f"auth method {method!r} is not advertised (advertised: {ids})",
                    "blocked: --auth-method names no advertised method",
                )
            reply = await self.call(run, "authenticate", {"methodId": method})
            if not reply.ok:
                raise NotTestable(
                    f"authenticate failed: {self.why(run, reply)}",
                    "blocked by authentication: authenticate fails (credentials? --env KEY=VALUE)",
                )
            if as_object(reply.result) is None and reply.result is not None:
                raise Fail("the authenticate result is not an object", reply.response)
            new = await self.call(
                run,
                "session/new",
                self.new_params(),
                self.options.startup_timeout,
            )
        if new.error_code == AUTH_REQUIRED:
            raise Fail("after authenticate, session/new still needs authentication", new.response)
        return passed(f"authenticated with {method!r}")

    async def unknown_method(self) -> Outcome:
        method = "acp_conformance/no_such_method"
        async with self.agent() as run:
            await self.setup(run, session=False)
            reply = await self.call(run, method, {})
        if reply.ok:
            raise Fail(f"{method} was answered with a result", reply.response)
        if reply.response is None:
            raise Fail(self.why(run, reply))
        if reply.error_code != METHOD_NOT_FOUND:
            raise Fail(
                f"{method} got error {reply.error_code}, not {METHOD_NOT_FOUND}", reply.response
            )
        return PASSED

    async def ext_method(self) -> tuple[Outcome, Outcome]:
        """ext-method-answered (MUST: some answer) and unknown-ext-method (SHOULD: -32601)."""
        method = "_acp_conformance/no_such_method"
        async with self.agent() as run:
            await self.setup(run, session=False)
            reply = await self.call(run, method, {})
        if reply.response is None:
            raise Fail(f"{method}: {self.why(run, reply)}")
        if reply.ok:
            return passed("answered with a result"), (
                "failed",
                f"{method} was answered with a result",
                reply.response,
                [],
            )
        if reply.error_code != METHOD_NOT_FOUND:
            return passed(error_text(reply)), (
                "failed",
                f"{method} got error {reply.error_code}, not {METHOD_NOT_FOUND}",
                reply.response,
                [],
            )
        return passed(error_text(reply)), PASSED

    async def invalid_params(self) -> Outcome:
        warnings: list[str] = []
        async with self.agent() as run:
            await self.setup(run, session=False)
            bad: list[tuple[str, dict[str, Any]]] = [
                ("session/new", {"mcpServers": []}),  # no cwd
                ("session/prompt", {"sessionId": 42, "prompt": "not a list"}),
            ]
            for method, params in bad:
                reply = await self.call(run, method, params)
                if reply.ok:
                    raise Fail(f"{method} with invalid params succeeded", reply.response)
                if reply.response is None:
                    raise Fail(f"{method} with invalid params: {self.why(run, reply)}")
                if reply.error_code != INVALID_PARAMS:
                    warnings.append(
                        f"{method} with invalid params got {reply.error_code}, not -32602"
                    )
            after = await self.call(
                run,
                "session/new",
                self.new_params(),
                self.options.startup_timeout,
            )
        if after.response is None:
            raise Fail(f"the agent stopped serving after invalid params: {self.why(run, after)}")
        return passed("", warnings)

    async def unknown_notification(self) -> Outcome:
        async with self.agent() as run:
            await self.setup(run, session=False)
            mark = len(run.client.lines)
            await run.client.notify("_acp_conformance/unknown_notification", {"probe": True})
            await run.client.notify("acp_conformance/unknown_notification", {"probe": True})
            after = await self.call(
                run,
                "session/new",
                self.new_params(),
                self.options.startup_timeout,
            )
            if after.response is not None:
                await run.client.wait_for(lambda line: False, self.options.settle)
        if after.response is None:
            raise Fail(f"the agent stopped serving: {self.why(run, after)}")
        answered = any(
            line.index > mark
            and line.method is None
            and run.client.sent_method(line.get("id")) is None
            for line in run.client.received
        )
        if answered:  # the MUST's fault: failed there, once
            return passed("", ["a notification was answered: see notification-no-response"])
        return PASSED


def _stderr_tail(run: AgentRun) -> str:
    tail = " | ".join(run.stderr)
    return f" (stderr: {tail[-400:]})" if tail else " (no stderr)"
