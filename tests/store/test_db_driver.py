"""The database layer's connection handling: SQLite calls made on the loop must never wait on it, and
PostgreSQL connections cut while idle in the pool are replaced before use."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text

from server.store import db as db_module
from server.store import migrate, sqlite_inline
from server.store.db import Database
from tests.testkit import PG_ADMIN_DSN, fresh_pg_database

# A write's statements both ways: through its ORM session, and through its plain connection (on a SQLite file
# a connection of its own that the ORM joins).
WRITERS = pytest.mark.parametrize("writer", ["orm", "plain"])


@asynccontextmanager
async def _write(db: Database, writer: str) -> AsyncIterator[Any]:
    async with db.write() as s:
        yield s.plain if writer == "plain" else s


@WRITERS
async def test_sqlite_write_waits_for_another_process_lock_without_blocking_the_loop(tmp_path, writer):
    url = f"sqlite+aiosqlite:///{tmp_path / 'locked.db'}"
    async with Database(url) as db:
        await migrate.upgrade(db)
        # Another connection (as `chatsync users create` in another process would) holds the write lock.
        other = sqlite3.connect(tmp_path / "locked.db", isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO users (id, name, role, created_at) VALUES ('u1', 'other', 'user', '2026-01-01')")
        release = threading.Timer(0.4, other.execute, args=("COMMIT",))
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick_task = asyncio.create_task(ticker())
        start = time.monotonic()
        release.start()
        try:
            async with _write(db, writer) as s:
                await s.execute(
                    text("INSERT INTO users (id, name, role, created_at) VALUES ('u2', 'mine', 'user', '2026-01-01')")
                )
        finally:
            tick_task.cancel()
            release.join()
            other.close()
        waited = time.monotonic() - start
        # The write waited for the other lock, and the loop kept running meanwhile.
        assert waited >= 0.35
        assert ticks >= 10
        async with db.read() as s:
            names = (await s.execute(text("SELECT name FROM users ORDER BY id"))).scalars().all()
        assert names == ["other", "mine"]


@WRITERS
async def test_sqlite_busy_beyond_the_timeout_is_an_error(tmp_path, monkeypatch, writer):
    monkeypatch.setattr(sqlite_inline, "BUSY_TIMEOUT_S", 0.2)
    url = f"sqlite+aiosqlite:///{tmp_path / 'stuck.db'}"
    async with Database(url) as db:
        await migrate.upgrade(db)
        other = sqlite3.connect(tmp_path / "stuck.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(Exception, match="locked"):
                async with _write(db, writer) as s:
                    await s.execute(text("SELECT 1"))
        finally:
            other.execute("ROLLBACK")
            other.close()
        async with _write(db, writer) as s:  # and the connection is usable again
            assert (await s.execute(text("SELECT 1"))).first()[0] == 1


async def test_postgres_connection_cut_while_idle_is_replaced(monkeypatch):
    monkeypatch.setattr(db_module, "PING_IDLE_AFTER_S", 0.0)
    async with fresh_pg_database() as url:
        async with Database(url) as db:
            async with db.read() as s:
                pid = (await s.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            # The server ends the pooled connection behind the pool's back (a restart, a proxy timeout).
            admin = await asyncpg.connect(PG_ADMIN_DSN)
            try:
                assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
                async with asyncio.timeout(10):  # until the backend is gone
                    while await admin.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid):
                        await asyncio.sleep(0.01)
            finally:
                await admin.close()
            async with db.read() as s:
                new_pid = (await s.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            assert new_pid != pid


async def test_sqlite_transaction_lets_ready_callbacks_run_first(tmp_path):
    """A transaction holds the loop while it runs (statements execute inline), so what was already scheduled —
    a token delta on its way to subscribers — goes out before it, not after."""
    async with Database(f"sqlite+aiosqlite:///{tmp_path / 'order.db'}") as db:
        await migrate.upgrade(db)
        for name, open_tx in (("write", db.write), ("read", db.read)):
            ran: list[str] = []
            asyncio.get_running_loop().call_soon(ran.append, "delta")
            async with open_tx() as s:
                ran.append("transaction")
                await s.execute(text("SELECT 1"))
            assert ran == ["delta", "transaction"], name


async def test_sqlite_checkpoints_happen_in_the_background_not_in_commits(tmp_path, monkeypatch):
    monkeypatch.setattr(db_module, "CHECKPOINT_SECONDS", 0.05)
    path = tmp_path / "wal.db"
    async with Database(f"sqlite+aiosqlite:///{path}") as db:
        await migrate.upgrade(db)
        con = sqlite3.connect(path)  # the migration's pages reach the file now, not in a later checkpoint
        try:
            con.execute("PRAGMA wal_checkpoint(FULL)").fetchall()
        finally:
            con.close()
        async with db.write() as s:
            # Commits on the loop never checkpoint: that fsync happens in the checkpointer's thread.
            assert (await s.execute(text("PRAGMA wal_autocheckpoint"))).scalar_one() == 0
        size_before = path.stat().st_size
        async with db.write() as s:
            insert_user = text(
                "INSERT INTO users (id, name, role, created_at) VALUES (:id, :name, 'user', '2026-01-01')"
            )
            for i in range(300):
                await s.execute(insert_user, {"id": f"u{i}", "name": "x" * 500 + str(i)})
        deadline = time.monotonic() + 5
        while path.stat().st_size == size_before and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        # The rows left the write-ahead log for the database file without any commit checkpointing.
        assert path.stat().st_size > size_before
    # Closed: the log was truncated for whoever opens the file next.
    assert not (tmp_path / "wal.db-wal").exists() or (tmp_path / "wal.db-wal").stat().st_size == 0


async def test_sqlite_without_the_server_lifecycle_keeps_automatic_checkpoints(tmp_path):
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}")  # as a one-off command uses it
    try:
        async with db.write() as s:
            assert (await s.execute(text("PRAGMA wal_autocheckpoint"))).scalar_one() == 1000
    finally:
        await db.close()


@asynccontextmanager
async def counting_turns() -> AsyncIterator[list[int]]:
    """Counts the turns of the event loop while the block runs (``turns[0]``)."""
    turns = [0]

    async def spin() -> None:
        while True:
            await asyncio.sleep(0)
            turns[0] += 1

    task = asyncio.create_task(spin())
    await asyncio.sleep(0)
    try:
        yield turns
    finally:
        task.cancel()


_MANY_USERS = text("INSERT INTO users (id, name, role, created_at) VALUES (:id, :name, 'user', '2026-01-01')")


@WRITERS
async def test_a_long_sqlite_transaction_lets_the_loop_run_between_statements(tmp_path, writer):
    """Statements run on the loop, but a transaction of thousands of them (a megabyte of messages) gives the
    loop back every few milliseconds: other connections' work goes on before it commits."""
    async with Database(f"sqlite+aiosqlite:///{tmp_path / 'long.db'}") as db:
        await migrate.upgrade(db)
        async with counting_turns() as turns:
            async with _write(db, writer) as s:
                before = turns[0]
                for i in range(3000):
                    await s.execute(_MANY_USERS, {"id": f"u{i}", "name": f"user {i} " + "x" * 200})
                during = turns[0] - before
        assert during > 0
        async with db.read() as s:
            assert (await s.execute(text("SELECT count(*) FROM users"))).scalar_one() == 3000


async def test_sqlite_writers_queued_behind_a_transaction_all_write_in_the_turn_after_it(tmp_path):
    """Writers that asked while a transaction was open all write right after it commits, one after another in
    the same turn of the loop, rather than one per turn (each waiting for its own wake-up while holding the
    turn); and a transaction that begins after others ran in that turn does not give the loop back at its first
    statement, holding everyone else up for another turn."""
    async with Database(f"sqlite+aiosqlite:///{tmp_path / 'turns.db'}") as db:
        await migrate.upgrade(db)
        opened, release = asyncio.Event(), asyncio.Event()
        done_at: list[int] = []

        async def holder() -> None:
            async with db.write() as s:
                await s.plain.execute(_MANY_USERS, {"id": "first", "name": "first"})
                opened.set()
                await release.wait()

        async def writer(i: int) -> None:
            async with db.write() as s:
                await s.plain.execute(_MANY_USERS, {"id": f"u{i}", "name": f"user {i}"})
            done_at.append(turns[0])

        async with counting_turns() as turns:
            first = asyncio.create_task(holder())
            await opened.wait()
            writers = [asyncio.create_task(writer(i)) for i in range(30)]
            lock: Any = db._write_lock
            while len(lock._waiters or ()) < len(writers):  # every writer is waiting for its turn
                await asyncio.sleep(0)
            released_at = turns[0]
            release.set()
            await asyncio.gather(first, *writers)
        assert max(done_at) - released_at <= 3, (released_at, done_at)
        async with db.read() as s:
            assert (await s.execute(text("SELECT count(*) FROM users"))).scalar_one() == 31


async def test_a_writer_cancelled_while_waiting_for_its_turn_leaves_the_turn_to_the_others(tmp_path):
    turns = db_module.WriteTurns()
    await turns.acquire()
    got: list[str] = []

    async def wait_turn(name: str) -> None:
        await turns.acquire()
        got.append(name)
        turns.release()

    cancelled, other = asyncio.create_task(wait_turn("cancelled")), asyncio.create_task(wait_turn("other"))
    while len(turns._waiters) < 2:
        await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert len(turns._waiters) == 1
    turns.release()
    await asyncio.wait_for(other, 5)
    assert got == ["other"]
    await asyncio.wait_for(turns.acquire(), 5)  # free again


# Run in a child process: closing a connection another thread is using crashes the interpreter.
_CHECKPOINT_RACE = """
import asyncio, os, sqlite3, sys, tempfile
from server.store.sqlite_inline import Checkpointer

async def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "wal.db")
        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("CREATE TABLE t (x TEXT)")
        for i in range(300):
            writer.execute("BEGIN")
            writer.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
            writer.execute("COMMIT")
            checkpointer = Checkpointer(path, interval=0)
            checkpointer.start()
            for _ in range(i % 7):  # close at every stage of a checkpoint under way
                await asyncio.sleep(0)
            await checkpointer.close()
        writer.close()

asyncio.run(main())
print("closed 300 times")
"""


def test_closing_the_checkpointer_mid_checkpoint_waits_for_it():
    """A cancelled checkpoint keeps running in its thread; closing must not pull the connection from under it.
    The write-ahead log grows with every round, so later checkpoints are long enough to be caught mid-way."""
    done = subprocess.run([sys.executable, "-c", _CHECKPOINT_RACE], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "closed 300 times"


async def test_sqlite_write_ahead_log_is_emptied_once_idle_after_a_burst(tmp_path, monkeypatch):
    """A burst grows the write-ahead log (SQLite keeps its size); once nothing is written the checkpointer
    empties it, and every connection caps what it keeps after a checkpoint (``journal_size_limit``)."""
    monkeypatch.setattr(db_module, "CHECKPOINT_SECONDS", 0.05)
    path = tmp_path / "burst.db"
    async with Database(f"sqlite+aiosqlite:///{path}") as db:
        await migrate.upgrade(db)
        for open_tx in (db.write, db.read):
            async with open_tx() as s:
                limit = (await s.execute(text("PRAGMA journal_size_limit"))).scalar_one()
                assert limit == sqlite_inline.JOURNAL_SIZE_LIMIT
        async with db.write() as s:
            insert_chunk = text("INSERT INTO file_chunks (blob_id, seq, data) VALUES ('burst', :seq, :data)")
            for seq in range(24):
                await s.execute(insert_chunk, {"seq": seq, "data": os.urandom(1 << 20)})
        assert sqlite_inline.wal_size(str(path)) > 20 << 20
        deadline = time.monotonic() + 30
        while sqlite_inline.wal_size(str(path)) > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert sqlite_inline.wal_size(str(path)) == 0
        async with db.read() as s:
            assert (await s.execute(text("SELECT count(*) FROM file_chunks"))).scalar_one() == 24
