"""Alembic environment (async template).

Used two ways: by the `alembic` command (opens its own engine from CHATSYNC_DATABASE_URL), and by
``server.store.migrate`` which hands over an open connection in ``config.attributes["connection"]`` so the
server can upgrade inside its own event loop at start.
"""

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from server.store.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = os.environ.get("CHATSYNC_DATABASE_URL") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: set CHATSYNC_DATABASE_URL (or sqlalchemy.url in alembic.ini)")
    return url


def do_run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def run_async_migrations() -> None:
    engine = create_async_engine(_url())
    async with engine.connect() as connection:
        await connection.run_sync(do_run_migrations)
        await connection.commit()
    await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
elif config.attributes.get("connection") is not None:
    do_run_migrations(config.attributes["connection"])
else:
    asyncio.run(run_async_migrations())
