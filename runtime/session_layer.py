"""The session layer's schema-independent core: sessions kept in a `SessionStore`, in wire JSON.

The generated `sessions.py` wraps it in typed handlers (`SessionAgent`): each decodes its
answer from the wire JSON built here with the schema's own `from_dict`, so nothing leaves that
the schema has not accepted. What the schema has (which methods, which response fields, which
update kinds) arrives as `Features`, decided at generation time.

Recording: every conversation entry a turn sends is buffered and written in batches (group
commit: one `store.save` per batch of up to `batch` entries or `delay` seconds), and the buffer
is flushed before every answer, so a kill -9 loses at most the entries of the turn in flight.
Replay sends the stored entries verbatim: the replayed updates are exactly the live ones.

Running turns (`session_claims.Turns`) are registered per store and session in this process, so
`session/cancel`, `session/close` and `session/delete` interrupt them; across processes the
store's claim makes a second concurrent prompt on one session fail with -32600 (not queued).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, cast

from .dispatch import RequestError
from .session_claims import Turns
from .session_live import (
    Features,
    Json,
    LiveSession,
    Recorder,
    Send,
    SendEncoded,
    encode,
    not_found,
    now,
    store_failed,
)
from .session_store import RecordedEntry, SessionExists, SessionRecord, SessionStore, StoreError

__all__ = ["Features", "LiveSession", "SessionCore", "now"]

MODE_OPTION_ID: Final = "mode"
PAGE_SIZE: Final = 50


class SessionCore:
    """The lifecycle methods over a store, in wire JSON, for one connection's owner."""

    def __init__(
        self,
        store: SessionStore,
        features: Features,
        send: Send,
        send_encoded: SendEncoded,
        owner: Callable[[], str],
        *,
        modes: Sequence[Json] = (),
        config_options: Sequence[Json] = (),
        batch: int = 1024,
        delay: float = 0.05,
        factory: type[LiveSession] = LiveSession,
        info_after_turn: bool = True,
    ) -> None:
        self.info_after_turn = info_after_turn
        self.factory = factory
        self.store, self.features, self.send, self.owner = store, features, send, owner
        self.send_encoded = send_encoded
        self.turns = Turns(store, owner)
        self.modes = list(modes)
        self.options = [dict(o) for o in config_options]
        if self.modes and not any(o.get("category") == "mode" for o in self.options):
            # The modes as a config option too (session-config-options: category "mode").
            values = [
                {"value": m["id"], **{k: m[k] for k in ("name", "description") if k in m}}
                for m in self.modes
            ]
            self.options.insert(0, {
                "id": MODE_OPTION_ID, "name": "Mode", "category": "mode", "type": "select",
                "currentValue": self.modes[0]["id"], "options": values,
            })  # fmt: skip
        self.batch, self.delay = batch, delay

    # -- state ------------------------------------------------------------------------
    def _mode_option(self) -> Json | None:
        return (
            next((o for o in self.options if o.get("category") == "mode"), None)
            if self.modes
            else None
        )

    def config_options(self, session: LiveSession) -> list[Json]:
        out: list[Json] = []
        for option in self.options:
            value = session.config.get(option["id"], option.get("currentValue"))
            if option is self._mode_option():
                value = session.mode
            out.append({**option, "currentValue": value})
        return out

    def session_state(self, method: str, session: LiveSession) -> Json:
        """The state fields of a new/load/resume answer that its result type has."""
        fields = self.features.response_fields.get(method, frozenset())
        out: Json = {}
        if "modes" in fields and self.modes:
            out["modes"] = {"currentModeId": session.mode, "availableModes": self.modes}
        if "configOptions" in fields and self.options:
            out["configOptions"] = self.config_options(session)
        return out

    async def save(self, session: LiveSession, entries: Sequence[Mapping[str, Any]]) -> None:
        record = await self.store.save(
            session.owner, session.id, updated_at=now(), title=session.title,
            state=session.state(), entries=entries,
        )  # fmt: skip
        if record is None:
            raise StoreError(f"session {session.id!r} was deleted while in use")
        session.updated_at = record.updated_at

    async def info_update(self, session: LiveSession) -> None:
        if "session_info_update" in self.features.update_tags:
            update: Json = {"sessionUpdate": "session_info_update", "updatedAt": session.updated_at}
            if session.title is not None:
                update["title"] = session.title
            await self.send(session.id, update)

    async def open(self, session_id: str) -> LiveSession:
        """The owner's session (the running turn's view when one runs here), else -32002."""
        live = self.turns.live(session_id)
        if live is not None:
            return live
        try:
            record = await self.store.get(self.owner(), session_id)
        except StoreError as exc:
            raise store_failed(exc) from exc
        if record is None:
            raise not_found(session_id)
        return self.factory(self, record)

    # -- lifecycle --------------------------------------------------------------------
    @staticmethod
    def check_cwd(params: Mapping[str, Any]) -> str:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RequestError.invalid_params(
                f"cwd must be an absolute path, got {cwd!r}", "params.cwd"
            )
        return cwd

    async def new(self, params: Mapping[str, Any]) -> Json:
        cwd = self.check_cwd(params)
        stamp = now()
        mode = self.modes[0]["id"] if self.modes else None
        config = {
            o["id"]: o.get("currentValue") for o in self.options if o is not self._mode_option()
        }
        state = {
            "mode": mode,
            "config": config,
            "mcpServers": list(params.get("mcpServers") or []),
            "data": {},
        }
        record = SessionRecord(self.owner(), "", cwd, stamp, stamp, None, state)
        for _ in range(3):
            record = SessionRecord(
                self.owner(), f"sess_{uuid.uuid4().hex}", cwd, stamp, stamp, None, state
            )
            try:
                await self.store.create(record)
                break
            except SessionExists:
                continue
            except StoreError as exc:
                raise store_failed(exc) from exc
        return {
            "sessionId": record.session_id,
            **self.session_state("session/new", self.factory(self, record)),
        }

    async def load(self, params: Mapping[str, Any]) -> Json:
        self.check_cwd(params)
        session = await self.open(str(params.get("sessionId")))
        try:
            if session.recorder is not None:  # a turn runs here: what it sent is replayed too
                await session.recorder.flush()
            async for entry in self.store.replay(session.owner, session.id):
                # sent as recorded: the bytes of the live update when the store kept them
                data = entry.json if isinstance(entry, RecordedEntry) else encode(entry)
                await self.send_encoded(session.params(data))
        except StoreError as exc:
            raise store_failed(exc) from exc
        return self.session_state("session/load", session)

    async def resume(self, params: Mapping[str, Any]) -> Json:
        self.check_cwd(params)
        session = await self.open(str(params.get("sessionId")))
        return self.session_state("session/resume", session)

    async def list(self, params: Mapping[str, Any]) -> Json:
        cwd, cursor = params.get("cwd"), params.get("cursor")
        try:
            page = await self.store.list(self.owner(), cwd=cwd, after=cursor, limit=PAGE_SIZE)
        except ValueError as exc:
            raise RequestError.invalid_params(
                f"not a cursor this agent gave: {cursor!r}", "params.cursor"
            ) from exc
        except StoreError as exc:
            raise store_failed(exc) from exc
        fields = self.features.info_fields
        sessions: list[Json] = []
        for record in page.sessions:
            info: Json = {"sessionId": record.session_id, "cwd": record.cwd}
            if "title" in fields and record.title is not None:
                info["title"] = record.title
            if "updatedAt" in fields:
                info["updatedAt"] = record.updated_at
            sessions.append(info)
        out: Json = {"sessions": sessions}
        if page.next_cursor is not None:
            out["nextCursor"] = page.next_cursor
        return out

    async def close(self, params: Mapping[str, Any]) -> Json:
        session = await self.open(str(params.get("sessionId")))
        await self.turns.interrupt(session.id)
        return {}

    async def delete(self, params: Mapping[str, Any]) -> Json:
        session_id = str(params.get("sessionId"))
        await self.turns.interrupt(session_id)
        try:  # an unknown (or another owner's) session: success, nothing done (session-delete)
            await self.store.delete(self.owner(), session_id)
        except StoreError as exc:
            raise store_failed(exc) from exc
        return {}

    async def set_mode(self, params: Mapping[str, Any]) -> Json:
        session = await self.open(str(params.get("sessionId")))
        mode = params.get("modeId")
        if mode not in {m["id"] for m in self.modes}:
            raise RequestError.invalid_params(f"unknown mode {mode!r}", "params.modeId")
        await self._change(session, mode=mode)
        return {}

    async def set_config_option(self, params: Mapping[str, Any]) -> Json:
        session = await self.open(str(params.get("sessionId")))
        config_id, value = params.get("configId"), params.get("value")
        option = next((o for o in self.options if o["id"] == config_id), None)
        if option is None:
            raise RequestError.invalid_params(
                f"unknown config option {config_id!r}", "params.configId"
            )
        if not _allowed(option, value):
            raise RequestError.invalid_params(
                f"{value!r} is not a value of {config_id!r}", "params.value"
            )
        if option is self._mode_option():
            await self._change(session, mode=value)
        else:
            session.config[option["id"]] = value
            await self._store(session)
        return {"configOptions": self.config_options(session)}

    async def _change(self, session: LiveSession, *, mode: Any) -> None:
        """Set the mode and tell the client both views of it (the mode and its config option)."""
        session.mode = mode
        await self._store(session)
        tags = self.features.update_tags
        if "current_mode_update" in tags:
            await self.send(
                session.id, {"sessionUpdate": "current_mode_update", "currentModeId": mode}
            )
        if "config_option_update" in tags and self.options:
            update = {
                "sessionUpdate": "config_option_update",
                "configOptions": self.config_options(session),
            }
            await self.send(session.id, update)

    async def _store(self, session: LiveSession) -> None:
        try:
            if session.recorder is not None:
                await session.recorder.flush()
            else:
                await self.save(session, [])
        except StoreError as exc:
            raise store_failed(exc) from exc

    # -- prompt turn ------------------------------------------------------------------
    async def prompt(
        self, params: Mapping[str, Any], turn: Callable[[LiveSession], Awaitable[str | None]]
    ) -> Json:
        """Run `turn` on the session, recording the prompt and what it sends; its stop reason
        (None: `end_turn`), or `cancelled` when cancel/close/delete interrupted it."""
        session = await self.open(str(params.get("sessionId")))
        async with self.turns.claimed(session):
            recorder = session.recorder = Recorder(self, session)
            try:
                blocks: list[Any] = list(params.get("prompt") or [])
                for block in blocks:
                    recorder.add({"sessionUpdate": "user_message_chunk", "content": block})
                stop = await self.turns.run(session, turn(session))
                try:
                    await recorder.flush()
                except StoreError as exc:
                    raise store_failed(exc) from exc
                if self.info_after_turn:  # updatedAt moved
                    await self.info_update(session)
                return {"stopReason": stop or "end_turn"}
            finally:
                recorder.close()

    def cancel(self, params: Mapping[str, Any]) -> Awaitable[None]:
        return self.turns.interrupt(str(params.get("sessionId")))

    def capabilities(self, given: Mapping[str, Any]) -> Json:
        """Initialize's capabilities: the author's, plus exactly what the layer serves."""
        out = dict(given)
        served = self.features.served
        if "session/load" in served:  # v1's flag; v2 has no session/load
            out["loadSession"] = True
        field = self.features.session_capabilities_field
        caps = dict(out.get(field) or {}) if field else {}
        for key in self.features.session_capabilities:
            if f"session/{key}" in served:
                caps[key] = {}
        if caps:
            out[field] = caps
        return out


def _allowed(option: Mapping[str, Any], value: Any) -> bool:
    if option.get("type") == "boolean":
        return isinstance(value, bool)
    values: set[Any] = set()
    items: list[Any] = list(option.get("options") or [])
    for item in items:
        if not isinstance(item, dict):
            continue
        entry = cast("dict[str, Any]", item)
        if "options" in entry:  # a group of options
            group: list[Any] = list(entry["options"] or [])
            values.update(
                cast("dict[str, Any]", o).get("value") for o in group if isinstance(o, dict)
            )
        else:
            values.add(entry.get("value"))
    return value in values
