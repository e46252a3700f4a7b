"""The Alembic migrations produce exactly the models' schema, on SQLite and on PostgreSQL."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from server.store.models import Base


def _diff(connection):
    ctx = MigrationContext.configure(connection, opts={"compare_type": True})
    return compare_metadata(ctx, Base.metadata)


async def test_migrated_schema_equals_models(migrated_db):
    async with migrated_db.write_engine.connect() as conn:
        diff = await conn.run_sync(_diff)
        tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    assert diff == []
    assert {"users", "api_tokens", "sessions", "messages", "queued_messages", "events"} <= tables


async def test_upgrade_is_idempotent(migrated_db):
    from server.store import migrate

    await migrate.upgrade(migrated_db)  # a second start must not fail or change anything
    async with migrated_db.write_engine.connect() as conn:
        assert await conn.run_sync(_diff) == []


async def _add_alice(conn, now):
    """User ``u1`` (alice), written as plain SQL into a database at an older revision."""
    from sqlalchemy import text

    await conn.execute(
        text("INSERT INTO users (id, name, role, created_at, feed_seq) VALUES ('u1', 'alice', 'user', :t, 0)"),
        {"t": now},
    )


async def test_links_made_before_they_knew_their_device_are_dropped(db_url):
    """Sign-in codes from before revision 0005 cannot die with the device that made them: the upgrade drops
    them (and nothing else)."""
    from datetime import timedelta

    from sqlalchemy import text

    from server.store import migrate
    from server.store.db import Database
    from server.store.models import utcnow

    async with Database(db_url) as db:
        await migrate.upgrade(db, "0004")
        now = utcnow()
        async with db.write_engine.begin() as conn:
            await _add_alice(conn, now)
            await conn.execute(
                text("INSERT INTO link_codes (code_hash, user_id, created_at, expires_at) VALUES ('h1', 'u1', :t, :e)"),
                {"t": now, "e": now + timedelta(minutes=10)},
            )
        await migrate.upgrade(db)
        async with db.write_engine.connect() as conn:
            assert (await conn.execute(text("SELECT count(*) FROM link_codes"))).scalar_one() == 0
            assert (await conn.execute(text("SELECT name FROM users"))).scalars().all() == ["alice"]
            assert await conn.run_sync(_diff) == []


async def test_results_stored_before_outcomes_get_theirs(db_url):
    """Tool results from before revision 0010 carry only ``is_error``: the upgrade gives each the outcome its
    text tells (a denial, a tool the session did not define, any other failure), and other messages none."""
    from sqlalchemy import text

    from server.store import migrate
    from server.store.db import Database
    from server.store.models import utcnow

    async with Database(db_url) as db:
        await migrate.upgrade(db, "0009")
        now = utcnow()
        async with db.write_engine.begin() as conn:
            await _add_alice(conn, now)
            await conn.execute(
                text(
                    "INSERT INTO sessions (id, owner_id, title, title_source, provider, model, defaults, tools,"
                    " tool_mode, busy_policy, disable_streaming, metadata, status, queue_paused,"
                    " usage_input_tokens, usage_output_tokens, last_seq, created_at, updated_at)"
                    " VALUES ('s1', 'u1', '', 'none', 'echo', 'echo', '{}', '[]', 'parallel', 'enqueue', false,"
                    " '{}', 'idle', false, 0, 0, 0, :t, :t)"
                ),
                {"t": now},
            )
            rows = [
                ("assistant", "", False),
                ("tool", "1024", False),
                ("tool", "The tool failed: ZeroDivisionError: division by zero", True),
                ("tool", "The user denied this tool call. Reason: not now", True),
                ("tool", "Unknown tool 'rm_rf': this session does not define it.", True),
                ("tool", "No server tool named 'ghost' is registered.", True),
            ]
            for i, (role, content, is_error) in enumerate(rows, 1):
                await conn.execute(
                    text(
                        "INSERT INTO messages (id, session_id, ordinal, role, content, attachments, status,"
                        " created_at, is_error) VALUES (:id, 's1', :n, :role, :content, '[]', 'complete', :t, :e)"
                    ),
                    {"id": f"m{i}", "n": i, "role": role, "content": content, "t": now, "e": is_error},
                )
        await migrate.upgrade(db)
        async with db.write_engine.connect() as conn:
            found = (await conn.execute(text("SELECT outcome FROM messages ORDER BY ordinal"))).scalars().all()
            assert found == [None, "ok", "error", "denied", "unknown-tool", "unknown-tool"]
            assert await conn.run_sync(_diff) == []


async def test_histories_become_chains_on_the_active_path(db_url):
    """Revision 0013: each message's parent is the one before it in its session, every message is on the active
    path, and the session reads the same as before through the new schema."""
    from sqlalchemy import text

    from server.store import migrate, repo
    from server.store.db import Database
    from server.store.models import utcnow

    async with Database(db_url) as db:
        await migrate.upgrade(db, "0009")
        now = utcnow()
        async with db.write_engine.begin() as conn:
            await conn.execute(
                text("INSERT INTO users (id, name, role, created_at, feed_seq) VALUES ('u1', 'alice', 'user', :t, 0)"),
                {"t": now},
            )
            for sid in ("s1", "s2"):
                await conn.execute(
                    text(
                        "INSERT INTO sessions (id, owner_id, title, title_source, provider, model, defaults, tools,"
                        " tool_mode, busy_policy, disable_streaming, metadata, status, queue_paused,"
                        " usage_input_tokens, usage_output_tokens, last_seq, created_at, updated_at)"
                        " VALUES (:id, 'u1', '', 'none', 'echo', 'echo', '{}', '[]', 'parallel', 'enqueue', false,"
                        " '{}', 'idle', false, 0, 0, 0, :t, :t)"
                    ),
                    {"id": sid, "t": now},
                )
            # Ordinals with gaps, inserted out of order, two sessions interleaved.
            for mid, sid, ordinal in [
                ("m3", "s1", 5),
                ("m1", "s1", 1),
                ("n1", "s2", 1),
                ("m2", "s1", 2),
                ("n2", "s2", 7),
            ]:
                await conn.execute(
                    text(
                        "INSERT INTO messages (id, session_id, ordinal, role, content, attachments, status, created_at,"
                        " is_error) VALUES (:id, :sid, :o, 'user', :c, '[]', 'complete', :t, false)"
                    ),
                    {"id": mid, "sid": sid, "o": ordinal, "c": f"text {mid}", "t": now},
                )
        await migrate.upgrade(db)
        async with db.write_engine.connect() as conn:
            rows = (await conn.execute(text("SELECT id, parent_id, active, left_seq FROM messages ORDER BY id"))).all()
            assert [(r[0], r[1], bool(r[2]), r[3]) for r in rows] == [
                ("m1", None, True, 0),
                ("m2", "m1", True, 0),
                ("m3", "m2", True, 0),
                ("n1", None, True, 0),
                ("n2", "n1", True, 0),
            ]
            assert await conn.run_sync(_diff) == []
        async with db.read() as s:
            assert [m.id for m in await repo.list_messages(s, "s1")] == ["m1", "m2", "m3"]
            versions = await repo.siblings(s, "s1", await repo.list_messages(s, "s1"))
            assert versions == {None: ["m1"], "m1": ["m2"], "m2": ["m3"]}
