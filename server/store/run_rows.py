"""Plain rows of a session's messages, runs and queued messages, as the run path writes and reads them: typed
columns in a dataclass, written and read with constant statements on a write's plain connection
(``SessionTx.plain``; prepared on a SQLite file, ``store.prepared``), with no ORM identity map or unit of work.

A :class:`MessageRow`, :class:`RunRow` or :class:`CallRow` has one attribute per column of its table, named as
the ORM model names it (``store.models.Message``, ``Run``, ``ToolCallRow``), so code that reads columns
(``repo.message_wire``) takes either. Changing a row's attribute by itself changes nothing stored. A write
transaction that read or stored a row through its own methods (``SessionTx.load``, ``add``, ``adopt``, ``track``:
the run loop's rows) keeps the values it last wrote, and writes the columns that differ from them with one
``UPDATE`` of exactly those columns (:func:`write_changes`) before its next plain statement and before the
commit, as the ORM's autoflush would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy import insert as sql_insert
from sqlalchemy.sql import Insert, Select, Update

from ..domain.models import MessageStatus, Role, ToolOutcome
from .models import Message, QueuedMessage, Run, ToolCallRow
from .prepared import Executor, PlainConnection


@dataclass(slots=True)
class MessageRow:
    """A row of ``messages`` (``store.models.Message``): the defaults are a complete message on the active path
    with no attachments, tool calls, run or client request."""

    id: str
    session_id: str
    ordinal: int
    parent_id: str | None
    role: Role
    content: str
    created_at: datetime
    active: bool = True
    left_seq: int = 0
    attachments: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    status: MessageStatus = "complete"
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    run_id: str | None = None
    is_error: bool = False
    outcome: ToolOutcome | None = None
    error: dict[str, Any] | None = None
    stopped_by: dict[str, Any] | None = None
    client_request_id: str | None = None
    notices: list[dict[str, Any]] | None = None


@dataclass(slots=True)
class RunRow:
    """A row of ``runs`` (``store.models.Run``): the defaults are a run just started."""

    id: str
    session_id: str
    status: str
    trigger: str
    created_at: datetime
    steps: int = 0
    usage_input_tokens: int = 0
    usage_output_tokens: int = 0
    finish_reason: str | None = None
    error: dict[str, Any] | None = None
    ended_at: datetime | None = None
    provider: str | None = None
    model: str | None = None
    continues_id: str | None = None
    resumes: int = 0


@dataclass(slots=True)
class CallRow:
    """A row of ``tool_calls`` (``store.models.ToolCallRow``): a call the model made, stored before it runs."""

    session_id: str
    id: str
    run_id: str
    message_id: str
    name: str
    arguments: str
    executor: str
    created_at: datetime
    position: int = 0
    requires_approval: bool = False
    approval: str = "none"
    approval_reason: str | None = None
    has_result: bool = False


@dataclass(slots=True)
class QueuedRow:
    """A row of ``queued_messages`` (``store.models.QueuedMessage``)."""

    id: str
    session_id: str
    position: int
    content: str
    attachments: list[dict[str, Any]]
    enqueued_at: int
    client_request_id: str | None


def _columns(model: Any, row: type[Any]) -> tuple[str, ...]:
    """The columns of ``model``'s table, in the mapper's order; the row type must have exactly those (a column
    added to the model and not to its row fails here, at import, not as a missing value in an ``INSERT``)."""
    names = tuple(prop.key for prop in model.__mapper__.column_attrs)
    if any(prop.columns[0].name != prop.key for prop in model.__mapper__.column_attrs):
        raise TypeError(f"{model.__name__}: an attribute named unlike its column")
    if set(names) != {f.name for f in fields(row)}:
        raise TypeError(f"{row.__name__} does not have the columns of {model.__name__}")
    return names


MESSAGE_COLUMNS = _columns(Message, MessageRow)
RUN_COLUMNS = _columns(Run, RunRow)
CALL_COLUMNS = _columns(ToolCallRow, CallRow)
QUEUED_COLUMNS = _columns(QueuedMessage, QueuedRow)

MessageFields = Message | MessageRow
"""A message's columns, as the ORM (``Message``) or a plain statement (``MessageRow``) has them."""

RunFields = Run | RunRow
"""A run's columns, as the ORM (``Run``) or a plain statement (``RunRow``) has them."""

CallFields = ToolCallRow | CallRow
"""A tool call's columns, as the ORM (``ToolCallRow``) or a plain statement (``CallRow``) has them."""

_QUEUED = QueuedMessage.__table__
_QUEUE_HEAD = (
    select(*(_QUEUED.c[name] for name in QUEUED_COLUMNS))
    .where(_QUEUED.c.session_id == bindparam("sid"))
    .order_by(_QUEUED.c.position)
    .limit(1)
)
_DELETE_QUEUED = delete(_QUEUED).where(_QUEUED.c.id == bindparam("id"), _QUEUED.c.session_id == bindparam("sid"))


async def insert_messages(db: PlainConnection, rows: Sequence[MessageRow]) -> None:
    """Write new messages with one ``INSERT`` (of many rows when there are several)."""
    if rows:
        insert_row = TABLES[MessageRow].insert
        await db.execute(insert_row, _values(rows[0]) if len(rows) == 1 else [_values(r) for r in rows])


async def insert(db: PlainConnection, row: RunRow | CallRow) -> None:
    """Write a new run or tool call with one ``INSERT``."""
    await db.execute(TABLES[type(row)].insert, _values(row))


async def queue_head(db: Executor, session_id: str) -> QueuedRow | None:
    """The first message of the session's queue, or None when it is empty."""
    found = (await db.execute(_QUEUE_HEAD, {"sid": session_id})).first()
    return None if found is None else QueuedRow(**dict(zip(QUEUED_COLUMNS, found, strict=True)))


async def delete_queued(db: PlainConnection, session_id: str, queued_id: str) -> None:
    await db.execute(_DELETE_QUEUED, {"id": queued_id, "sid": session_id})


# --- reading a row by its key, and writing what changed ---------------------------------------------------

PlainRow = MessageRow | RunRow | CallRow
"""A row that a write transaction can read by key and update (``SessionTx.load``)."""
PlainRowT = TypeVar("PlainRowT", MessageRow, RunRow, CallRow)


class _Table:
    """What reading and updating one row type takes: its columns, key, ``SELECT`` by key, ``UPDATE``s."""

    def __init__(self, model: Any, names: tuple[str, ...]) -> None:
        table = model.__table__
        self.names = names
        self.columns = {name: table.c[name] for name in names}
        self.key = tuple(c.name for c in model.__mapper__.primary_key)
        self.select: Select[Any] = select(*self.columns.values()).where(
            *(table.c[name] == bindparam(f"pk{i}") for i, name in enumerate(self.key))
        )
        self.table = table
        self.insert: Insert = sql_insert(table)
        self.updates: dict[frozenset[str], Update] = {}

    def update(self, names: frozenset[str]) -> Update:
        """``UPDATE <table> SET <names> WHERE <key>``: one constant statement per set of columns."""
        stmt = self.updates.get(names)
        if stmt is None:
            values = {self.columns[n]: bindparam(f"v_{n}", type_=self.columns[n].type) for n in sorted(names)}
            where = (self.table.c[name] == bindparam(f"pk{i}") for i, name in enumerate(self.key))
            stmt = update(self.table).where(*where).values(values)
            if len(self.updates) < 64:  # a guard: the sets of columns changed together are a handful
                self.updates[names] = stmt
        return stmt


TABLES: dict[type[Any], _Table] = {
    MessageRow: _Table(Message, MESSAGE_COLUMNS),
    RunRow: _Table(Run, RUN_COLUMNS),
    CallRow: _Table(ToolCallRow, CALL_COLUMNS),
}


def key_of(row: PlainRow) -> tuple[Any, ...]:
    return tuple(getattr(row, name) for name in TABLES[type(row)].key)


def values_of(row: PlainRow) -> tuple[Any, ...]:
    """Every column's value, in the table's column order (what :func:`write_changes` compares with)."""
    return tuple(getattr(row, name) for name in TABLES[type(row)].names)


def from_values(cls: type[PlainRowT], values: Sequence[Any]) -> PlainRowT:
    """A row of ``cls`` from a ``SELECT`` of every column in the table's column order."""
    return cls(**dict(zip(TABLES[cls].names, values, strict=True)))


async def get(db: Executor, cls: type[PlainRowT], *key: Any) -> PlainRowT | None:
    """The row of ``cls`` with primary key ``key`` (one constant ``SELECT``), or None."""
    found = (await db.execute(TABLES[cls].select, {f"pk{i}": v for i, v in enumerate(key)})).first()
    return None if found is None else from_values(cls, found)


def _values(row: PlainRow) -> dict[str, Any]:
    """Every column's value by name (what an ``INSERT`` of the row takes)."""
    return {name: getattr(row, name) for name in TABLES[type(row)].names}


async def write_changes(db: PlainConnection, row: PlainRow, stored: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """Write the columns of ``row`` whose values differ from ``stored`` (its values as last written; nothing when
    none differ) with one ``UPDATE``, or the whole row with one ``INSERT`` when ``stored`` is None (a new row not
    written yet); returns its values as now stored."""
    table = TABLES[type(row)]
    now = values_of(row)
    if stored is None:
        await db.execute(table.insert, dict(zip(table.names, now, strict=True)))
        return now
    if now == stored:
        return stored
    changed = {n: v for n, v, was in zip(table.names, now, stored, strict=True) if v is not was and v != was}
    if changed:
        params = {f"v_{n}": v for n, v in changed.items()}
        params.update({f"pk{i}": getattr(row, name) for i, name in enumerate(table.key)})
        await db.execute(table.update(frozenset(changed)), params)
    return now
