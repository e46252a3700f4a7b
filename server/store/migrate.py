"""Apply Alembic migrations from inside the running event loop (server start, `chatsync db upgrade`, tests),
and tell where a database's schema stands against them (``/readyz``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
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


SchemaState = Literal["head", "behind", "ahead"]


@dataclass(frozen=True)
class Revisions:
    """Where a database's schema stands: its revisions against the head of the migrations this code ships.

    ``behind``: the database is older than this code (or empty) and must be upgraded before it serves.
    ``ahead``: it is at a revision this code does not know, written by newer code (a replica of the next
    version migrated it during a rolling update); migrations add before they remove, so this code still works.
    """

    current: tuple[str, ...]
    head: tuple[str, ...]
    state: SchemaState


@functools.cache
def _script() -> tuple[tuple[str, ...], frozenset[str]]:
    """The heads and every revision of the shipped migrations (read once: they do not change under a process)."""
    script = ScriptDirectory(str(MIGRATIONS_DIR))
    return tuple(sorted(script.get_heads())), frozenset(r.revision for r in script.walk_revisions())


async def revisions(db: Database) -> Revisions:
    """The database's revisions (one read of ``alembic_version``) against the shipped head."""
    async with db.read() as session:
        conn = await session.connection()
        current = tuple(sorted(await conn.run_sync(lambda c: MigrationContext.configure(c).get_current_heads())))
    head, known = _script()
    state: SchemaState
    if current == head:
        state = "head"
    elif current and not set(current) <= known:
        state = "ahead"
    else:
        state = "behind"
    return Revisions(current, head, state)
