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
