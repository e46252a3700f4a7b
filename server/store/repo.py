"""Repositories: named queries over the tables. They flush and never commit; services own the transaction."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar

from sqlalchemy import Integer, Row, Text, bindparam, cast, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased, make_transient_to_detached

from ..domain import models as wire
from ..domain.outputs import MessageJson
from .models import ApiToken, ChatSession, Event, Message, QueuedMessage, Run, ToolCallRow, User
from .prepared import Executor, PlainConnection, PreparedConnection
from .run_rows import TABLES, CallRow, MessageFields, MessageRow, QueuedRow, RunRow, from_values
from .session_row import SessionFields

ModelT = TypeVar("ModelT")

_INSERTS: dict[Any, tuple[Any, list[tuple[str, str, Any]]]] = {}


def insert_values(row: Any) -> tuple[Any, dict[str, Any]]:
    """A new ORM object as a constant ``INSERT`` of its table and its values by column (a column left unset
    gets its Python default, which is also set on the object, so every attribute is loaded)."""
    mapper = type(row).__mapper__
    known = _INSERTS.get(mapper)
    if known is None:
        table = mapper.local_table
        attrs = [(prop.key, prop.columns[0].name, prop.columns[0].default) for prop in mapper.column_attrs]
        known = _INSERTS[mapper] = (insert(table), attrs)
    statement, attrs = known
    values = {}
    for key, column, default in attrs:
        value = getattr(row, key)
        if value is None and default is not None:
            value = default.arg(None) if default.is_callable else default.arg
        setattr(row, key, value)  # loaded, also when None: an unset attribute would be expired, read lazily
        values[column] = value
    return statement, values


def _columns(mapper: Any) -> list[tuple[str, Any]]:
    return [(prop.key, prop.columns[0]) for prop in mapper.column_attrs]


_LOADS: dict[tuple[Any, bool], tuple[Any, list[str]]] = {}


async def load(
    db: AsyncSession, plain: Executor, model: type[ModelT], key: tuple[Any, ...], *, lock: bool = False
) -> ModelT | None:
    """``db.get(model, key)`` with one prepared statement on ``plain`` (the connection under ``db``'s
    transaction): the row becomes an object of the session as if the ORM had loaded it, so changes to it are
    flushed as usual, without the ORM's per-query work. ``lock``: ``SELECT ... FOR UPDATE``. A :class:`ChatSession`
    that was deleted is not found."""
    mapper = model.__mapper__  # type: ignore[attr-defined]
    found = db.sync_session.identity_map.get(mapper.identity_key_from_primary_key(key))
    if found is not None:
        return found  # type: ignore[no-any-return]
    known = _LOADS.get((mapper, lock))
    if known is None:
        cols = _columns(mapper)
        pk = list(mapper.primary_key)
        stmt = select(*(c for _, c in cols)).where(*(c == bindparam(f"pk{i}") for i, c in enumerate(pk)))
        if model is ChatSession:
            stmt = stmt.where(ChatSession.deleted_at.is_(None))
        known = _LOADS[(mapper, lock)] = (stmt.with_for_update() if lock else stmt, [k for k, _ in cols])
    stmt, keys = known
    row = (await plain.execute(stmt, {f"pk{i}": v for i, v in enumerate(key)})).first()
    if row is None:
        return None
    obj = model(**dict(zip(keys, row, strict=True)))
    make_transient_to_detached(obj)
    db.add(obj)
    return obj


def ms(ts: datetime) -> int:
    return int(ts.timestamp() * 1000)


# --- users and tokens --------------------------------------------------------------------------------


async def user_by_token_hash(db: AsyncSession, token_hash: str) -> User | None:
    stmt = select(User).join(ApiToken, ApiToken.user_id == User.id).where(ApiToken.token_hash == token_hash)
    return (await db.execute(stmt)).scalar_one_or_none()


async def user_by_name(db: AsyncSession, name: str) -> User | None:
    return (await db.execute(select(User).where(User.name == name))).scalar_one_or_none()


async def count_users(db: AsyncSession) -> int:
    return (await db.execute(select(func.count()).select_from(User))).scalar_one()


# FOR NO KEY UPDATE on PostgreSQL: it excludes every other ``lock_user`` (and updates of the user row) but not
# the key-share lock that inserting a row referencing the user takes (a feed event, a client request record,
# a session), so writes that only point at the user neither wait for it nor deadlock with it.
_LOCK_USER = select(User.id).where(User.id == bindparam("uid")).with_for_update(key_share=True)


async def lock_user(db: Executor, user_id: str) -> None:
    """Serialise this transaction with every other one that locks the same user, until it ends.

    Per-user bounds (sessions, files, bytes stored, uploads in flight) are re-checked after this call inside the
    transaction that commits the change, so concurrent requests — on any replica — cannot pass a bound together.
    On PostgreSQL it is a row lock on the user; on SQLite every write transaction already holds the database's one
    write lock from its first statement (``BEGIN IMMEDIATE``), so on a SQLite file's prepared connection (only ever
    inside such a transaction) there is nothing to do, and elsewhere the statement only reads.
    """
    if isinstance(db, PreparedConnection):
        return
    await db.execute(_LOCK_USER, {"uid": user_id})


# --- sessions -----------------------------------------------------------------------------------------


# The hottest statements are built once: SQLAlchemy then skips building and cache-keying them per call.
_GET_SESSION = select(ChatSession).where(ChatSession.id == bindparam("sid"), ChatSession.deleted_at.is_(None))
_GET_SESSION_LOCKED = _GET_SESSION.with_for_update()


async def get_session(db: AsyncSession, session_id: str, *, lock: bool = False) -> ChatSession | None:
    """A live (not deleted) session. ``lock`` takes the row lock that serialises writers to one session."""
    stmt = _GET_SESSION_LOCKED if lock else _GET_SESSION
    return (await db.execute(stmt, {"sid": session_id})).scalar_one_or_none()


# Search (``session.list``'s ``search``): a case-insensitive substring of the title or of a message's text. No
# index can serve ``LIKE '%term%'``, so what one call reads is bounded instead (docs/api.md "Limits"): it examines
# at most ``scan`` of the owner's sessions, in list order after the cursor, and in each of those only the newest
# SEARCH_MESSAGES_PER_SESSION user and assistant messages, each up to its first SEARCH_MESSAGE_CHARS characters.
SEARCH_MESSAGES_PER_SESSION = 1000
SEARCH_MESSAGE_CHARS = 10_000
SEARCHED_ROLES = ("user", "assistant")


def like_pattern(term: str) -> str:
    """``%term%`` with LIKE's wildcards (and the escape character itself) taken literally (``ESCAPE '\\'``)."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


ListKey = tuple[bool, datetime, str]
"""Where a page of the owner's list ends: (pinned, created_at, id) of its last session."""


def _in_list_order(stmt: Any, after: ListKey | None, limit: int) -> Any:
    """One page of the owner's list: pinned first, then newest first, starting after ``after``."""
    if after is not None:
        pinned, created, sid = after
        later = (ChatSession.created_at < created) | ((ChatSession.created_at == created) & (ChatSession.id < sid))
        if pinned:
            stmt = stmt.where(ChatSession.pinned.is_(False) | (ChatSession.pinned.is_(True) & later))
        else:
            stmt = stmt.where(ChatSession.pinned.is_(False) & later)
    order = (ChatSession.pinned.desc(), ChatSession.created_at.desc(), ChatSession.id.desc())
    return stmt.order_by(*order).limit(limit)


def _message_matches(session_id: Any, pattern: str) -> Any:
    """Whether one of the session's newest searched messages contains the pattern (bounded: see above)."""
    latest = aliased(Message)
    newest = select(func.max(latest.ordinal)).where(latest.session_id == session_id).scalar_subquery()
    return (
        select(Message.id)
        .where(
            Message.session_id == session_id,
            Message.ordinal > newest - SEARCH_MESSAGES_PER_SESSION,
            Message.role.in_(SEARCHED_ROLES),
            func.substr(Message.content, 1, SEARCH_MESSAGE_CHARS).ilike(pattern, escape="\\"),
        )
        .exists()
    )


async def list_sessions(
    db: AsyncSession,
    owner_id: str,
    *,
    limit: int,
    after: ListKey | None,
    search: str | None = None,
    archived: bool | None = False,
    scan: int = 200,
) -> tuple[Sequence[ChatSession], ChatSession | None]:
    """The owner's live sessions in list order (pinned first, then newest first), at most ``limit``, starting
    after ``after``; ``archived`` picks archived or other sessions (None: both).

    Returns the page and, when more may follow, the session the next page starts after: the page's last when
    it is full, or — for a search that examined ``scan`` sessions without filling the page — the last session it
    examined (which may not be in the page)."""
    stmt = select(ChatSession).where(ChatSession.owner_id == owner_id, ChatSession.deleted_at.is_(None))
    if archived is not None:
        stmt = stmt.where(ChatSession.archived.is_(archived))
    if not search:
        rows = (await db.execute(_in_list_order(stmt, after, limit + 1))).scalars().all()
        return rows[:limit], rows[limit - 1] if len(rows) > limit else None
    examined = _in_list_order(stmt, after, scan).subquery()
    window = aliased(ChatSession, examined)
    pattern = like_pattern(search)
    matching = select(window).where(window.title.ilike(pattern, escape="\\") | _message_matches(window.id, pattern))
    order = (window.pinned.desc(), window.created_at.desc(), window.id.desc())
    rows = (await db.execute(matching.order_by(*order).limit(limit + 1))).scalars().all()
    if len(rows) > limit:
        return rows[:limit], rows[limit - 1]
    last = (await db.execute(select(window).order_by(*order).offset(scan - 1).limit(1))).scalar_one_or_none()
    return rows, last


async def count_sessions(db: AsyncSession, owner_id: str) -> int:
    stmt = (
        select(func.count())
        .select_from(ChatSession)
        .where(ChatSession.owner_id == owner_id, ChatSession.deleted_at.is_(None))
    )
    return int((await db.execute(stmt)).scalar_one())


_ACTIVE = ChatSession.__table__.alias("active")


def _active_runs(owner: Any) -> Any:
    """How many live sessions of ``owner`` (a parameter or a column) have a run in progress."""
    return (
        select(func.count())
        .select_from(_ACTIVE)
        .where(_ACTIVE.c.owner_id == owner, _ACTIVE.c.run_id.is_not(None), _ACTIVE.c.deleted_at.is_(None))
    )


_COUNT_ACTIVE_RUNS = _active_runs(bindparam("uid")).where(_ACTIVE.c.id != bindparam("sid"))


async def count_active_runs(db: Executor, owner_id: str, *, other_than: str) -> int:
    """The owner's live sessions with a run in progress (running or waiting for tool outputs or approvals),
    not counting the session ``other_than``."""
    return int((await db.execute(_COUNT_ACTIVE_RUNS, {"uid": owner_id, "sid": other_than})).one()[0])


def _newest_first(stmt: Any, after: tuple[datetime, str] | None, limit: int) -> Any:
    """One page of sessions, newest first, starting after ``(created_at, id)`` of the previous page's last."""
    if after is not None:
        created, sid = after
        stmt = stmt.where(
            (ChatSession.created_at < created) | ((ChatSession.created_at == created) & (ChatSession.id < sid))
        )
    return stmt.order_by(ChatSession.created_at.desc(), ChatSession.id.desc()).limit(limit)


def session_wire(row: SessionFields) -> wire.Session:
    return wire.Session(
        id=row.id,
        title=row.title,
        title_source=row.title_source,
        provider=row.provider,
        model=row.model,
        system_prompt=row.system_prompt,
        defaults=row.defaults or {},
        tools=row.tools or [],
        tool_mode=row.tool_mode,
        busy_policy=row.busy_policy,
        disable_streaming=row.disable_streaming,
        metadata=row.meta or {},
        status=row.status,
        queue_paused=row.queue_paused,
        usage=wire.Usage(input_tokens=row.usage_input_tokens, output_tokens=row.usage_output_tokens),
        last_seq=row.last_seq,
        created_at=ms(row.created_at),
        updated_at=ms(row.updated_at),
        pinned=row.pinned,
        archived=row.archived,
        mcp_servers=row.mcp_servers or [],
        mcp_tools=row.mcp_tools or {},
    )


# The fields of a session that can be large (a tool list of 128 JSON schemas, a long system prompt): a
# ``session-updated`` event carries them only when they changed, so a status change stays a few hundred bytes.
LARGE_SESSION_FIELDS = ("tools", "systemPrompt", "defaults", "metadata")


def session_changes_wire(row: SessionFields, changed_large: tuple[str, ...] = ()) -> dict[str, Any]:
    """The session as ``session-updated`` carries it (docs/api.md): clients merge it into theirs.

    Built as a dict, field for field what ``session_wire(row).wire()`` gives (in its order, without the large
    fields that did not change) but without the model's validation: every status change and every run's end
    writes one, and the large fields it leaves out are never read (nor, on a locked row, decoded)."""
    large = {name: name in changed_large for name in LARGE_SESSION_FIELDS}
    body: dict[str, Any] = {
        "id": row.id,
        "title": row.title,
        "titleSource": row.title_source,
        "provider": row.provider,
        "model": row.model,
    }
    if large["systemPrompt"]:
        body["systemPrompt"] = row.system_prompt
    if large["defaults"]:
        body["defaults"] = copy.deepcopy(row.defaults or {})
    if large["tools"]:
        body["tools"] = copy.deepcopy(row.tools or [])
    body["toolMode"] = row.tool_mode
    body["busyPolicy"] = row.busy_policy
    body["disableStreaming"] = bool(row.disable_streaming)
    if large["metadata"]:
        body["metadata"] = copy.deepcopy(row.meta or {})
    body["status"] = row.status
    body["queuePaused"] = bool(row.queue_paused)
    body["usage"] = {"inputTokens": int(row.usage_input_tokens), "outputTokens": int(row.usage_output_tokens)}
    body["lastSeq"] = int(row.last_seq)
    body["createdAt"] = ms(row.created_at)
    body["updatedAt"] = ms(row.updated_at)
    body["pinned"] = bool(row.pinned)
    body["archived"] = bool(row.archived)
    body["mcpServers"] = list(row.mcp_servers or [])
    body["mcpTools"] = copy.deepcopy(row.mcp_tools or {})
    return body


# --- messages -----------------------------------------------------------------------------------------


_ACTIVE_PATH = (
    select(Message).where(Message.session_id == bindparam("sid"), Message.active.is_(True)).order_by(Message.ordinal)
)


async def list_messages(
    db: AsyncSession, session_id: str, *, before: int | None = None, limit: int | None = None
) -> list[Message]:
    """The active path in order; with ``limit``, its newest ``limit`` messages before ordinal ``before``."""
    if before is None and limit is None:  # every step of a run reads it: a statement built once
        return list((await db.execute(_ACTIVE_PATH, {"sid": session_id})).scalars().all())
    stmt = select(Message).where(Message.session_id == session_id, Message.active.is_(True))
    if before is not None:
        stmt = stmt.where(Message.ordinal < before)
    if limit is None:
        return list((await db.execute(stmt.order_by(Message.ordinal))).scalars().all())
    rows = (await db.execute(stmt.order_by(Message.ordinal.desc()).limit(limit))).scalars().all()
    return list(reversed(rows))


class HistoryRow(Protocol):
    """What a model request is made from, of one message (``engine.history``): a :class:`Message`, or a
    :data:`StoredRow` once its JSON is read."""

    @property
    def id(self) -> str: ...
    @property
    def role(self) -> wire.Role: ...
    @property
    def content(self) -> str: ...
    @property
    def attachments(self) -> list[dict[str, Any]]: ...
    @property
    def tool_calls(self) -> list[dict[str, Any]] | None: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def status(self) -> wire.MessageStatus: ...
    @property
    def is_error(self) -> bool: ...


StoredRow = tuple[str, str, str, str | None, str | None, str | None, str, int]
"""One message of the active path as a model request reads it, as stored: (id, role, content, attachments as JSON
text, tool calls as JSON text or None, tool call id, status, is_error as 0 or 1). Plain values only, so rows read
by two steps compare as values (``engine.history.Conversations``)."""

# Rows of the active path read by one statement. A step of a long chat reads it in pages and gives the event loop
# back between two of them (on SQLite the read runs on the loop, inside the step's write transaction).
STORED_PAGE = 1000
_STORED_HISTORY = (
    select(
        Message.id,
        Message.role,
        Message.content,
        cast(Message.attachments, Text),
        cast(Message.tool_calls, Text),
        Message.tool_call_id,
        Message.status,
        cast(Message.is_error, Integer),
    )
    .where(Message.session_id == bindparam("sid"), Message.active.is_(True))
    .order_by(Message.ordinal)
    .limit(STORED_PAGE)
)
_PAGE_END = aliased(Message, name="page_end")
_STORED_HISTORY_AFTER = _STORED_HISTORY.where(
    Message.ordinal > select(_PAGE_END.ordinal).where(_PAGE_END.id == bindparam("after")).scalar_subquery()
)


async def stored_history(db: Executor, session_id: str) -> list[StoredRow]:
    """The active path in order, as stored (:data:`StoredRow`): no column is converted on the way (every step
    of a run reads the whole conversation; ``engine.history`` converts only the messages it has not seen)."""
    page = (await db.execute(_STORED_HISTORY, {"sid": session_id})).all()
    rows = [row if type(row) is tuple else tuple(row) for row in page]
    while len(page) == STORED_PAGE:
        # Each page gives the event loop back: on SQLite the read runs on the loop, and a long chat's path
        # would otherwise hold it for several pages at a time.
        await asyncio.sleep(0)
        page = (await db.execute(_STORED_HISTORY_AFTER, {"sid": session_id, "after": rows[-1][0]})).all()
        rows.extend(row if type(row) is tuple else tuple(row) for row in page)
    return rows


TreeNode = tuple[str, str | None, int, bool, int]
"""One message of a session's tree, without its content: (id, parent id, ordinal, active, left seq)."""

_TREE = (
    select(Message.id, Message.parent_id, Message.ordinal, Message.active, Message.left_seq)
    .where(Message.session_id == bindparam("sid"))
    .order_by(Message.ordinal)
)


async def message_tree(db: Executor, session_id: str) -> list[TreeNode]:
    """Every message of the session as a tree node, in creation order (a few columns each)."""
    return [
        (r[0], r[1], int(r[2]), bool(r[3]), int(r[4])) for r in (await db.execute(_TREE, {"sid": session_id})).all()
    ]


_LEAF = (
    select(Message.id)
    .where(Message.session_id == bindparam("sid"), Message.active.is_(True))
    .order_by(Message.ordinal.desc())
    .limit(1)
)


async def active_leaf(db: Executor, session_id: str) -> str | None:
    """The id of the last message of the active path (None: no message)."""
    found = (await db.execute(_LEAF, {"sid": session_id})).first()
    return None if found is None else str(found[0])


_POINT = select(
    select(func.coalesce(func.max(Message.ordinal), 0))
    .where(Message.session_id == bindparam("sid"))
    .scalar_subquery()
    .label("top"),
    _LEAF.scalar_subquery().label("leaf"),
).subquery("point")
_UNDER_LEAF = aliased(Message, name="under_leaf")
# One row per message under the active path's last one (the new message's versions so far), each carrying the
# append point; one row with a null id when there is none. A left join from the one-row point, so an index
# lookup on (session_id, parent_id) finds the versions.
_APPEND_POINT = (
    select(_POINT.c.top, _POINT.c.leaf, _UNDER_LEAF.id)
    .select_from(_POINT)
    .outerjoin(
        _UNDER_LEAF,
        (_UNDER_LEAF.session_id == bindparam("sid")) & (_UNDER_LEAF.parent_id == _POINT.c.leaf),
    )
    .order_by(_UNDER_LEAF.ordinal)
)


class AppendPoint(NamedTuple):
    """Where a new message goes: its ordinal, its parent (the last message of the active path; None for an
    empty one), and the messages already under that parent in creation order (None when there is no parent:
    :func:`versions_of` reads the versions at the start)."""

    ordinal: int
    parent_id: str | None
    versions_before: list[str] | None


async def append_point(db: Executor, session_id: str) -> AppendPoint:
    """Where a new message goes (callers hold the session row lock), in one statement with its versions so far."""
    rows = (await db.execute(_APPEND_POINT, {"sid": session_id})).all()
    top, leaf = rows[0][0], rows[0][1]
    if leaf is None:
        return AppendPoint(int(top) + 1, None, None)
    return AppendPoint(int(top) + 1, leaf, [r[2] for r in rows if r[2] is not None])


async def versions_at(
    db: Executor, session_id: str, point: AppendPoint, row: MessageFields
) -> dict[str | None, list[str]]:
    """The versions of ``row``, just stored at ``point``: the messages its parent already had and ``row`` (the
    newest of them); read (:func:`versions_of`) only for a message at the start of an empty path."""
    if point.versions_before is None:
        return await versions_of(db, session_id, row)
    return {row.parent_id: [*point.versions_before, row.id]}


_VERSIONS_UNDER = (
    select(Message.id)
    .where(Message.session_id == bindparam("sid"), Message.parent_id == bindparam("parent"))
    .order_by(Message.ordinal)
)
_VERSIONS_AT_START = (
    select(Message.id)
    .where(Message.session_id == bindparam("sid"), Message.parent_id.is_(None))
    .order_by(Message.ordinal)
)


async def versions_of(db: Executor, session_id: str, row: MessageFields) -> dict[str | None, list[str]]:
    """:func:`siblings` of one message, with constant statements (the run's path: ``store.prepared``)."""
    if row.parent_id is None:
        found = (await db.execute(_VERSIONS_AT_START, {"sid": session_id})).all()
    else:
        found = (await db.execute(_VERSIONS_UNDER, {"sid": session_id, "parent": row.parent_id})).all()
    return {row.parent_id: [r[0] for r in found]}


async def siblings(db: AsyncSession, session_id: str, rows: Sequence[Message]) -> dict[str | None, list[str]]:
    """The versions under each parent of ``rows`` (parent id -> message ids in creation order)."""
    parents = {r.parent_id for r in rows}
    if not parents:
        return {}
    named = [p for p in parents if p is not None]
    conds: list[Any] = [Message.parent_id.in_(named)] if named else []
    if None in parents:
        conds.append(Message.parent_id.is_(None))
    stmt = (
        select(Message.id, Message.parent_id)
        .where(Message.session_id == session_id, or_(*conds))
        .order_by(Message.ordinal)
    )
    out: dict[str | None, list[str]] = {}
    for mid, parent in (await db.execute(stmt)).all():
        out.setdefault(parent, []).append(mid)
    return out


async def session_message(db: AsyncSession, session_id: str, message_id: str) -> Message | None:
    """A message of the session (any branch), or None."""
    row = await db.get(Message, message_id)
    return row if row is not None and row.session_id == session_id else None


async def first_user_message(db: AsyncSession, session_id: str) -> Message | None:
    """The session's first user message with text (a blank one, e.g. attachments only, names nothing)."""
    stmt = (
        select(Message)
        .where(
            Message.session_id == session_id,
            Message.active.is_(True),
            Message.role == "user",
            Message.content != "",
        )
        .order_by(Message.ordinal)
        .limit(20)
    )
    return next((m for m in (await db.execute(stmt)).scalars() if m.content.strip()), None)


_FIRST_USER_TEXTS = (
    select(Message.content)
    .where(
        Message.session_id == bindparam("sid"),
        Message.active.is_(True),
        Message.role == "user",
        Message.content != "",
    )
    .order_by(Message.ordinal)
    .limit(20)
)


async def first_user_text(db: Executor, session_id: str) -> str | None:
    """The text of :func:`first_user_message`, with a constant statement."""
    found = (await db.execute(_FIRST_USER_TEXTS, {"sid": session_id})).all()
    return next((text for (text,) in found if text.strip()), None)


async def first_answer_after(db: AsyncSession, session_id: str, ordinal: int) -> Message | None:
    """The first finished assistant message with text after ``ordinal`` (the answer of a first exchange)."""
    stmt = (
        select(Message)
        .where(
            Message.session_id == session_id,
            Message.active.is_(True),
            Message.role == "assistant",
            Message.ordinal > ordinal,
            Message.status != "streaming",
            Message.content != "",
        )
        .order_by(Message.ordinal)
        .limit(1)
    )
    return (await db.execute(stmt)).scalar_one_or_none()


async def messages_by_id(db: AsyncSession, ids: list[str]) -> Sequence[Message]:
    """The messages with these ids (in no particular order; missing ones are left out)."""
    if not ids:
        return []
    return (await db.execute(select(Message).where(Message.id.in_(ids)))).scalars().all()


def message_wire(row: MessageFields, versions: dict[str | None, list[str]] | None = None) -> wire.Message:
    """The message as clients see it; with ``versions`` (``siblings``), its place among its versions too."""
    ids = versions.get(row.parent_id) if versions is not None else None
    return wire.Message(
        parent_id=row.parent_id,
        versions=wire.Versions(index=ids.index(row.id), count=len(ids)) if ids and row.id in ids else None,
        sibling_ids=list(ids) if ids and row.id in ids else None,
        id=row.id,
        session_id=row.session_id,
        role=row.role,
        content=row.content,
        attachments=row.attachments or [],
        tool_calls=[wire.ToolCall(**c) for c in row.tool_calls] if row.tool_calls else None,
        tool_call_id=row.tool_call_id,
        status=row.status,
        finish_reason=row.finish_reason,
        usage=row.usage,
        run_id=row.run_id,
        created_at=ms(row.created_at),
        client_request_id=row.client_request_id,
        notices=[wire.Notice.model_validate(n) for n in row.notices] if row.notices else None,
        outcome=row.outcome,
        error=wire.MessageError.model_validate(row.error) if row.error else None,
        stopped_by=wire.StoppedBy.model_validate(row.stopped_by) if row.stopped_by else None,
    )


def message_json(row: MessageFields, versions: dict[str | None, list[str]] | None = None) -> MessageJson:
    """``message_wire(row, versions).wire()``, built as a dict without the wire model for a message as a send, a
    step's start or a step's end stores it (no attachments, tool calls, notices, error or stop: nothing for the
    model to convert; a usage is a flat dict); any other message goes through the model. The two are the same
    dict, key for key and in order."""
    if row.attachments or row.tool_calls or row.notices or row.error or row.stopped_by:
        return message_wire(row, versions).wire()
    ids = versions.get(row.parent_id) if versions is not None else None
    placed = ids is not None and row.id in ids
    return {
        "id": row.id,
        "sessionId": row.session_id,
        "role": row.role,
        "content": row.content,
        "attachments": [],
        "toolCalls": None,
        "toolCallId": row.tool_call_id,
        "status": row.status,
        "finishReason": row.finish_reason,
        "usage": None if row.usage is None else dict(row.usage),
        "runId": row.run_id,
        "createdAt": ms(row.created_at),
        "clientRequestId": row.client_request_id,
        "notices": None,
        "outcome": row.outcome,
        "error": None,
        "stoppedBy": None,
        "parentId": row.parent_id,
        "versions": {"index": ids.index(row.id), "count": len(ids)} if placed and ids else None,
        "siblingIds": list(ids) if placed and ids else None,
    }


# --- queue --------------------------------------------------------------------------------------------


async def queue_rows(db: AsyncSession, session_id: str) -> list[QueuedMessage]:
    stmt = select(QueuedMessage).where(QueuedMessage.session_id == session_id).order_by(QueuedMessage.position)
    return list((await db.execute(stmt)).scalars().all())


_QUEUE_STATS = select(func.count(), func.coalesce(func.max(QueuedMessage.position), -1)).where(
    QueuedMessage.session_id == bindparam("sid")
)


async def queue_stats(db: Executor, session_id: str) -> tuple[int, int]:
    """(number of queued messages, highest position or -1)."""
    count, top = (await db.execute(_QUEUE_STATS, {"sid": session_id})).one()
    return int(count), int(top)


_CLEAR_QUEUE = delete(QueuedMessage).where(QueuedMessage.session_id == bindparam("sid"))


async def clear_queue(db: PlainConnection, session_id: str) -> int:
    """Delete every queued message of the session; returns how many there were."""
    result = await db.execute(_CLEAR_QUEUE, {"sid": session_id})
    return int(result.rowcount)


async def queue_lengths(db: AsyncSession, session_ids: list[str]) -> dict[str, int]:
    """Queued messages per session, for the sessions given (those with none are absent)."""
    if not session_ids:
        return {}
    stmt = (
        select(QueuedMessage.session_id, func.count())
        .where(QueuedMessage.session_id.in_(session_ids))
        .group_by(QueuedMessage.session_id)
    )
    return {sid: int(n) for sid, n in (await db.execute(stmt)).all()}


async def renumber_queue(db: AsyncSession, rows: list[QueuedMessage]) -> None:
    """Rewrite positions as 0..n-1 in list order (callers hold the session row lock)."""
    for index, row in enumerate(rows):
        if row.position != index:
            row.position = index
    await db.flush()


def queued_wire(row: QueuedMessage | QueuedRow) -> wire.QueuedMessage:
    return wire.QueuedMessage(
        id=row.id,
        content=row.content,
        attachments=row.attachments or [],
        enqueued_at=row.enqueued_at,
        client_request_id=row.client_request_id,
    )


async def touch_session(db: AsyncSession, session_id: str, when: datetime) -> None:
    await db.execute(update(ChatSession).where(ChatSession.id == session_id).values(updated_at=when))


# --- runs and tool calls (server/engine) ---------------------------------------------------------------


async def next_ordinal(db: AsyncSession, session_id: str) -> int:
    """The ordinal for a new message (callers hold the session row lock)."""
    stmt = select(func.coalesce(func.max(Message.ordinal), 0)).where(Message.session_id == session_id)
    return int((await db.execute(stmt)).scalar_one()) + 1


async def get_run(db: AsyncSession, run_id: str) -> Run | None:
    return await db.get(Run, run_id)


_STREAMING = (
    select(Message)
    .where(Message.session_id == bindparam("sid"), Message.status == "streaming")
    .order_by(Message.ordinal)
)


async def streaming_messages(db: AsyncSession, session_id: str) -> list[Message]:
    return list((await db.execute(_STREAMING, {"sid": session_id})).scalars().all())


_MESSAGES = Message.__table__
_STREAMING_ROWS = (
    select(*TABLES[MessageRow].columns.values())
    .where(_MESSAGES.c.session_id == bindparam("sid"), _MESSAGES.c.status == "streaming")
    .order_by(_MESSAGES.c.ordinal)
)


async def streaming_rows(db: Executor, session_id: str) -> list[MessageRow]:
    """The session's messages still streaming, in order, as plain rows (``store.run_rows``)."""
    return [from_values(MessageRow, r) for r in (await db.execute(_STREAMING_ROWS, {"sid": session_id})).all()]


_CALLS = ToolCallRow.__table__
_RUN_CALLS = (
    select(*TABLES[CallRow].columns.values())
    .where(_CALLS.c.session_id == bindparam("sid"), _CALLS.c.run_id == bindparam("rid"))
    .order_by(_CALLS.c.created_at, _CALLS.c.position)
)
_OPEN_CALLS = _RUN_CALLS.where(_CALLS.c.has_result.is_(False))


async def run_tool_calls(db: Executor, session_id: str, run_id: str, *, open_only: bool = False) -> list[CallRow]:
    """Tool calls of a run in the order the model made them, as plain rows (``store.run_rows``); ``open_only``:
    those without a result. A write transaction that changes them takes them as its own (``SessionTx.adopt``)."""
    stmt = _OPEN_CALLS if open_only else _RUN_CALLS
    return [from_values(CallRow, r) for r in (await db.execute(stmt, {"sid": session_id, "rid": run_id})).all()]


_STEERED_AFTER = (
    select(Message.id)
    .where(
        Message.session_id == bindparam("sid"),
        Message.active.is_(True),
        Message.run_id == bindparam("rid"),
        Message.role == "user",
        Message.ordinal > bindparam("ordinal"),
    )
    .limit(1)
)


async def steered_after(db: Executor, session_id: str, run_id: str, ordinal: int) -> bool:
    """True when a user message was steered into ``run_id`` after the message at ``ordinal``."""
    found = (await db.execute(_STEERED_AFTER, {"sid": session_id, "rid": run_id, "ordinal": ordinal})).first()
    return found is not None


_RUNS = Run.__table__
_LATER = Message.__table__.alias("later")
_STEP_END = (
    select(
        *TABLES[RunRow].columns.values(),
        *TABLES[MessageRow].columns.values(),
        select(_LATER.c.id)
        .where(
            _LATER.c.session_id == bindparam("sid"),
            _LATER.c.active.is_(True),
            _LATER.c.run_id == _RUNS.c.id,
            _LATER.c.role == "user",
            _LATER.c.ordinal > _MESSAGES.c.ordinal,
        )
        .exists(),
    )
    .select_from(_RUNS.join(_MESSAGES, _MESSAGES.c.id == bindparam("mid")))
    .where(_RUNS.c.id == bindparam("rid"))
)
_RUN_WIDTH = len(TABLES[RunRow].names)
_MESSAGE_END = _RUN_WIDTH + len(TABLES[MessageRow].names)


async def step_end(
    db: Executor, session_id: str, run_id: str, message_id: str
) -> tuple[RunRow, MessageRow, bool] | None:
    """What the end of a step reads, in one statement: the run, the step's message, and whether a user message
    was steered into the run after that message (:func:`steered_after`). None when either row is gone."""
    found = (await db.execute(_STEP_END, {"sid": session_id, "rid": run_id, "mid": message_id})).first()
    if found is None:
        return None
    run = from_values(RunRow, found[:_RUN_WIDTH])
    return run, from_values(MessageRow, found[_RUN_WIDTH:_MESSAGE_END]), bool(found[_MESSAGE_END])


_CRASHED_RUNS = (
    select(ChatSession.id)
    .where(
        ChatSession.deleted_at.is_(None),
        ChatSession.run_id.is_not(None),
        ChatSession.status == "running",
        (ChatSession.lease_expires_at.is_(None)) | (ChatSession.lease_expires_at <= bindparam("now")),
    )
    .limit(bindparam("limit"))
)
_UNSENT_QUEUES = (
    select(ChatSession.id)
    .where(
        ChatSession.deleted_at.is_(None),
        ChatSession.run_id.is_(None),
        ChatSession.queue_paused.is_(False),
        select(QueuedMessage.id).where(QueuedMessage.session_id == ChatSession.id).exists(),
        # Only owners with room for one more run: a queue waiting for a run slot is not work yet, and would
        # otherwise take the places of other users' queues in every sweep.
        _active_runs(ChatSession.owner_id).scalar_subquery() < bindparam("max_runs"),
    )
    .limit(bindparam("limit"))
)


async def sessions_needing_work(
    db: AsyncSession, now: datetime, limit: int = 100, max_active_runs: int | None = None
) -> list[str]:
    """Sessions the sweeper should look at: a running run whose lease expired (its process died), or an idle
    session whose unpaused queue holds messages (nobody is sending them) and whose owner has fewer than
    ``max_active_runs`` runs in progress."""
    ids = list((await db.execute(_CRASHED_RUNS, {"now": now, "limit": limit})).scalars().all())
    unsent = {"limit": limit, "max_runs": max_active_runs if max_active_runs is not None else 2**62}
    ids += [i for i in (await db.execute(_UNSENT_QUEUES, unsent)).scalars().all() if i not in ids]
    return ids


# --- admin inspection -------------------------------------------------------------------------------------


async def admin_list_sessions(
    db: AsyncSession,
    *,
    owner: str | None,
    status: str | None,
    limit: int,
    after: tuple[datetime, str] | None,
) -> Sequence[Row[ChatSession, str, int]]:
    """Every user's live sessions, newest first, with the owner's name and the queue length. ``owner`` is a
    user id or name; ``after`` as in :func:`list_sessions`."""
    queued = (
        select(func.count())
        .select_from(QueuedMessage)
        .where(QueuedMessage.session_id == ChatSession.id)
        .scalar_subquery()
    )
    stmt = (
        select(ChatSession, User.name, queued)
        .join(User, User.id == ChatSession.owner_id)
        .where(ChatSession.deleted_at.is_(None))
    )
    if owner:
        stmt = stmt.where((User.id == owner) | (User.name == owner))
    if status:
        stmt = stmt.where(ChatSession.status == status)
    return (await db.execute(_newest_first(stmt, after, limit))).all()


async def admin_stats(db: AsyncSession) -> dict[str, Any]:
    """Counts over the whole database (every replica's work)."""

    async def grouped(column: Any, *where: Any) -> dict[str, int]:
        stmt = select(column, func.count()).where(*where).group_by(column)
        return {str(k): int(n) for k, n in (await db.execute(stmt)).all()}

    async def count(model: Any) -> int:
        return int((await db.execute(select(func.count()).select_from(model))).scalar_one())

    return {
        "users": await count(User),
        "sessions": await grouped(ChatSession.status, ChatSession.deleted_at.is_(None)),
        "queuedMessages": await count(QueuedMessage),
        "runs": await grouped(Run.status),
        "retainedEvents": await count(Event),
    }
