"""Exactly-once client writes: the record of ``clientRequestId``\\ s.

A client that lost the reply to a write (its network dropped after the server committed) cannot tell
whether the write happened, so it sends it again with the same ``clientRequestId``. The server keeps, per
user, the id, which procedure it was, a digest of the input and a receipt of the reply (below), written **in
the write's own transaction** — so either both the change and the record exist, or neither does. A repeat
finds the record and gets the first reply back with nothing changed; the same id with another input or
procedure is ``CONFLICT`` (a client bug: reusing an id for a different write).

:class:`Ledger` is the one way a write uses this: every session transaction has one.

Where a repeat is looked up, and the race it closes:

* Session writes (send, enqueue, instructions, tool outputs and approvals) look the id up *after* taking the
  session's row lock, so two copies of one call racing each other (the retry reached another replica before
  the first committed) apply one after the other and the second finds the first's record.
* ``session.create`` has no row to lock: a copy that loses the race fails on the record's primary key, rolls
  back, and answers with the winner's reply (:class:`DuplicateRequest`).

What a record keeps, and how a repeat gets its reply:

* A record keeps a *receipt*, not the reply: the ids of what the write made and the few values it chose (a
  queued message's id and time, a new session's id, time and model), a few hundred bytes whatever the write
  carried. A repeat rebuilds the reply from the receipt (the ``expand`` given to :meth:`Ledger.replay`), from
  its own input — the same as the first call's, since the digests match — and from the rows the ids name, read
  again. A reply small enough (a few ids and flags) is its own receipt (:func:`kept_whole`).
* Each kind of write names its receipt's type and its reply's (:class:`Receipt`), so the checker follows a
  reply from the receipt read back to the type the procedure declares. The stored JSON is read into the
  receipt's type in one place (:meth:`Receipt.read`); a record that does not read as that type is
  ``CONFLICT`` (:class:`UnreadableRecord`), never a server error. A reply stored whole (a record written
  before receipts, ``seq`` 0) is read as the reply's type and returned as it is.

How long records are kept:

* :data:`RETENTION` (the sweeper deletes older ones), unless the user made
  ``CHATSYNC_MAX_REQUEST_RECORDS_PER_USER`` newer ones first: records are numbered 1, 2, 3, ... per user under
  the user's row lock (``users.request_seq``; lock order: session row, then user row), and the transaction
  that writes record N deletes record N - max. A repeat of an id that was dropped is applied again.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any, Final, Generic, TypeVar, cast

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError
from sqlalchemy import CursorResult, bindparam, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ..protocol.errors import RpcError
from ..store.models import ClientRequest, User, utcnow
from ..store.prepared import Executor

RETENTION = timedelta(hours=25)  # promised: 24 hours; the extra hour absorbs clock skew between replicas
MAX_PER_USER = 10_000  # CHATSYNC_MAX_REQUEST_RECORDS_PER_USER's default

_TABLE = ClientRequest.__table__
_USERS = User.__table__
_LOOKUP = select(_TABLE.c.procedure, _TABLE.c.input_hash, _TABLE.c.result, _TABLE.c.seq).where(
    _TABLE.c.user_id == bindparam("uid"), _TABLE.c.request_id == bindparam("rid")
)
_INSERT = insert(_TABLE)
_NUMBER = (
    update(_USERS)
    .where(_USERS.c.id == bindparam("uid"))
    .values(request_seq=_USERS.c.request_seq + bindparam("n"))
    .returning(_USERS.c.request_seq)
)
# The records that fell out of the user's newest ``max`` when ``n`` were added (a range of the (user, seq) index).
_DROP_OLDEST = delete(_TABLE).where(
    _TABLE.c.user_id == bindparam("uid"), _TABLE.c.seq > bindparam("after"), _TABLE.c.seq <= bindparam("upto")
)
_TRIM = delete(_TABLE).where(_TABLE.c.created_at < bindparam("before"))

ReceiptT = TypeVar("ReceiptT")
ReplyT = TypeVar("ReplyT")
ValueT = TypeVar("ValueT")

Expand = Callable[[ReceiptT], Awaitable[ReplyT]]
"""Rebuilds a write's reply from its receipt (see the module doc)."""


class DuplicateRequest(Exception):
    """Another copy of this request committed first (its record's key already exists)."""


class UnreadableRecord(RpcError):
    """The request was made before, but its record cannot be read as what this procedure keeps. The write
    happened, so it is not applied again; the client gets this error instead of the first reply."""

    def __init__(self, procedure: str) -> None:
        super().__init__("CONFLICT", f"clientRequestId was already used, and the first reply to {procedure} is lost")


@dataclass(frozen=True, slots=True)
class Receipt(Generic[ReceiptT, ReplyT]):
    """What one kind of write records of its reply ``ReplyT``: a receipt ``ReceiptT``, stored as JSON and read
    back into its type here, in one place, before an :data:`Expand` rebuilds the reply from it. A record written
    before receipts (``seq`` 0) holds the whole reply, read back as ``ReplyT``. A record that does not read as
    its type is :class:`UnreadableRecord`."""

    receipt: TypeAdapter[ReceiptT]
    reply: TypeAdapter[ReplyT]

    def dump(self, receipt: ReceiptT) -> str:
        return self.receipt.dump_json(receipt, by_alias=True).decode()

    def read(self, procedure: str, stored: str) -> ReceiptT:
        """The receipt ``stored`` (JSON as :meth:`dump` wrote it)."""
        return _read(self.receipt, procedure, stored)

    def read_whole(self, procedure: str, stored: str) -> ReplyT:
        """The whole reply ``stored`` by a record written before receipts."""
        return _read(self.reply, procedure, stored)


def _read(adapter: TypeAdapter[ValueT], procedure: str, stored: str) -> ValueT:
    try:
        return adapter.validate_python(orjson.loads(stored))
    except (orjson.JSONDecodeError, ValidationError):
        raise UnreadableRecord(procedure) from None


def kept_whole(reply: TypeAdapter[ReplyT]) -> Receipt[ReplyT, ReplyT]:
    """The :class:`Receipt` of a reply small enough to be its own receipt (rebuilt with :func:`as_is`)."""
    return Receipt(reply, reply)


async def as_is(receipt: ReplyT) -> ReplyT:
    """The :data:`Expand` of a reply kept whole."""
    return receipt


@dataclass(frozen=True, slots=True)
class RequestKey:
    """One write's identity: who, which id, which procedure, and a digest of what it asked for."""

    user_id: str
    request_id: str
    procedure: str
    input_hash: str


def request_key(user_id: str, procedure: str, inp: BaseModel) -> RequestKey | None:
    """The key of a parsed input that carries a ``client_request_id``; None when it carries none."""
    request_id = getattr(inp, "client_request_id", None)
    if request_id is None:
        return None
    body = inp.model_dump(mode="json", by_alias=True, exclude={"client_request_id"})
    digest = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return RequestKey(user_id, request_id, procedure, digest)


class Missing(enum.Enum):
    """The type of :data:`MISSING` (an enum of one, so ``x is not MISSING`` narrows ``x``)."""

    MISSING = "MISSING"


MISSING: Final = Missing.MISSING
"""What a replay returns when the request was not made before."""


def record_row(key: RequestKey, receipt: str, now: datetime) -> dict[str, Any]:
    """A record of the write ``key`` whose reply ``receipt`` (JSON) rebuilds (see the module doc)."""
    return {
        "user_id": key.user_id,
        "request_id": key.request_id,
        "procedure": key.procedure,
        "input_hash": key.input_hash,
        "result": receipt,
        "created_at": now,
    }


async def record(db: Executor, rows: list[dict[str, Any]], max_per_user: int) -> None:
    """Write records made by :func:`record_row` (inside the write's transaction), numbered after the user's
    newest, and drop those of the user's records that fall out of its newest ``max_per_user``."""
    for user_id, group in groupby(rows, key=lambda row: row["user_id"]):
        mine = list(group)
        n = len(mine)
        last = int((await db.execute(_NUMBER, {"uid": user_id, "n": n})).one()[0])
        for i, row in enumerate(mine):
            row["seq"] = last - n + 1 + i
        await db.execute(_INSERT, mine[0] if n == 1 else mine)
        upto = last - max_per_user
        if upto > 0:
            await db.execute(_DROP_OLDEST, {"uid": user_id, "after": upto - n, "upto": upto})


def _conflict() -> RpcError:
    return RpcError("CONFLICT", "clientRequestId was already used for a different request")


class Ledger:
    """The exactly-once records of one write transaction: what it replays and what it will record.

    Every write with a ``clientRequestId`` goes through it (a session write through ``SessionTx.replay`` /
    ``remember``, whose ``finish`` calls :meth:`write` before its commit; ``session.create`` and ``session.fork``
    with a ledger of their own): look the request up (:meth:`replay`; a session write with the session locked),
    make the change, keep the receipt (:meth:`remember`). A transaction that carries several requests (a batch
    of enqueues) also answers a repeat of one of its own requests, which is not in the table yet: the same
    id with the same input gets its reply rebuilt from the receipt kept, with another input ``CONFLICT``."""

    def __init__(self, max_per_user: int = MAX_PER_USER) -> None:
        self.max_per_user = max_per_user
        self.rows: list[dict[str, Any]] = []
        self._receipts: dict[str, tuple[RequestKey, str]] = {}  # this transaction's requests by id, with receipts

    async def replay(
        self,
        db: Executor,
        key: RequestKey | None,
        kind: Receipt[ReceiptT, ReplyT],
        expand: Expand[ReceiptT, ReplyT],
    ) -> ReplyT | Missing:
        """The first reply to this request, or :data:`MISSING`. ``db`` is an ORM session or a plain connection
        inside the caller's transaction; the receipt the write recorded is read as ``kind`` says, and ``expand``
        rebuilds the reply from it. The same id for another input or procedure is ``CONFLICT``."""
        if key is None:
            return MISSING
        if key.request_id in self._receipts:
            earlier, stored = self._receipts[key.request_id]
            if earlier != key:
                raise _conflict()
            seq = None
        else:
            found = (await db.execute(_LOOKUP, {"uid": key.user_id, "rid": key.request_id})).first()
            if found is None:
                return MISSING
            procedure, input_hash, stored, seq = found
            if procedure != key.procedure or input_hash != key.input_hash:
                raise _conflict()
            if not seq:  # seq 0: written before receipts, the whole reply
                return kind.read_whole(key.procedure, stored)
        return await expand(kind.read(key.procedure, stored))

    def remember(self, key: RequestKey | None, kind: Receipt[ReceiptT, ReplyT], receipt: ReceiptT) -> None:
        """Record ``receipt`` (what rebuilds the reply, as ``kind`` says) for ``key``, committed with the
        transaction; a repeat of ``key`` within the same transaction gets the reply rebuilt from it."""
        if key is None:
            return
        stored = kind.dump(receipt)
        self.rows.append(record_row(key, stored, utcnow()))
        self._receipts[key.request_id] = (key, stored)

    async def write(self, db: Executor) -> None:
        if self.rows:
            await record(db, self.rows, self.max_per_user)


async def trim(db: AsyncSession, now: datetime) -> int:
    """Delete records older than :data:`RETENTION`; returns how many."""
    result = await db.execute(_TRIM, {"before": now - RETENTION})
    return int(cast(CursorResult[Any], result).rowcount or 0)  # a DELETE's result is a CursorResult
