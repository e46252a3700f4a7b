"""Session lifecycle: create, read, update, titles, context switches, delete.

``switch_context``, as built:

* One transaction: ``session-updated`` (the new ``metadata``), then the system message "Context changed to:
  directory=…, agent=…" naming only the parts given (``message-created``), then — with
  ``regenerateTitle`` and the truncate method — ``title-changed``. The model method asks the model after that
  transaction commits (never holding the session lock during a model call) and writes its own transaction.
* A switch is recorded even when the values equal the current ones: the caller said the context changed, and
  the model should read that. It may happen while a run is in progress (as ``message.addInstructions`` may);
  the run sees the system message at its next step.
* ``regenerateTitle: true`` is an explicit request, so it may replace a ``user`` title (as
  ``session.regenerateTitle`` does). A session without a user message keeps its title; the switch succeeds.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import insert, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from typing_extensions import TypedDict

from ..domain import events, outputs
from ..domain import models as wire
from ..domain.models import TitleSource
from ..files import refs as file_refs
from ..llm import PROVIDER_IDS, default_provider_id, known_provider
from ..protocol.errors import RpcError
from ..protocol.inputs import check_text
from ..store import eventlog, repo
from ..store.db import Database
from ..store.models import ChatSession, Message, User, utcnow
from . import branches, feed, requests, transitions
from .requests import MISSING, Expand, Missing, Receipt, ReceiptT, ReplyT, RequestKey, as_is, kept_whole
from .titles import TitleService, apply_title
from .uow import UnitOfWork, can_read

# A session's settings: given at ``session.create`` and changed by ``session.update``.
SETTINGS = (
    "provider",
    "model",
    "system_prompt",
    "defaults",
    "tools",
    "tool_mode",
    "busy_policy",
    "disable_streaming",
    "mcp_servers",
    "mcp_tools",
)
UPDATABLE = (*SETTINGS, "pinned", "archived")
_WIRE_NAMES = {"system_prompt": "systemPrompt"}
# Settings every session has: ``session.update`` refuses null for them (``systemPrompt: null`` clears the prompt).
_REQUIRED = {
    "provider": "provider",
    "model": "model",
    "defaults": "defaults",
    "tools": "tools",
    "tool_mode": "toolMode",
    "busy_policy": "busyPolicy",
    "disable_streaming": "disableStreaming",
    "pinned": "pinned",
    "archived": "archived",
}


def encode_cursor(row: ChatSession) -> str:
    """Where the next page of the owner's list starts: after this session (``repo.ListKey``)."""
    raw = f"{int(row.pinned)}|{row.created_at.isoformat()}|{row.id}".encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_cursor(cursor: str) -> repo.ListKey:
    try:
        parts = base64.urlsafe_b64decode(cursor.encode()).decode().split("|", 2)
        if len(parts) == 2:  # made before pinned sessions came first: they were all unpinned
            parts.insert(0, "0")
        pinned, created, sid = parts
        when = datetime.fromisoformat(created)
    except Exception as exc:
        raise RpcError("BAD_REQUEST", "Invalid cursor") from exc
    if pinned not in ("0", "1") or when.tzinfo is None or len(sid) > 64:  # never one we made
        raise RpcError("BAD_REQUEST", "Invalid cursor")
    check_text(sid)  # decoded here, so past the input check every input gets
    return pinned == "1", when, sid


def new_session_row(
    user: User, fields: dict[str, Any], session_id: str, now: datetime, provider: str, model: str
) -> ChatSession:
    """The row ``session.create`` inserts for these fields (Python names; see ``api/sessions.py``)."""
    return ChatSession(
        id=session_id,
        owner_id=user.id,
        title=fields.get("title") or "",
        title_source="user" if fields.get("title") else "none",
        provider=provider,
        model=model,
        system_prompt=fields.get("system_prompt"),
        defaults=fields.get("defaults") or {},
        tools=fields.get("tools") or [],
        tool_mode=fields.get("tool_mode") or "parallel",
        mcp_servers=fields.get("mcp_servers") or [],
        mcp_tools=fields.get("mcp_tools") or {},
        busy_policy=fields.get("busy_policy") or "enqueue",
        disable_streaming=bool(fields.get("disable_streaming")),
        meta=fields.get("metadata") or {},
        status="idle",
        queue_paused=bool(fields.get("queue_paused")),
        usage_input_tokens=0,
        usage_output_tokens=0,
        last_seq=0,
        created_at=now,
        updated_at=now,
        pinned=False,
        archived=False,
    )


class CreatedReceipt(TypedDict):
    """What an exactly-once record keeps of a new session (``services.requests``): the values ``session.create``
    chose (its settings are the call's own)."""

    id: str
    createdAt: str  # ISO 8601
    provider: str
    model: str


CREATED: Receipt[CreatedReceipt, wire.Session] = Receipt(TypeAdapter(CreatedReceipt), TypeAdapter(wire.Session))
# ``session.fork`` and an import keep the whole session: a repeat has nothing else to rebuild it from.
KEPT_WHOLE: Receipt[wire.Session, wire.Session] = kept_whole(TypeAdapter(wire.Session))


def _created_receipt(row: ChatSession) -> CreatedReceipt:
    return {"id": row.id, "createdAt": row.created_at.isoformat(), "provider": row.provider, "model": row.model}


def _created_again(user: User, fields: dict[str, Any]) -> Expand[CreatedReceipt, wire.Session]:
    """Rebuilds a ``session.create`` reply from its receipt (id, time, provider, model) and the repeated call's
    fields, which are the first call's: the session as it was created, whatever happened to it since."""

    async def expand(receipt: CreatedReceipt) -> wire.Session:
        when = datetime.fromisoformat(receipt["createdAt"])
        return repo.session_wire(
            new_session_row(user, fields, receipt["id"], when, receipt["provider"], receipt["model"])
        )

    return expand


class SessionService:
    """Sessions of a user: create, read, list and search, update, titles, context switches, fork and delete."""

    def __init__(
        self,
        db: Database,
        uow: UnitOfWork,
        titles: TitleService | None = None,
        *,
        default_provider: str | None = None,
        default_model: str | None = None,
        max_per_user: int | None = None,
        search_scan: int = 200,
    ) -> None:
        self.db = db
        self.uow = uow
        self.titles = titles
        # Where a session asks for no provider/model: the deployment's defaults (see ``resolve_model``).
        self.default_provider = default_provider
        self.default_model = default_model
        self.max_per_user = max_per_user  # CHATSYNC_MAX_SESSIONS_PER_USER
        self.search_scan = search_scan  # CHATSYNC_SEARCH_SCAN_SESSIONS

    def resolve_model(self, provider: str | None, model: str | None) -> tuple[str, str]:
        """The provider is the caller's, else ``CHATSYNC_DEFAULT_PROVIDER``, else the first provider whose
        key is in the environment, else the offline ``echo`` model. A real provider needs a model name: the
        caller's or ``CHATSYNC_DEFAULT_MODEL`` (we do not guess model names, which change every few months)."""
        chosen = provider or self.default_provider or default_provider_id()
        if not known_provider(chosen):
            raise RpcError("BAD_REQUEST", f"unknown provider {chosen!r}; known: {', '.join(PROVIDER_IDS)}")
        if not model:
            if provider is None and self.default_model:
                model = self.default_model  # the default model goes with the default provider only
            elif chosen == "echo":
                model = "echo"
            else:
                raise RpcError(
                    "BAD_REQUEST", f"model is required for provider {chosen!r} (or set CHATSYNC_DEFAULT_MODEL)"
                )
        return chosen, model

    async def create(self, user: User, fields: dict[str, Any], request: RequestKey | None = None) -> wire.Session:
        """A new session (see :meth:`insert`)."""
        again = _created_again(user, fields)
        replayed = await self.replayed(request, CREATED, again)
        if replayed is not MISSING:
            return replayed
        now = utcnow()
        provider, model = self.resolve_model(fields.get("provider"), fields.get("model"))
        row = new_session_row(user, fields, str(uuid.uuid4()), now, provider, model)
        return await self.insert(user, row, request, CREATED, _created_receipt(row), again)

    async def replayed(
        self,
        request: RequestKey | None,
        kind: Receipt[ReceiptT, ReplyT],
        again: Expand[ReceiptT, ReplyT],
    ) -> ReplyT | Missing:
        """The first reply to a repeated ``request`` (read before any work), else ``requests.MISSING``; ``again``
        rebuilds it from the recorded receipt (of ``kind``)."""
        if request is None:
            return MISSING
        async with self.db.read() as s:
            return await requests.Ledger().replay(s, request, kind, again)

    async def insert(
        self,
        user: User,
        row: ChatSession,
        request: RequestKey | None,
        kind: Receipt[ReceiptT, wire.Session],
        receipt: ReceiptT,
        again: Expand[ReceiptT, wire.Session],
        fill: Callable[[AsyncSession], Awaitable[None]] | None = None,
    ) -> wire.Session:
        """Store the new session ``row`` of ``user`` — with what ``fill`` writes in the same transaction (an
        import's messages) — announced on the owner's feed in that transaction too; returns the session.

        A repeated ``request`` returns the first call's session (two copies racing: the loser finds the winner's
        record under the user lock, or its record insert fails; it answers with the winner's). ``max_per_user``
        is checked under the user lock in the inserting transaction, so concurrent calls cannot pass it
        together. The record keeps ``receipt`` (of ``kind``: the values a create chose, or the whole session of
        a fork or an import), which ``again`` turns back into the session."""
        session = repo.session_wire(row)
        ledger = requests.Ledger(self.uow.max_request_records)
        try:
            async with self.db.write() as s:
                if self.max_per_user is not None:
                    replayed = await self._check_room(s, user, self.max_per_user, ledger, request, kind, again)
                    if replayed is not MISSING:
                        return replayed
                s.add(row)
                await s.flush()
                if fill is not None:
                    await fill(s)
                env = await eventlog.append_feed(
                    s, user.id, events.feed_session_created(row.id, feed.summary(row, 0)), row.created_at
                )
                ledger.remember(request, kind, receipt)
                await ledger.write(s)
        except IntegrityError:
            if request is None:
                raise
            replayed = await self.replayed(request, kind, again)
            if replayed is MISSING:
                raise
            return replayed
        await self.uow.publish(feed.channel(user.id), [env])
        return session

    @staticmethod
    async def _check_room(
        db: AsyncSession,
        user: User,
        limit: int,
        ledger: requests.Ledger,
        request: RequestKey | None,
        kind: Receipt[ReceiptT, ReplyT],
        again: Expand[ReceiptT, ReplyT],
    ) -> ReplyT | Missing:
        """Under the user's lock, in the transaction that inserts the session: ``PRECONDITION_FAILED`` when the
        user has ``limit`` live sessions already, else ``requests.MISSING``. Concurrent creates, on any replica,
        take the lock in turn, so each counts what the ones before it committed. A copy of this create (the same
        client request) that committed while this one waited answers with its reply, rather than a refusal for
        the session it just made."""
        await repo.lock_user(db, user.id)
        replayed = await ledger.replay(db, request, kind, again)
        if replayed is not MISSING:
            return replayed
        if await repo.count_sessions(db, user.id) >= limit:
            raise RpcError("PRECONDITION_FAILED", f"At most {limit} sessions per user; delete some first")
        return MISSING

    async def feed_position(self, user: User) -> int:
        """The end of the user's feed now (where a ``session.feed`` without ``lastEventId`` starts)."""
        async with self.db.read() as s:
            return await eventlog.FEED_LOG.last_seq(s, feed.channel(user.id)) or 0

    async def readable(self, user: User, session_id: str) -> ChatSession:
        async with self.db.read() as s:
            row = await repo.get_session(s, session_id)
        if row is None or not can_read(user, row):
            raise RpcError("NOT_FOUND", "Session not found")
        return row

    async def list(
        self, user: User, limit: int, cursor: str | None, search: str | None, archived: bool | None = False
    ) -> outputs.SessionPage:
        """A page of the owner's list (pinned first, then newest first). With ``search``, a page examines at most
        ``search_scan`` sessions (``repo.list_sessions``), so it may hold fewer than ``limit`` with a
        ``nextCursor`` to examine the next ones."""
        after = decode_cursor(cursor) if cursor else None
        term = search.strip() if search else None
        async with self.db.read() as s:
            # The feed's position first: whatever changes after it reaches a ``session.feed`` started there,
            # so a list plus that feed never misses a change (it may repeat one the list already shows).
            position = await eventlog.FEED_LOG.last_seq(s, feed.channel(user.id)) or 0
            page, last = await repo.list_sessions(
                s, user.id, limit=limit, after=after, search=term, archived=archived, scan=self.search_scan
            )
            lengths = await repo.queue_lengths(s, [r.id for r in page])
        next_cursor = encode_cursor(last) if last is not None else None
        return {
            "items": [
                {**repo.session_wire(r).wire(), "queueLength": lengths.get(r.id, 0), **feed.unread_fields(r)}
                for r in page
            ],
            "nextCursor": next_cursor,
            "feedEventId": str(position),
        }

    async def snapshot(self, user: User, session_id: str, message_limit: int = 200) -> wire.SessionSnapshot:
        """Everything read in one transaction, at REPEATABLE READ on PostgreSQL (SQLite's WAL read transaction is
        a snapshot already): read separately, a run that ended between two reads showed up as "no run" next to
        a message still ``streaming``."""
        async with self.db.read() as s:
            if not self.db.is_sqlite:
                await s.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
            row = await repo.get_session(s, session_id)
            if row is None or not can_read(user, row):
                raise RpcError("NOT_FOUND", "Session not found")
            messages = await repo.list_messages(s, session_id, limit=message_limit + 1)
            older = len(messages) > message_limit
            messages = messages[1:] if older else messages
            versions = await repo.siblings(s, session_id, messages)
            queue = await repo.queue_rows(s, session_id)
            run = await self._run_snapshot(s, row)
        return wire.SessionSnapshot(
            session=repo.session_wire(row),
            messages=[repo.message_wire(m, versions) for m in messages],
            messages_before=messages[0].ordinal if older else None,
            queue=[repo.queued_wire(q) for q in queue],
            run=run,
            last_event_id=str(row.last_seq),
        )

    async def _run_snapshot(self, db: AsyncSession, row: ChatSession) -> dict[str, Any] | None:
        """The snapshot's ``run`` field; sessions without the run engine have none."""
        return None

    async def update(self, user: User, session_id: str, changes: dict[str, Any]) -> wire.Session:
        if changes.get("provider") is not None and not known_provider(changes["provider"]):
            raise RpcError("BAD_REQUEST", f"unknown provider {changes['provider']!r}; known: {', '.join(PROVIDER_IDS)}")
        for name, wire_name in _REQUIRED.items():
            if name in changes and changes[name] is None:
                raise RpcError("BAD_REQUEST", f"Invalid input: {wire_name} cannot be null")
        async with self.uow.session(user, session_id) as tx:
            if "provider" in changes and changes["provider"] != tx.row.provider:
                changes = {**changes, "model": self._model_for_new_provider(changes["provider"], changes.get("model"))}
            changed: list[str] = []
            for name in UPDATABLE:
                if name in changes and getattr(tx.row, name) != changes[name]:
                    setattr(tx.row, name, changes[name])
                    changed.append(_WIRE_NAMES.get(name, name))
            if changed:
                tx.row.updated_at = utcnow()
                tx.emit(events.session_updated(repo.session_changes_wire(tx.row, tuple(changed))))
            return repo.session_wire(tx.row)

    def _model_for_new_provider(self, provider: str, model: str | None) -> str:
        """The model a session gets with a new provider: the one given, else the provider's own default; never
        the old provider's model, which the new one would not know."""
        if model:
            return model
        if provider == "echo":
            return "echo"
        if provider == self.default_provider and self.default_model:
            return self.default_model
        raise RpcError("BAD_REQUEST", f"model is required when changing the provider to {provider!r}")

    async def set_title(self, user: User, session_id: str, title: str, source: TitleSource) -> wire.Session:
        async with self.uow.session(user, session_id) as tx:
            apply_title(tx, title, source)
            return repo.session_wire(tx.row)

    async def switch_context(
        self, user: User, session_id: str, directory: str | None, agent: str | None, regenerate_title: bool
    ) -> wire.Session:
        """``session.switchContext`` (see the module docstring)."""
        given = {k: v for k, v in (("directory", directory), ("agent", agent)) if v is not None}
        if not given:
            raise RpcError("BAD_REQUEST", "Invalid input: give a directory, an agent, or both")
        by_model = regenerate_title and self.titles is not None and self.titles.mode == "model"
        async with self.uow.session(user, session_id) as tx:
            tx.row.meta = {**(tx.row.meta or {}), **given}  # a new dict: JSON columns track assignment
            tx.row.updated_at = utcnow()
            tx.emit(events.session_updated(repo.session_changes_wire(tx.row, ("metadata",))))
            note = ", ".join(f"{k}={v}" for k, v in given.items())
            await transitions.add_message(tx, "system", f"Context changed to: {note}")
            if regenerate_title and not by_model and self.titles is not None:
                await self.titles.truncate_in(tx, required=False)
            session = repo.session_wire(tx.row)
        if by_model:
            assert self.titles is not None
            return await self.titles.regenerate(user, session_id, "model", required=False)
        return session

    async def delete(self, user: User, session_id: str) -> None:
        async with self.uow.session(user, session_id, head_only=True) as tx:
            tx.row.deleted_at = utcnow()
            tx.emit(events.session_deleted())

    async def messages(
        self, user: User, session_id: str, before: int | None, limit: int, leaf_id: str | None = None
    ) -> outputs.MessagePage:
        """A page of the active path, or with ``leaf_id`` of the branch from the start down to that message,
        newest last, before ordinal ``before``."""
        await self.readable(user, session_id)
        async with self.db.read() as s:
            rows: Sequence[Message]
            if leaf_id is None:
                rows = await repo.list_messages(s, session_id, before=before, limit=limit + 1)
            else:
                rows = await self._branch(s, session_id, leaf_id, before, limit + 1)
            has_more = len(rows) > limit
            page = rows[1:] if has_more else rows
            versions = await repo.siblings(s, session_id, page)
        return {
            "items": [repo.message_wire(m, versions).wire() for m in page],
            "nextCursor": page[0].ordinal if has_more and page else None,
        }

    @staticmethod
    async def _branch(
        db: AsyncSession, session_id: str, leaf_id: str, before: int | None, limit: int
    ) -> Sequence[Message]:
        nodes = await repo.message_tree(db, session_id)
        if not any(n[0] == leaf_id for n in nodes):
            raise RpcError("NOT_FOUND", "Message not found")
        ordinals = {n[0]: n[2] for n in nodes}
        ids = [i for i in branches.path_to(nodes, leaf_id) if before is None or ordinals[i] < before][-limit:]
        rows = {m.id: m for m in await repo.messages_by_id(db, ids)}
        return [rows[i] for i in ids]

    async def fork(
        self, user: User, session_id: str, message_id: str, title: str | None, request: RequestKey | None = None
    ) -> wire.Session:
        """``session.fork``: a new session of ``user`` with the source's settings whose history is a copy of the
        path up to ``message_id`` (uploaded files are shared, not copied); announced on the owner's feed."""
        replayed = await self.replayed(request, KEPT_WHOLE, as_is)
        if replayed is not MISSING:
            return replayed
        source = await self.readable(user, session_id)
        async with self.db.read() as s:
            nodes = await repo.message_tree(s, session_id)
            if not any(n[0] == message_id for n in nodes):
                raise RpcError("NOT_FOUND", "Message not found")
            ids = branches.path_to(nodes, message_id)
            found = {m.id: m for m in await repo.messages_by_id(s, ids)}
        now = utcnow()
        fields = {
            "title": title,
            "system_prompt": source.system_prompt,
            "defaults": source.defaults,
            "tools": source.tools,
            "tool_mode": source.tool_mode,
            "busy_policy": source.busy_policy,
            "disable_streaming": source.disable_streaming,
            "metadata": source.meta,
        }
        row = new_session_row(user, fields, str(uuid.uuid4()), now, source.provider, source.model)
        if title is None:
            row.title, row.title_source = source.title, source.title_source
        copies = branches.copies(row.id, [found[i] for i in ids], now)

        async def fill(db: AsyncSession) -> None:
            if copies:
                await db.execute(insert(Message.__table__), copies)
            for copy in copies:
                await file_refs.link(db, row.id, copy["attachments"])

        return await self.insert(user, row, request, KEPT_WHOLE, repo.session_wire(row), as_is, fill)
