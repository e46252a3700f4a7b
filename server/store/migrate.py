"""Apply Alembic migrations from inside the running event loop (server start, `chatsync db upgrade`, tests)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import Connection

from .db import Database

# The migrations ship inside the package (``server/store/migrations``), so an installed wheel finds them.
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url)
    return cfg


# Any constant: replicas starting together on one PostgreSQL database take turns migrating.
MIGRATION_LOCK_KEY = 0x63686174  # "chat"


async def upgrade(db: Database, revision: str = "head") -> None:
    """Bring the schema to ``revision`` using the database's own write engine.

    On PostgreSQL the upgrade runs under a transaction-level advisory lock, so replicas that start at the
    same moment do not both try to create the tables; the second finds the schema current.
    """
    cfg = alembic_config(db.url)

    def _run(connection: Connection) -> None:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, revision)

    async with db.write_engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        await conn.run_sync(_run)
