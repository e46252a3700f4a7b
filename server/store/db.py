"""Engines and unit-of-work sessions for SQLite (aiosqlite) and PostgreSQL (asyncpg)."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine


def _sqlite_pragmas(engine: AsyncEngine, *, immediate: bool) -> None:
    """WAL so readers never block the writer; BEGIN IMMEDIATE on the writer so two processes
    (the server and `chatsync users create`) queue on the lock instead of failing to upgrade it."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # let us issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=10000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


class Database:
    """Owns the engines. ``write()`` is a unit of work (commit on success); ``read()`` is read-only.

    On SQLite every write in this process is serialised by one lock (SQLite has one writer anyway, and
    queuing here is cheaper than ``database is locked`` retries). On PostgreSQL writers to one session are
    serialised by the ``SELECT ... FOR UPDATE`` the services take on the session row.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        if self.is_sqlite:
            self.write_engine = create_async_engine(url)
            self.read_engine = create_async_engine(url)
            _sqlite_pragmas(self.write_engine, immediate=True)
            _sqlite_pragmas(self.read_engine, immediate=False)
        else:
            self.write_engine = create_async_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)
            self.read_engine = self.write_engine
        self._writes = async_sessionmaker(self.write_engine, expire_on_commit=False)
        self._reads = async_sessionmaker(self.read_engine, expire_on_commit=False)
        self._write_lock = asyncio.Lock() if self.is_sqlite else None

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """One transaction; commits when the block ends without an exception, rolls back otherwise."""
        if self._write_lock is not None:
            async with self._write_lock:
                async with self._writes() as session, session.begin():
                    yield session
        else:
            async with self._writes() as session, session.begin():
                yield session

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self._reads() as session, session.begin():
            yield session

    async def close(self) -> None:
        await self.write_engine.dispose()
        if self.read_engine is not self.write_engine:
            await self.read_engine.dispose()

    async def __aenter__(self) -> "Database":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
