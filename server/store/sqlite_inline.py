"""SQLite calls made on the event loop itself, behind the driver interface SQLAlchemy's aiosqlite dialect uses.

aiosqlite hands every call (open a cursor, execute, fetch, close, commit) to a worker thread and waits for
the answer: CPU and two context switches per call that cost many times the call itself — a local file in
WAL mode with ``synchronous=NORMAL``, so no fsync on commit (``docs/performance.md`` has the figures). A
queue enqueue makes dozens of such calls. Here each call runs inline instead.

What that costs, and how it is contained:

* A call now holds the event loop for as long as SQLite works: microseconds for the statements this server
  issues (indexed lookups, single-row writes), a few milliseconds for the occasional WAL checkpoint.
* Checkpoints — copying the write-ahead log into the database file, with an fsync — are the one slow part.
  SQLite runs them inside whichever commit crosses ``wal_autocheckpoint`` pages, which here would be on the
  loop; so connections opened for a running server turn that off and :class:`Checkpointer` does the work from
  a worker thread once a second (``PRAGMA wal_checkpoint(PASSIVE)``: it never waits for, nor blocks, the
  writer or the readers).
* The write-ahead log keeps the size it grew to (SQLite reuses the file rather than shrink it): a burst of
  writes once left it near a gigabyte until shutdown. ``journal_size_limit`` makes the first commit after a
  complete checkpoint cut it back to :data:`JOURNAL_SIZE_LIMIT`, and :class:`Checkpointer` empties it
  (``wal_checkpoint(TRUNCATE)``) once the database is idle while the log is over :data:`IDLE_TRUNCATE_BYTES`.
* A long transaction (a megabyte of messages in one write) is many calls back to back, none of which would
  otherwise give the loop back until it commits: every other connection of the process would wait for it.
  :func:`share_loop` lets the loop run other work between two calls once the calls have held it for
  ``SHARE_AFTER_S`` (``SHARE_AFTER_WRITING_S`` inside a write transaction), so the loop is never held for
  longer than that plus one call. Other writers still wait for the commit (one writer at a time), but reads,
  pings and every byte in flight go on.
* Giving the loop back inside a write transaction holds up every other writer of the process for a whole turn
  of the loop (milliseconds, under load). So a write transaction's calls form a stretch of their own
  (:func:`fresh_stretch`) with the longer ``SHARE_AFTER_WRITING_S``: an ordinary transaction (a send, a
  step's end: a millisecond or two) never yields, and ``Database.write``'s turns (``WriteTurns``) let the
  writers that queued meanwhile write one after another in the next turn.
* A call must never *wait* on the loop. The busy timeout is therefore 0: a lock held by another process
  (``chatsync users create`` while the server runs) fails the statement with SQLITE_BUSY at once, and we
  retry it after an ``asyncio.sleep`` with backoff, for up to ``BUSY_TIMEOUT_S``. Retrying is safe: a
  statement that failed with SQLITE_BUSY did nothing (SQLite's documentation says so for COMMIT too).
  Inside this process writers never contend: ``Database.write`` serialises them on an asyncio lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any, Literal

log = logging.getLogger(__name__)

IsolationLevel = Literal["DEFERRED", "EXCLUSIVE", "IMMEDIATE"] | None  # sqlite3's (None: autocommit)

BUSY_TIMEOUT_S = 10.0
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024  # what the write-ahead log is cut back to after a complete checkpoint
IDLE_TRUNCATE_BYTES = 4 * 1024 * 1024  # an idle database's log larger than this is emptied
TRUNCATE_WAIT_MS = 100  # how long an idle truncation waits for readers (writers wait meanwhile) before giving up
SHARE_AFTER_S = 0.002
SHARE_AFTER_WRITING_S = 0.01
_share_after = SHARE_AFTER_S  # SHARE_AFTER_WRITING_S while a write transaction is open
_FIRST_BACKOFF_S = 0.002
_MAX_BACKOFF_S = 0.1


_stretch_start = 0.0  # when the current run of back-to-back SQLite calls began
_turn_pending = False  # a marker is waiting for the loop's next turn: no other work has run since


def _loop_turned() -> None:
    global _turn_pending
    _turn_pending = False


async def share_loop() -> None:
    """Called before each SQLite call made on the loop. Calls that follow each other without the loop turning
    (one transaction's statements) form a stretch; once a stretch is older than ``SHARE_AFTER_S``, yield
    once. A marker scheduled on the loop says whether it turned since the stretch began, so a short
    transaction costs one ``call_soon`` and never yields."""
    global _stretch_start, _turn_pending
    if _turn_pending:
        if time.perf_counter() - _stretch_start <= _share_after:
            return
        await asyncio.sleep(0)
    _stretch_start = time.perf_counter()
    _turn_pending = True
    asyncio.get_running_loop().call_soon(_loop_turned)


def fresh_stretch() -> None:
    """A write transaction begins (``Database.write``, holding the write lock): its calls form a stretch of
    their own. Otherwise a transaction that begins after others ran in the same turn of the loop would find the
    stretch already old and yield at its first call, holding the write lock for a whole turn while every other
    writer queues behind it; each of those then waits a turn for its wake-up, and the queue never drains.
    Each transaction still gives the loop back once its own calls have held it for ``SHARE_AFTER_WRITING_S``
    (a megabyte-sized one does; a send or a step's end never does)."""
    global _stretch_start, _turn_pending, _share_after
    _stretch_start = time.perf_counter()
    _share_after = SHARE_AFTER_WRITING_S
    if not _turn_pending:
        _turn_pending = True
        asyncio.get_running_loop().call_soon(_loop_turned)


def end_write_stretch() -> None:
    """The write transaction ended: calls share the loop after ``SHARE_AFTER_S`` again."""
    global _share_after
    _share_after = SHARE_AFTER_S


def _is_busy(error: sqlite3.OperationalError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(error) or "busy" in str(error)


async def retry_busy(fn: Callable[..., Any], *args: Any) -> Any:
    await share_loop()
    try:
        return fn(*args)
    except sqlite3.OperationalError as error:
        if not _is_busy(error):
            raise
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BUSY_TIMEOUT_S
    delay = _FIRST_BACKOFF_S
    while True:
        await asyncio.sleep(delay)
        try:
            return fn(*args)
        except sqlite3.OperationalError as error:
            if not _is_busy(error) or loop.time() >= deadline:
                raise
        delay = min(delay * 2, _MAX_BACKOFF_S)


class InlineCursor:
    """A ``sqlite3`` cursor behind the async cursor interface the dialect expects; every call runs inline."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    async def __aenter__(self) -> InlineCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cursor.close()

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    async def execute(self, sql: str, parameters: Any = ()) -> InlineCursor:
        await retry_busy(self._cursor.execute, sql, parameters)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> InlineCursor:
        # A list, so a retry sees every row again (and not an exhausted iterator).
        await retry_busy(self._cursor.executemany, sql, list(parameters))
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._cursor.fetchmany(self._cursor.arraysize if size is None else size)

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def close(self) -> None:
        self._cursor.close()


class InlineConnection:
    """The subset of ``aiosqlite.Connection`` that SQLAlchemy's aiosqlite dialect calls, executed inline."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._connection: sqlite3.Connection | None = conn

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise ValueError("no active connection")
        return self._connection

    @property
    def _tx(self) -> InlineConnection:
        # SQLAlchemy sets ``isolation_level`` by queueing a function for aiosqlite's worker thread:
        # ``_tx.put_nowait((future, function))``. Run it now instead.
        return self

    def put_nowait(self, item: tuple[asyncio.Future[Any], Callable[[], Any]]) -> None:
        future, function = item
        try:
            future.set_result(function())
        except Exception as error:  # handed to whoever awaits the future
            future.set_exception(error)

    def cursor(self) -> InlineCursor:
        return InlineCursor(self._conn.cursor())

    def sqlite_connection(self) -> sqlite3.Connection:
        """The ``sqlite3`` connection itself, for statements run without the driver layer (``prepared``)."""
        return self._conn

    async def execute(self, sql: str, parameters: Any = ()) -> InlineCursor:
        return await self.cursor().execute(sql, parameters)

    def try_execute(self, sql: str) -> bool:
        """Run a statement that returns no rows now; False (and nothing done) when the database is busy."""
        try:
            self._conn.execute(sql)
        except sqlite3.OperationalError as error:
            if _is_busy(error):
                return False
            raise
        return True

    async def begin_immediate(self) -> None:
        """Start a write transaction, waiting (with backoff, never blocking the loop) for another process's lock."""
        if not self.try_execute("BEGIN IMMEDIATE"):
            await retry_busy(self._conn.execute, "BEGIN IMMEDIATE")

    async def commit(self) -> None:
        await retry_busy(self._conn.commit)

    async def rollback(self) -> None:
        self._conn.rollback()

    async def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def stop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def create_function(
        self, name: str, num_params: int, func: Callable[..., Any], deterministic: bool = False
    ) -> None:
        self._conn.create_function(name, num_params, func, deterministic=deterministic)

    @property
    def isolation_level(self) -> IsolationLevel:
        return self._conn.isolation_level

    @isolation_level.setter
    def isolation_level(self, value: IsolationLevel) -> None:
        self._conn.isolation_level = value

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction


class JoinedConnection(InlineConnection):
    """Another view of a connection whose transaction someone else owns: SQLAlchemy runs statements on it
    inside that transaction, and its ``commit``, ``rollback`` and ``close`` do nothing (the owner commits or
    rolls back, and closes). ``source`` returns the owner's connection at each call, so a connection the owner
    replaced is never used again through this view."""

    def __init__(self, source: Callable[[], sqlite3.Connection]) -> None:
        self._source = source

    @property
    def _connection(self) -> sqlite3.Connection:  # type: ignore[override]
        return self._source()

    async def commit(self) -> None:
        pass

    async def rollback(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def stop(self) -> None:
        pass

    @property
    def isolation_level(self) -> IsolationLevel:
        return self._conn.isolation_level

    @isolation_level.setter
    def isolation_level(self, value: IsolationLevel) -> None:
        # sqlite3 commits an open transaction when it is set to None: the owner's transaction is left alone.
        pass


class Checkpointer:
    """Checkpoints the database at ``path`` from a worker thread every ``interval`` seconds (see above), and
    empties the write-ahead log once the database is idle: when two checkpoints in a row found the whole log
    checkpointed and nothing written since, and the log file is over :data:`IDLE_TRUNCATE_BYTES`.

    Cancelling the task that awaits a checkpoint does not stop the thread running it, so the connection is
    used and closed only under ``_lock``: a close waits for a checkpoint still under way, and a checkpoint
    never starts on a closed connection (closing one another thread is using crashes the process)."""

    def __init__(self, path: str, interval: float = 1.0) -> None:
        self.path = path
        self.interval = interval
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sqlite-checkpointer")

    async def _run(self) -> None:
        previous: tuple[int, int] | None = None
        while True:
            await asyncio.sleep(self.interval)
            try:
                previous = await asyncio.to_thread(self._tick, previous)
            except sqlite3.Error:
                log.warning("SQLite checkpoint failed; retrying in %s s", self.interval, exc_info=True)

    def _tick(self, previous: tuple[int, int] | None) -> tuple[int, int] | None:
        """One passive checkpoint, then an idle truncation when due; returns what the next tick compares with."""
        busy, frames, done = self.checkpoint("PASSIVE")
        now = (frames, done)
        idle = not busy and frames == done and now == previous
        if idle and frames > 0 and wal_size(self.path) > IDLE_TRUNCATE_BYTES:
            self.checkpoint("TRUNCATE", wait_ms=TRUNCATE_WAIT_MS)
            return None
        return now

    def checkpoint(self, mode: str, wait_ms: int = 1000) -> tuple[int, int, int]:
        """Runs in a worker thread (its own connection; the sqlite3 module releases the GIL meanwhile). Returns
        SQLite's answer: (1 if it could not finish, frames in the log, frames checkpointed)."""
        with self._lock:
            if self._closed:
                return (1, -1, -1)
            if self._conn is None:
                self._conn = sqlite3.connect(
                    self.path,
                    timeout=1.0,
                    isolation_level=None,
                    check_same_thread=False,
                    uri=self.path.startswith("file:"),
                )
            self._conn.execute(f"PRAGMA busy_timeout={int(wait_ms)}")
            busy, frames, done = self._conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            return int(busy), int(frames), int(done)

    def _close_connection(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            # Leave the log empty for whoever opens the file next.
            await asyncio.to_thread(self.checkpoint, "TRUNCATE")
        except sqlite3.Error:
            log.warning("final SQLite checkpoint failed", exc_info=True)
        await asyncio.to_thread(self._close_connection)


def wal_size(path: str) -> int:
    """The size of the write-ahead log of the database at ``path`` (a file name or a ``file:`` URI); 0 if none."""
    if path.startswith("file:"):
        path = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
    try:
        return os.path.getsize(path + "-wal")
    except OSError:
        return 0


def configure(conn: sqlite3.Connection, *, background_checkpoints: bool) -> None:
    """The settings every connection of the server gets: WAL so readers never block the writer, no fsync per
    commit, no busy waiting inside SQLite (see the module docstring), foreign keys enforced, a log cut back
    after checkpoints."""
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=0")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
    if background_checkpoints:
        conn.execute("PRAGMA wal_autocheckpoint=0")  # a worker thread checkpoints instead (Checkpointer)


def is_memory(path: str) -> bool:
    """An in-memory database: every connection would see a database of its own."""
    return path in ("", ":memory:") or "mode=memory" in path


def connector(path: str) -> Callable[[], Any]:
    """An ``async_creator`` for ``create_async_engine``: opens ``path`` with a zero busy timeout."""

    async def connect() -> InlineConnection:
        uri = path.startswith("file:")
        conn = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False, uri=uri)
        return InlineConnection(conn)

    return connect
