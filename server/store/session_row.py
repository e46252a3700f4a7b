"""The session row of a write transaction: a plain object, locked and read with one statement, whose changed
columns are written back with one ``UPDATE`` of exactly those columns.

Every write to a session (``services.uow.UnitOfWork.session``) locks the session's row and works with it:
the run state, the lease, the title, the log's end. It is not an ORM object: reading it costs one prepared
``SELECT ... FOR UPDATE`` (``store.prepared`` on a SQLite file) instead of the ORM's identity map and unit of
work, and the transaction writes it back itself (:func:`write_changes`), so a transaction that needs no ORM
object never makes one.

Assigning a column (``row.status = "running"``) records it as changed. Columns another statement of the
transaction already wrote (the log's end, the unread marks) are set with :meth:`SessionRow.stored`, which
changes the object without writing the column again.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import bindparam, select, update
from sqlalchemy.sql import Select, Update

from ..domain.models import BusyPolicy, SessionStatus, TitleSource, ToolMode
from .models import ChatSession
from .prepared import PlainConnection, PreparedResult

_SESSIONS = ChatSession.__table__
# (attribute, column) of every column of the session, in the mapper's order (``meta`` is the ``metadata`` column).
_COLUMNS: list[tuple[str, Any]] = [(p.key, p.columns[0]) for p in ChatSession.__mapper__.column_attrs]
_NAMES = tuple(name for name, _ in _COLUMNS)

LOCK_SESSION: Select[Any] = (
    select(*(column for _, column in _COLUMNS))
    .where(_SESSIONS.c.id == bindparam("sid"), _SESSIONS.c.deleted_at.is_(None))
    .with_for_update()
)
"""The session's row, locked for the rest of the transaction (``FOR UPDATE`` on PostgreSQL; on SQLite the write
transaction holds the database's one write lock). A deleted session is not found."""

HEAD: tuple[str, ...] = (
    "id",
    "owner_id",
    "run_id",
    "queue_paused",
    "last_seq",
    "title",
    "title_source",
    "status",
    "provider",
    "model",
    "created_at",
    "pinned",
    "archived",
    "attention_seq",
    "attention_kind",
    "seen_seq",
)
"""The columns a queue edit (or another write that needs none of the settings, the lease or the usage) reads
(``lock(..., head_only=True)``): what every write's end reads (the owner, the log's end, the unread marks), what
the session feed shows of the session, and whether a run is going."""

_BY_NAME = dict(_COLUMNS)
LOCK_HEAD: Select[Any] = (
    select(*(_BY_NAME[name] for name in HEAD))
    .where(_SESSIONS.c.id == bindparam("sid"), _SESSIONS.c.deleted_at.is_(None))
    .with_for_update()
)
""":data:`LOCK_SESSION` reading the :data:`HEAD` columns only."""


class SessionRow:
    """One session's columns as the write transaction that locked it sees them (see the module doc). A row read
    with ``head_only`` has the :data:`HEAD` columns only: reading another is an ``AttributeError``.

    The columns are ordinary attributes of the instance (no attribute of the class shadows them, so Python
    reads them at its fastest); a row read raw from SQLite is a :class:`_RawRow`, which converts on first read."""

    id: str
    owner_id: str
    title: str
    title_source: TitleSource
    provider: str
    model: str
    system_prompt: str | None
    defaults: dict[str, Any]
    tools: list[dict[str, Any]]
    tool_mode: ToolMode
    mcp_servers: list[str]
    mcp_tools: dict[str, Any]
    busy_policy: BusyPolicy
    disable_streaming: bool
    meta: dict[str, Any]
    status: SessionStatus
    queue_paused: bool
    usage_input_tokens: int
    usage_output_tokens: int
    last_seq: int
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    run_id: str | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    abort_requested: bool
    abort_then_send: bool
    attention_seq: int
    attention_kind: str | None
    seen_seq: int
    pinned: bool
    archived: bool

    changed: set[str]
    """The columns assigned since the row was read (by attribute name), which :func:`write_changes` writes."""

    COLUMNS: ClassVar[tuple[str, ...]] = _NAMES

    def __init__(self, values: Sequence[Any], names: Sequence[str] = _NAMES) -> None:
        """``values``: the columns ``names`` (by default every column, in :data:`LOCK_SESSION`'s order), typed."""
        d = self.__dict__
        d["changed"] = set()
        d.update(zip(names, values, strict=True))

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__[name] = value
        self.changed.add(name)

    def stored(self, **values: Any) -> None:
        """Set columns that a statement of this transaction already wrote: not written again."""
        self.__dict__.update(values)


class _RawRow(SessionRow):
    """Every column of :data:`LOCK_SESSION` as SQLite returned them, each column that needs converting converted
    when it is first read (a lock reads every column, and most writes read a few: the JSON settings and most
    timestamps are never decoded)."""

    def __init__(self, values: Sequence[Any], convert: Sequence[Callable[[Any], Any] | None]) -> None:
        """``convert``: the statement's conversion of each column (None: the value as it is)."""
        d = self.__dict__
        d["changed"] = set()
        d["_raw"], d["_convert"] = values, convert
        names, pick = _as_is(convert)
        d.update(zip(names, pick(values), strict=True))


class _Converted:
    """A column of a :class:`_RawRow`: converted on its first read, then an ordinary attribute of the row (which
    shadows this)."""

    __slots__ = ("index", "name")

    def __init__(self, index: int, name: str) -> None:
        self.index, self.name = index, name

    def __get__(self, row: _RawRow | None, owner: type[_RawRow]) -> Any:
        if row is None:
            return self
        d = row.__dict__
        raw = d["_raw"][self.index]
        value = raw if raw is None else d["_convert"][self.index](raw)
        d[self.name] = value
        return value


_AS_IS: dict[int, tuple[Sequence[Any], tuple[tuple[str, ...], Callable[[Sequence[Any]], Sequence[Any]]]]] = {}


def _as_is(convert: Sequence[Callable[[Any], Any] | None]) -> tuple[tuple[str, ...], Callable[[Any], Sequence[Any]]]:
    """The columns that ``convert`` leaves as they are, and a function picking their values from a row: worked
    out once per statement (``convert`` is the prepared statement's own list)."""
    hit = _AS_IS.get(id(convert))
    if hit is not None and hit[0] is convert:
        return hit[1]
    index = [i for i, c in enumerate(convert) if c is None]
    names = tuple(_NAMES[i] for i in index)
    # itemgetter of one index returns the value itself, not a tuple of it
    pick = operator.itemgetter(*index) if len(index) > 1 else lambda row: tuple(row[i] for i in index)
    found: tuple[tuple[str, ...], Callable[[Any], Sequence[Any]]] = (names, pick)
    _AS_IS[id(convert)] = (convert, found)
    return found


for _index, _name in enumerate(_NAMES):
    setattr(_RawRow, _name, _Converted(_index, _name))


async def lock(db: PlainConnection, session_id: str, *, head_only: bool = False) -> SessionRow | None:
    """The session's row, locked (:data:`LOCK_SESSION`); None when there is none or it was deleted. With
    ``head_only`` only the :data:`HEAD` columns are read (:data:`LOCK_HEAD`): the lock of a queue edit, which
    spares reading and converting the rest (the settings' JSON, the lease, the usage)."""
    if head_only:
        head = (await db.execute(LOCK_HEAD, {"sid": session_id})).first()
        return None if head is None else SessionRow(head, HEAD)
    result = await db.execute(LOCK_SESSION, {"sid": session_id})
    if isinstance(result, PreparedResult):
        found, convert = result.first_untyped()
        if found is None:
            return None
        return SessionRow(found) if convert is None else _RawRow(found, convert)
    row = result.first()
    return None if row is None else SessionRow(row)


_UPDATES: dict[frozenset[str], Update] = {}
_MAX_UPDATES = 128  # a guard: the sets of columns the services change together are a few dozen


def _update(names: frozenset[str]) -> Update:
    """``UPDATE sessions SET <names> WHERE id = :sid``, one constant statement per set of columns (so each is
    compiled and prepared once)."""
    stmt = _UPDATES.get(names)
    if stmt is None:
        values = {_BY_NAME[n]: bindparam(f"v_{n}", type_=_BY_NAME[n].type) for n in sorted(names)}
        stmt = update(_SESSIONS).where(_SESSIONS.c.id == bindparam("sid")).values(values)
        if len(_UPDATES) < _MAX_UPDATES:
            _UPDATES[names] = stmt
    return stmt


async def write_changes(db: PlainConnection, row: SessionRow) -> None:
    """Write the columns of ``row`` changed since it was read (none: nothing), then count them as written."""
    if not row.changed:
        return
    unknown = row.changed.difference(_NAMES)
    if unknown:
        raise AttributeError(f"not a column of the session: {', '.join(sorted(unknown))}")
    names = frozenset(row.changed)
    params = {f"v_{n}": getattr(row, n) for n in names}
    params["sid"] = row.id
    await db.execute(_update(names), params)
    row.changed.clear()


SessionFields = ChatSession | SessionRow
"""A session's columns, as a read (``ChatSession``) or a write transaction (``SessionRow``) has them."""
