"""Exactly-once client writes: the record of ``clientRequestId``\\ s.

A client that lost the reply to a write (its network dropped after the server committed) cannot tell
whether the write happened, so it sends it again with the same ``clientRequestId``. The server keeps, per
user, the id, which procedure it was, a digest of the input and the reply, written **in the write's own
transaction** — so either both the change and the record exist, or neither does. A repeat finds the record
and gets the first reply back with nothing changed; the same id with another input or procedure is
``CONFLICT`` (a client bug: reusing an id for a different write).

Where a repeat is looked up, and the race it closes:

* Session writes (send, enqueue, instructions, tool outputs and approvals) look the id up *after* taking the
  session's row lock, so two copies of one call racing each other (the retry reached another replica before
  the first committed) apply one after the other and the second finds the first's record.
* ``session.create`` has no row to lock: a copy that loses the race fails on the record's primary key, rolls
  back, and answers with the winner's reply (:class:`DuplicateRequest`).

Records are kept at least :data:`RETENTION` (the sweeper deletes older ones), so the table is bounded by
what clients write in that time.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import orjson
from pydantic import BaseModel
from sqlalchemy import CursorResult, bindparam, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..domain.models import jsonable
from ..protocol.errors import RpcError
from ..store.models import ClientRequest
from ..store.prepared import Executor

RETENTION = timedelta(hours=25)  # promised: 24 hours; the extra hour absorbs clock skew between replicas

_TABLE = ClientRequest.__table__
_LOOKUP = select(_TABLE.c.procedure, _TABLE.c.input_hash, _TABLE.c.result).where(
    _TABLE.c.user_id == bindparam("uid"), _TABLE.c.request_id == bindparam("rid")
)
_INSERT = insert(_TABLE)
_TRIM = delete(_TABLE).where(_TABLE.c.created_at < bindparam("before"))


class DuplicateRequest(Exception):
    """Another copy of this request committed first (its record's key already exists)."""


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


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""What :func:`replay` returns when the request was not made before."""


async def replay(db: Executor, key: RequestKey | None) -> Any:
    """The first reply to this request, or :data:`MISSING`. ``db`` is an ORM session or a plain connection
    inside the caller's transaction. The same id for another input or procedure is ``CONFLICT``."""
    if key is None:
        return MISSING
    found = (await db.execute(_LOOKUP, {"uid": key.user_id, "rid": key.request_id})).first()
    if found is None:
        return MISSING
    procedure, input_hash, result = found
    if procedure != key.procedure or input_hash != key.input_hash:
        raise RpcError("CONFLICT", "clientRequestId was already used for a different request")
    return orjson.loads(result)


def record_row(key: RequestKey, result: Any, now: datetime) -> dict[str, Any]:
    return {
        "user_id": key.user_id,
        "request_id": key.request_id,
        "procedure": key.procedure,
        "input_hash": key.input_hash,
        "result": orjson.dumps(jsonable(result)).decode(),
        "created_at": now,
    }


async def record(db: Executor, rows: list[dict[str, Any]]) -> None:
    """Write records made by :func:`record_row` (inside the write's transaction)."""
    if rows:
        await db.execute(_INSERT, rows[0] if len(rows) == 1 else rows)


async def trim(db: AsyncSession, now: datetime) -> int:
    """Delete records older than :data:`RETENTION`; returns how many."""
    result = await db.execute(_TRIM, {"before": now - RETENTION})
    return int(cast(CursorResult[Any], result).rowcount or 0)  # a DELETE's result is a CursorResult
