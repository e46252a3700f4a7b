"""The services tier: the rules of ``server/services`` called directly, in-process, on a real SQLite database
(migrated once per run and copied for each test). No server, no sockets: a test here takes milliseconds, so
most rule changes are checked in seconds (``bash scripts/test.sh --fast``)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypeVar

import pytest

from server.app import open_services
from server.rpc.context import Services
from server.settings import load_settings
from server.store import migrate
from server.store.db import Database
from server.store.models import User

T = TypeVar("T")


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SQLite file with every migration applied, made once per run."""
    path = tmp_path_factory.mktemp("services-template") / "chatsync.db"

    async def make() -> None:
        async with Database(f"sqlite+aiosqlite:///{path}") as db:
            await migrate.upgrade(db)

    asyncio.run(make())
    return path


@pytest.fixture
async def services(migrated_template: Path, tmp_path: Path) -> AsyncIterator[Services]:
    """Every service as the server wires them (``open_services``), on a copy of the migrated database, with the
    in-process bus and the offline echo model answering at once."""
    path = tmp_path / "chatsync.db"
    shutil.copyfile(migrated_template, path)
    settings = load_settings(
        database_url=f"sqlite+aiosqlite:///{path}",
        bus_url="memory://",
        files_url=str(tmp_path / "files"),
        run_migrations_on_start=False,
        echo_delay=0,
        sweep_seconds=0.2,
        stream_flush_seconds=0.2,
    )
    async with open_services(settings) as built:
        yield built


@pytest.fixture
async def alice(services: Services) -> User:
    return (await services.auth.create_user("alice"))[0]


@pytest.fixture
async def bob(services: Services) -> User:
    return (await services.auth.create_user("bob"))[0]
