"""The queue's statements on SQLite: compiled by SQLAlchemy once, run straight on a ``sqlite3`` connection.

A Core ``execute`` costs many times more CPU in SQLAlchemy (execution context, parameter and result
processing, the async adaptation's greenlet switches) than the SQLite call it wraps, and a queue
enqueue — the busiest write this server makes — runs five statements. :class:`Prepared` keeps what
SQLAlchemy would work out on every call — the SQL text for the dialect, the positional parameter order, each
parameter's bind processor (so timestamps and JSON are stored exactly as SQLAlchemy stores them) — and
:class:`PreparedConnection` runs such statements on a ``sqlite3`` connection inside ``BEGIN IMMEDIATE`` (the
write lock is held, so no statement can meet SQLITE_BUSY).

A write's plain connection (``WriteSession.plain``, ``SessionTx.plain``) is this on a SQLite file and a
SQLAlchemy connection elsewhere: both answer ``await execute(statement, params)`` with a result offering
``first()``, ``one()`` and ``rowcount``.
Statements must be built once (module constants with ``bindparam``): each is compiled on first use.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any, ClassVar, cast

import orjson
from sqlalchemy.dialects.sqlite.base import DATETIME as SQLITE_DATETIME
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql import ClauseElement, elements, sqltypes
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.types import TypeEngine

from .models import UTCDateTime
from .sqlite_inline import retry_busy, share_loop

_NAMED = object()
MAX_PREPARED = 256  # a guard: the statements that come here are module constants (a few dozen)


class Prepared:
    """One Core statement compiled for one dialect with a positional paramstyle, with the conversions of its
    parameters and of its result columns (SQLite's text timestamps and 0/1 booleans come back as ``datetime``
    and ``bool``, as SQLAlchemy returns them)."""

    __slots__ = ("_convert", "_params", "_pick", "results", "sql")

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)  # a statement, not DDL (once per statement: they are cached)
        self.sql = str(compiled)
        self._params: list[tuple[str, Any, Callable[[Any], Any] | None]] = []
        for name in compiled.positiontup or ():
            bind = compiled.binds[name]
            # A literal inside the statement (``coalesce(max(x), -1)``) carries its value; the rest are named.
            fixed = bind.effective_value if bind.value is not None else _NAMED
            # The dialect's own implementation of the type: SQLite's DATETIME formats timestamps as text.
            self._params.append((name, fixed, bind_processor(bind.type, dialect)))
        # The common case, every parameter named: one ``itemgetter`` picks them all, and only the positions whose
        # type converts (timestamps, JSON, booleans) are converted.
        names = [name for name, _fixed, _process in self._params]
        every_named = bool(names) and all(fixed is _NAMED for _name, fixed, _process in self._params)
        self._pick = itemgetter(*names) if every_named else None
        self._convert: list[tuple[int, Callable[[Any], Any]]] = [
            (i, process) for i, (_n, _f, process) in enumerate(self._params) if process is not None
        ]
        # Each result column's type (``ResultColumnsEntry.type``) converts what the driver returns.
        processors = [result_processor(entry[3], dialect) for entry in getattr(compiled, "_result_columns", ())]
        # None when no column needs converting: the rows are then sqlite3's tuples as they are.
        self.results: list[Callable[[Any], Any] | None] | None = processors if any(processors) else None

    def args(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        if self._pick is not None:
            picked = self._pick(values)
            out = list(picked) if len(self._params) > 1 else [picked]
            for i, convert in self._convert:
                out[i] = convert(out[i])
            return tuple(out)
        out = []
        for name, fixed, process in self._params:
            value = values[name] if fixed is _NAMED else fixed
            out.append(value if process is None else process(value))
        return tuple(out)


# SQLAlchemy's SQLite DATETIME stores this text (its default storage format): ``isoformat`` with microseconds
# writes the same, at a fraction of the cost of its ``%``-formatting of a dict per value.
_SQLITE_DEFAULT_FORMAT = SQLITE_DATETIME()._storage_format  # type: ignore[no-untyped-call]  # noqa: SLF001
_long_number = re.compile(r"\d{19}").search  # an integer orjson would not read exactly may be in it
_ISO_LENGTH = len("2000-01-01 00:00:00.000000")
# orjson hands back what stdlib ``json`` would refuse (timestamps, dataclasses): those take SQLAlchemy's own path,
# which raises as before.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def bind_processor(type_: TypeEngine[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    """How a parameter of ``type_`` is converted for ``dialect``: SQLAlchemy's bind processor, except for the two
    that a run's statements pass most, each replaced by one that stores the same text for less CPU:

    * a timestamp (``UTCDateTime``) on SQLite: ``isoformat`` with microseconds of its wall time, exactly SQLAlchemy's
      DATETIME text (``YYYY-MM-DD HH:MM:SS.ffffff``; the zone is not stored, and every value is UTC);
    * a JSON value on SQLite: ``orjson`` (compact, UTF-8) where SQLAlchemy calls stdlib ``json.dumps`` (spaces,
      ``\\u`` escapes). The text differs but holds the same JSON value: every reader parses it (SQLAlchemy's
      ``json.loads``, SQLite's JSON functions, clients); a value orjson does not take (an integer past 64 bits, a
      lone surrogate, a key that is not a string) is written by SQLAlchemy's path as before."""
    impl = type_.dialect_impl(dialect)
    sqlalchemys = impl.bind_processor(dialect)
    if sqlalchemys is None or dialect.name != "sqlite":
        return sqlalchemys
    if (
        isinstance(type_, UTCDateTime)
        and isinstance(impl.impl_instance, SQLITE_DATETIME)  # type: ignore[attr-defined]
        and impl.impl_instance._storage_format == _SQLITE_DEFAULT_FORMAT  # type: ignore[attr-defined]  # noqa: SLF001
    ):
        return _sqlite_timestamp
    if isinstance(impl, sqltypes.JSON) and dialect._json_serializer is None:  # noqa: SLF001
        return _json_text(impl.none_as_null, sqlalchemys)
    return sqlalchemys


def _sqlite_timestamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:  # as ``UTCDateTime`` refuses it
        raise ValueError("naive datetime stored; use utcnow()")
    return value.isoformat(" ", "microseconds")[:_ISO_LENGTH]


def _json_text(none_as_null: bool, sqlalchemys: Callable[[Any], Any]) -> Callable[[Any], Any]:
    null = None if none_as_null else "null"  # SQLAlchemy stores Python's None as JSON null unless told otherwise
    dumps = orjson.dumps

    def process(value: Any) -> Any:
        if value is None:
            return null
        if value is sqltypes.JSON.NULL or isinstance(value, elements.Null):
            return sqlalchemys(value)
        try:
            return dumps(value, option=_ORJSON_OPTIONS).decode()
        except TypeError:
            return sqlalchemys(value)

    return process


def _parsed(text: str, otherwise: Callable[[str], Any]) -> Any:
    """JSON text parsed by ``orjson``, or by ``otherwise`` when it holds a long number or orjson refuses it."""
    if _long_number(text) is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return otherwise(text)


def json_value(text: str | None) -> Any:
    """The value of a JSON column read as its text (SQL NULL: None), parsed as :func:`result_processor` parses
    it on SQLite (stdlib ``json``, SQLAlchemy's default, where orjson would not read it exactly)."""
    return None if text is None else _parsed(text, json.loads)


def result_processor(type_: TypeEngine[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    """How a result column of ``type_`` is converted from what SQLite returns: SQLAlchemy's result processor, except
    JSON on SQLite, which ``orjson`` parses (a run's step reads its history's attachments and tool calls; stdlib
    ``json.loads`` costs many times more per value). Text with a run of 19 digits or more (orjson reads an integer
    past 64 bits as a float) and text orjson refuses (``NaN``, which stdlib ``json`` writes) go through SQLAlchemy's,
    so every value reads as before."""
    impl = type_.dialect_impl(dialect)
    sqlalchemys = impl.result_processor(dialect, None)
    if (
        sqlalchemys is None
        or dialect.name != "sqlite"
        or not isinstance(impl, sqltypes.JSON)
        or dialect._json_deserializer is not None  # noqa: SLF001
    ):
        return sqlalchemys

    def process(value: Any) -> Any:
        return None if value is None else _parsed(value, sqlalchemys)

    return process


Converters = list[Callable[[Any], Any] | None]
"""Per result column: what turns SQLite's value into SQLAlchemy's (None: nothing to do)."""


def _typed(results: Converters, row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v if p is None or v is None else p(v) for p, v in zip(results, row, strict=True))


class PreparedResult:
    """The part of SQLAlchemy's ``Result`` the hot path reads: rows as plain tuples, typed as SQLAlchemy
    types them."""

    __slots__ = ("_cursor", "_results")

    def __init__(self, cursor: sqlite3.Cursor, results: list[Callable[[Any], Any] | None] | None) -> None:
        self._cursor = cursor
        self._results = results

    def _typed(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        return row if self._results is None else _typed(self._results, row)

    def first(self) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._cursor.fetchone()
        return None if row is None else self._typed(row)

    def first_untyped(self) -> tuple[tuple[Any, ...] | None, Converters | None]:
        """The first row as SQLite returned it, and each column's conversion (None: none needed), for a reader
        that converts only the columns it reads (``store.session_row``)."""
        return self._cursor.fetchone(), self._results

    def all(self) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._cursor.fetchall()
        results = self._results
        return rows if results is None else [_typed(results, row) for row in rows]

    def one(self) -> tuple[Any, ...]:
        row: tuple[Any, ...] | None = self._cursor.fetchone()
        if row is None:
            raise LookupError("statement returned no row")
        return self._typed(row)

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount


class PreparedConnection:
    """``execute`` for constant Core statements on one SQLite connection, inside its open transaction."""

    # Shared by every connection: they are all SQLite's, and the statements are module constants.
    _cache: ClassVar[dict[int, tuple[ClauseElement, Prepared]]] = {}

    def __init__(self, conn: sqlite3.Connection, dialect: Dialect) -> None:
        self._cursor = conn.cursor()
        self._dialect = dialect

    def _prepared(self, statement: ClauseElement) -> Prepared:
        hit = self._cache.get(id(statement))
        if hit is not None and hit[0] is statement:
            return hit[1]
        prepared = Prepared(statement, self._dialect)
        if len(self._cache) < MAX_PREPARED:
            # Keyed by identity and holding the statement, so the id cannot be reused by another object.
            self._cache[id(statement)] = (statement, prepared)
        return prepared

    async def execute(
        self, statement: ClauseElement, params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
    ) -> PreparedResult:
        prepared = self._prepared(statement)
        await share_loop()
        if isinstance(params, (list, tuple)):  # many rows (``executemany``); not the ABC, checked per statement
            self._cursor.executemany(prepared.sql, [prepared.args(p) for p in params])
        else:
            self._cursor.execute(prepared.sql, prepared.args(cast(Mapping[str, Any], params or {})))
        return PreparedResult(self._cursor, prepared.results)

    async def rows(self, statement: ClauseElement, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Every row of a read, run and fetched in one go (retried while another process holds a lock SQLite
        needs, as ``sqlite_inline`` retries): for a connection that serves one read after another outside any
        transaction (``Database.read_rows``), where nothing may run on the cursor between the two."""
        prepared = self._prepared(statement)
        found: list[tuple[Any, ...]] = await retry_busy(self._fetch_all, prepared.sql, prepared.args(params))
        results = prepared.results
        return found if results is None else [_typed(results, row) for row in found]

    def _fetch_all(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._cursor.execute(sql, args).fetchall()


PlainConnection = AsyncConnection | PreparedConnection
"""A write's plain connection (``WriteSession.plain``; see the module doc)."""

Executor = AsyncSession | PlainConnection
"""Runs constant Core statements in the caller's transaction: an ORM session or a plain connection. Code that
takes either uses only ``execute`` and the result's ``first()``, ``one()`` and ``all()``."""
