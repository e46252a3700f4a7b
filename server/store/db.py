"""Engines and unit-of-work sessions for SQLite (aiosqlite) and PostgreSQL (asyncpg)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import orjson
from sqlalchemy import String, any_, bindparam, column, event, exc, func, make_url, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql import ColumnElement, Select

from .. import metrics, tracing
from . import sqlite_inline
from .prepared import PlainConnection, PreparedConnection


def _sqlite_pragmas(engine: AsyncEngine, *, immediate: bool, background_checkpoints: Callable[[], bool]) -> None:
    """WAL so readers never block the writer; BEGIN IMMEDIATE on the writer so two processes
    (the server and `chatsync users create`) queue on the lock instead of failing to upgrade it."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, record: Any) -> None:
        dbapi_conn.isolation_level = None  # let us issue BEGIN ourselves
        sqlite_inline.configure(
            record.driver_connection.sqlite_connection(), background_checkpoints=background_checkpoints()
        )

    begin = "BEGIN IMMEDIATE" if immediate else "BEGIN"

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Every transaction starts here, so skip the statement machinery when the lock is free at once;
        # when it is not, the ordinary path waits for it off the loop.
        if not conn.connection.driver_connection.try_execute(begin):
            conn.exec_driver_sql(begin)


async def _let_ready_callbacks_run() -> None:
    """SQLite statements run on the loop (``sqlite_inline``), so a transaction holds it until it ends. Yield
    once first: a token delta scheduled for delivery just before goes out now instead of after the
    transaction (which is where a stream's last tokens used to wait while its step was written down)."""
    await asyncio.sleep(0)


class WriteTurns:
    """The turns of this process's SQLite writers: one transaction at a time, taken by whoever asks while no
    transaction is open, and on release every writer waiting is woken to try again.

    ``asyncio.Lock`` hands the lock to its first waiter, which holds it from then on but runs only when its
    wake-up comes up in the loop's queue of ready callbacks: under load that is most of a turn of the loop (a
    few milliseconds) per transaction, with nobody writing. A transaction on SQLite mostly runs from begin to
    commit without giving the loop back, so a writer that asks while none is open goes through at once; and
    waking every waiter lets all of them write in the next turn, one after another, instead of one per turn.
    A waiter that finds the turn taken again waits again (at the front, so it is not overtaken twice)."""

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self) -> None:
        first_wait = True
        while self._held:
            fut = asyncio.get_running_loop().create_future()
            if first_wait:
                self._waiters.append(fut)
            else:
                self._waiters.appendleft(fut)
            first_wait = False
            try:
                await fut
            finally:
                if fut.cancelled():  # the writer was cancelled while it waited (a release clears the queue)
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(fut)
        self._held = True

    def release(self) -> None:
        self._held = False
        waiters, self._waiters = self._waiters, collections.deque()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)


PING_IDLE_AFTER_S = 5.0
CHECKPOINT_SECONDS = 1.0


def _ping_idle_connections(engine: AsyncEngine) -> None:
    """Check a pooled connection before use only when it sat idle for a while.

    A connection that was idle may have been cut (a PostgreSQL restart, a proxy's idle timeout); one the
    pool handed out a moment ago was fine then. SQLAlchemy's ``pool_pre_ping`` pings on every checkout,
    which costs a round trip — about a quarter of the CPU of a whole queue enqueue. A failed ping makes
    the pool discard the connection and open a new one (``DisconnectionError``).
    """

    @event.listens_for(engine.sync_engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info["checked_in_at"] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("checked_in_at")
        if since is None or time.monotonic() - since < PING_IDLE_AFTER_S:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as error:
            raise exc.DisconnectionError("idle connection failed its ping") from error


_WRITE_WAIT, _READ_WAIT = metrics.DB_POOL_WAIT.labels(kind="write"), metrics.DB_POOL_WAIT.labels(kind="read")
_WRITE_TX, _READ_TX = metrics.DB_TRANSACTION.labels(kind="write"), metrics.DB_TRANSACTION.labels(kind="read")


def _waited(histogram: Any, since: float) -> float:
    """Observe the wait for a connection that began at ``since``; returns now (when the transaction began)."""
    now = time.perf_counter()
    histogram.observe(now - since)
    return now


def listed(col: ColumnElement[str], name: str, *, sqlite: bool) -> ColumnElement[bool]:
    """``col`` is one of the strings the parameter ``name`` lists, so that a statement taking any number of them is
    one constant (prepared once): the list is a JSON array on SQLite (``json_each``), a text array on PostgreSQL
    (``= ANY``). :meth:`Database.listed_value` makes the parameter's value."""
    if sqlite:
        return col.in_(select(column("value")).select_from(func.json_each(bindparam(name))))
    return col == any_(bindparam(name, type_=postgresql.ARRAY(String)))


class WriteSession(AsyncSession):
    """The ORM session of a write transaction (:meth:`Database.write`). ``plain`` is the same transaction's
    connection for constant Core statements (``store.prepared``). The session connects only when first used,
    so a write that needs no ORM object costs no ORM work."""

    plain: PlainConnection


def _used(session: AsyncSession) -> bool:
    """Whether the ORM session was used (it connected, or holds objects): only then is it flushed and closed."""
    return session.in_transaction() or len(session.identity_map) > 0 or bool(session.new)


class Database:
    """Owns the engines. :meth:`write` is the one way into a write transaction (commit on success, roll back on
    an exception); :meth:`read` is read-only.

    A write transaction is a plain connection — on a SQLite file a ``sqlite3`` connection that runs constant Core
    statements prepared (``store.prepared``), elsewhere a SQLAlchemy connection — with an ORM session joined onto
    it for code that works with model objects. Statements through either are in the one transaction.

    On SQLite every write in this process is serialised by one lock (SQLite has one writer anyway, and
    queuing here is cheaper than ``database is locked`` retries). On PostgreSQL writers to one session are
    serialised by the ``SELECT ... FOR UPDATE`` the services take on the session row.
    """

    def __init__(self, url: str, *, pool_timeout: float = 5.0) -> None:
        """``pool_timeout``: how long a request waits for a PostgreSQL connection before it fails (retryable,
        ``SERVICE_UNAVAILABLE``) instead of queueing behind an overloaded pool for half a minute."""
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self._sqlite_path = ""
        # A SQLite file: the ORM of a write runs on the write's own connection, through this engine.
        self._joined_engine: AsyncEngine | None = None
        if self.is_sqlite:
            path = make_url(url).database or ":memory:"
            self.write_engine = create_async_engine(url, async_creator=sqlite_inline.connector(path))
            self.read_engine = create_async_engine(url, async_creator=sqlite_inline.connector(path))
            checkpoints = lambda: self._checkpointer is not None  # noqa: E731
            _sqlite_pragmas(self.write_engine, immediate=True, background_checkpoints=checkpoints)
            _sqlite_pragmas(self.read_engine, immediate=False, background_checkpoints=checkpoints)
            self._sqlite_path = path
            if not sqlite_inline.is_memory(path):
                self._joined_engine = create_async_engine(
                    url, async_creator=self._joined_connection, poolclass=StaticPool
                )
        else:
            self.write_engine = create_async_engine(url, pool_size=10, max_overflow=20, pool_timeout=pool_timeout)
            _ping_idle_connections(self.write_engine)
            self.read_engine = self.write_engine
        self._reads = async_sessionmaker(self.read_engine, expire_on_commit=False)
        self._dialect = self.write_engine.dialect
        self._write_lock = WriteTurns() if self.is_sqlite else None
        self._checkpointer: sqlite_inline.Checkpointer | None = None
        # SQLite file: the connection of every write (opened on first use), and an ORM session no write used.
        self._plain: sqlite_inline.InlineConnection | None = None
        self._spare: WriteSession | None = None
        # SQLite file: the connection of every ``read_rows`` (opened on first use), and its statements' runner.
        self._reader: tuple[sqlite_inline.InlineConnection, PreparedConnection] | None = None

    @asynccontextmanager
    async def write(self) -> AsyncIterator[WriteSession]:
        """One transaction; commits when the block ends without an exception, rolls back otherwise. It yields the
        ORM session of the transaction, whose ``plain`` is the connection for constant Core statements. What the
        ORM holds is flushed before the commit.

        The transaction is its plain connection's. On a SQLite file that is a connection of its own, without
        SQLAlchemy: ``BEGIN IMMEDIATE``, the statements prepared, ``COMMIT`` — SQLAlchemy's connection, pool and
        transaction bookkeeping cost more CPU than the work itself — and the ORM reaches it through
        ``_joined_engine`` only when it is used. Elsewhere (PostgreSQL, an in-memory SQLite database) it is a
        SQLAlchemy connection that the ORM session joins. On SQLite this process's writers take turns (after
        letting ready callbacks run). Written without nested context managers: this is every write's path.
        """
        started, began = time.perf_counter(), 0.0
        lock = self._write_lock
        with tracing.span("db write"):
            if lock is not None:
                await _let_ready_callbacks_run()
                await lock.acquire()
            try:
                plain = await self._begin()
                began = _waited(_WRITE_WAIT, started)
                if lock is not None:
                    sqlite_inline.fresh_stretch()
                session = self._session_on(plain)
                try:
                    yield session
                    await self._end_session(session, flush=True)
                    await self._commit(plain)
                except BaseException:
                    await self._end_session(session, flush=False)
                    await self._rollback(plain)
                    raise
            finally:
                if lock is not None:
                    sqlite_inline.end_write_stretch()
                    lock.release()
                if began:  # not when no connection was had
                    _WRITE_TX.observe(time.perf_counter() - began)

    def _session_on(self, plain: PlainConnection) -> WriteSession:
        if isinstance(plain, AsyncConnection):
            # Joins the connection's transaction: the session's commit is only a flush; the write commits.
            session = WriteSession(bind=plain, join_transaction_mode="rollback_only", expire_on_commit=False)
        else:
            # The SQLite file's write connection, joined (``sqlite_inline.JoinedConnection``). A session the write
            # before never used is as new, and writes take turns: the next one gets it (saving its construction,
            # a tenth of a queue edit's CPU).
            session = self._spare or WriteSession(bind=self._joined_engine, expire_on_commit=False)
            self._spare = None
        session.plain = plain
        return session

    async def _end_session(self, session: WriteSession, *, flush: bool) -> None:
        """Flush what a used session holds (``flush``), then close it so its objects are detached, as after any
        session; keep an unused one for the next write (``_session_on``)."""
        if not _used(session):
            if self._joined_engine is not None:
                self._spare = session
            return
        try:
            if flush:
                await session.commit()  # a flush: the transaction is the plain connection's
        finally:
            await session.close()

    async def _begin(self) -> PlainConnection:
        if self._joined_engine is None:
            conn = await self.write_engine.connect()
            try:
                await conn.begin()
            except BaseException:
                await conn.close()
                raise
            return conn
        inline = await self._plain_connection()
        await inline.begin_immediate()
        return PreparedConnection(inline.sqlite_connection(), self._dialect)

    async def _commit(self, plain: PlainConnection) -> None:
        if isinstance(plain, AsyncConnection):
            await plain.commit()
            await plain.close()
        else:
            await self._inline().commit()

    async def _rollback(self, plain: PlainConnection) -> None:
        if isinstance(plain, AsyncConnection):
            try:
                await plain.rollback()
            finally:
                await plain.close()
            return
        inline = self._inline()
        try:
            await inline.rollback()
        except Exception:  # a connection that cannot roll back is not used again
            self._plain = None
            await inline.close()

    def _inline(self) -> sqlite_inline.InlineConnection:
        assert self._plain is not None, "a write is open on it"
        return self._plain

    async def _joined_connection(self) -> sqlite_inline.JoinedConnection:
        def current() -> sqlite3.Connection:
            if self._plain is None:
                raise ValueError("no active connection")
            return self._plain.sqlite_connection()

        return sqlite_inline.JoinedConnection(current)

    async def _plain_connection(self) -> sqlite_inline.InlineConnection:
        if self._plain is None:
            self._plain = await self._open_inline()
        return self._plain

    async def _open_inline(self) -> sqlite_inline.InlineConnection:
        """A connection of its own to the SQLite file, set up as every connection of the server."""
        conn: sqlite_inline.InlineConnection = await sqlite_inline.connector(self._sqlite_path)()
        sqlite_inline.configure(conn.sqlite_connection(), background_checkpoints=self._checkpointer is not None)
        return conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        if self.is_sqlite:
            await _let_ready_callbacks_run()
        started, began = time.perf_counter(), 0.0
        try:
            with tracing.span("db read"):
                async with self._reads() as session, session.begin():
                    await session.connection()
                    began = _waited(_READ_WAIT, started)
                    yield session
        finally:
            if began:
                _READ_TX.observe(time.perf_counter() - began)

    async def read_rows(self, statement: Select[Any], params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        """The rows of one read of one constant Core statement (a module constant built with ``bindparam``), for
        a read that needs no ORM object nor a transaction around it: one statement reads one snapshot. On a
        SQLite file it runs prepared (``store.prepared``) on a connection kept for these reads, without
        SQLAlchemy's connection, pool and result machinery (which cost ~50 times the read); elsewhere on a
        connection of the read engine. Values come back typed as SQLAlchemy types them."""
        started = time.perf_counter()
        try:
            if self._joined_engine is not None:
                reader = self._reader
                if reader is None:
                    inline = await self._open_inline()
                    reader = self._reader = (inline, PreparedConnection(inline.sqlite_connection(), self._dialect))
                return await reader[1].rows(statement, params)
            async with self.read_engine.connect() as conn:
                rows: Sequence[Sequence[Any]] = (await conn.execute(statement, params)).all()
                return rows
        finally:
            _READ_TX.observe(time.perf_counter() - started)

    def listed_value(self, values: Sequence[str]) -> str | list[str]:
        """The value of a :func:`listed` parameter: ``values`` as this database's statement takes them."""
        return orjson.dumps(list(values)).decode() if self.is_sqlite else list(values)

    async def close(self) -> None:
        if self._reader is not None:
            await self._reader[0].close()
            self._reader = None
        if self._plain is not None:
            await self._plain.close()
            self._plain = None
        await self.write_engine.dispose()
        if self._joined_engine is not None:
            await self._joined_engine.dispose()
        if self.read_engine is not self.write_engine:
            await self.read_engine.dispose()
        if self._checkpointer is not None:
            await self._checkpointer.close()
            self._checkpointer = None

    async def __aenter__(self) -> Database:
        """A long-lived user (the server): on a SQLite file, checkpoints move to a worker thread."""
        if self.is_sqlite and self._sqlite_path != ":memory:" and self._checkpointer is None:
            self._checkpointer = sqlite_inline.Checkpointer(self._sqlite_path, CHECKPOINT_SECONDS)
            self._checkpointer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
