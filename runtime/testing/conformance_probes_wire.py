"""The conformance probes that write raw lines: JSON-RPC ids of our choosing (a string, a large
integer), and the informational probes (a prompt for an unknown session, an object that is not
a JSON-RPC message, a line that is not JSON), whose replies are recorded, never failed.
(`conformance` is the public façade.)"""

from __future__ import annotations

from typing import Any, Final

from ..methods import PROTOCOL_VERSION
from .conformance_checks import Outcome
from .conformance_harness import Fail, Harness, error_text
from .conformance_probes import passed
from .runners import AgentRun, Line

STRING_ID: Final = "acp-conformance/id 1"
BIG_ID: Final = 2**52 + 1  # an integer id no connection counter reaches, exact in a double
MALFORMED_LINE: Final = b'{"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": {'


class WireProbes(Harness):
    """The raw-line probes; one method per probe."""

    async def jsonrpc_id(self) -> Outcome:
        """A string id and a large integer id, each echoed exactly (same JSON type)."""
        async with self.agent() as run:
            init = {
                "jsonrpc": "2.0",
                "id": STRING_ID,
                "method": "initialize",
                "params": self.initialize_params(PROTOCOL_VERSION),
            }
            first = await run.client.call_raw(init, self.options.startup_timeout)
            if first is None:
                raise Fail(f"no response carrying the request id {STRING_ID!r}", self._stray(run))
            new: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": BIG_ID,
                "method": "session/new",
                "params": self.new_params(),
            }
            second = await run.client.call_raw(new, self.options.startup_timeout)
        if second is None:
            raise Fail(f"no response carrying the request id {BIG_ID}", self._stray(run))
        return passed("a string and an integer id echoed")

    def _stray(self, run: AgentRun) -> Line | None:
        """A response with an id we did not send (the offending echo), if any."""
        return next(
            (
                line
                for line in run.client.received
                if line.is_response and run.client.sent_method(line.get("id")) is None
            ),
            None,
        )

    # -- informational -----------------------------------------------------------------
    async def informational(self) -> tuple[Outcome, Outcome, Outcome]:
        """info-unknown-session, info-not-envelope, info-malformed-line: recorded, never
        failed, from one agent (the likeliest to stop it last)."""
        async with self.agent() as run:
            self.raw_runs.append(run)
            await self.setup(run, session=False)
            reply = await self.prompt(run, "acp-conformance-no-such-session", self.options.prompt)
            unknown: Outcome
            if reply.response is None:
                unknown = passed(f"no answer ({self.why(run, reply)})")
            else:
                unknown = passed(error_text(reply) if not reply.ok else "answered with a result")
                bad = self.info_strict(reply)
                if bad is not None:
                    unknown = ("failed", bad, reply.response, [])
            envelope = await self._raw_line(run, b'{"foo":"bar"}')
            if envelope[1].endswith("stopped serving"):
                return unknown, envelope, ("not testable", "the agent stopped serving", None, [])
            return unknown, envelope, await self._raw_line(run, MALFORMED_LINE)

    async def _raw_line(self, run: AgentRun, data: bytes) -> Outcome:
        """Record the reply to one raw line, and whether the agent keeps serving."""
        sent = await run.client.send_raw(data)
        reply = await run.client.wait_for(
            lambda line: line.index > sent.index and line.is_response, self.options.settle
        )
        params = self.new_params()
        after = await self.call(run, "session/new", params, self.options.startup_timeout)
        answered = "no reply" if reply is None else f"replied {reply.text(160)}"
        serving = "kept serving" if after.response is not None else "stopped serving"
        return passed(f"{answered}; {serving}")
