"""Plain rows of a session's messages, runs and queued messages, as the run path writes and reads them: typed
columns in a dataclass, written and read with constant statements on a write's plain connection
(``SessionTx.plain``; prepared on a SQLite file, ``store.prepared``), with no ORM identity map or unit of work.

A :class:`MessageRow` or :class:`RunRow` has one attribute per column of its table, named as the ORM model
names it (``store.models.Message``, ``Run``), so code that reads columns (``repo.message_wire``) takes either.
Changing a row's attribute changes nothing stored: a write that must change a stored row says so with a
statement of its own (or loads the ORM object with ``SessionTx.get``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, insert, select

from ..domain.models import MessageStatus, Role, ToolOutcome
from .models import Message, QueuedMessage, Run
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
QUEUED_COLUMNS = _columns(QueuedMessage, QueuedRow)

MessageFields = Message | MessageRow
"""A message's columns, as the ORM (``Message``) or a plain statement (``MessageRow``) has them."""

RunFields = Run | RunRow
"""A run's columns, as the ORM (``Run``) or a plain statement (``RunRow``) has them."""

_INSERT_MESSAGE = insert(Message.__table__)
_INSERT_RUN = insert(Run.__table__)
_QUEUED = QueuedMessage.__table__
_QUEUE_HEAD = (
    select(*(_QUEUED.c[name] for name in QUEUED_COLUMNS))
    .where(_QUEUED.c.session_id == bindparam("sid"))
    .order_by(_QUEUED.c.position)
    .limit(1)
)
_DELETE_QUEUED = delete(_QUEUED).where(_QUEUED.c.id == bindparam("id"), _QUEUED.c.session_id == bindparam("sid"))


def message_values(row: MessageRow) -> dict[str, Any]:
    return {name: getattr(row, name) for name in MESSAGE_COLUMNS}


async def insert_messages(db: PlainConnection, rows: Sequence[MessageRow]) -> None:
    """Write new messages with one ``INSERT`` (of many rows when there are several)."""
    if rows:
        await db.execute(
            _INSERT_MESSAGE, message_values(rows[0]) if len(rows) == 1 else [message_values(r) for r in rows]
        )


async def insert_run(db: PlainConnection, row: RunRow) -> None:
    await db.execute(_INSERT_RUN, {name: getattr(row, name) for name in RUN_COLUMNS})


async def queue_head(db: Executor, session_id: str) -> QueuedRow | None:
    """The first message of the session's queue, or None when it is empty."""
    found = (await db.execute(_QUEUE_HEAD, {"sid": session_id})).first()
    return None if found is None else QueuedRow(**dict(zip(QUEUED_COLUMNS, found, strict=True)))


async def delete_queued(db: PlainConnection, session_id: str, queued_id: str) -> None:
    await db.execute(_DELETE_QUEUED, {"id": queued_id, "sid": session_id})
