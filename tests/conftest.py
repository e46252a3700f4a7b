"""Shared fixtures: real SQLite files, a fresh PostgreSQL database per test, real uvicorn servers on
real sockets (``server_factory``; how servers are started is in ``servers.py``). Services that are missing make
tests fail, never skip."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from servers import LiveServer, start_server
from testkit import PG_HOST, REDIS_URL, PrivateRedisCluster, fresh_pg_database  # noqa: F401  (re-exported for tests)

from server.settings import load_settings
from server.store import migrate
from server.store.db import Database


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_pg_database() as url:
        yield url


PROVIDER_KEYS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OLLAMA_HOST",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "CHATSYNC_DEFAULT_PROVIDER",
    "CHATSYNC_DEFAULT_MODEL",
)


@pytest.fixture(autouse=True, scope="session")
def _no_provider_keys():
    """Tests talk to no real provider: a key in the developer's shell must not change their sessions'
    default model (the offline echo model). Server processes started by tests inherit this environment."""
    saved = {k: os.environ.pop(k) for k in PROVIDER_KEYS if k in os.environ}
    yield
    os.environ.update(saved)


@pytest.fixture
def redis_url() -> str:
    """The test Redis with a key prefix of this test's own."""
    return f"{REDIS_URL}?prefix=test-{uuid.uuid4().hex[:12]}:"


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A 3-master Redis Cluster on 127.0.0.1, shared by the tests of a run (each uses its own key prefix)."""
    cluster = PrivateRedisCluster(str(tmp_path_factory.mktemp("redis-cluster")))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster_url(redis_cluster: PrivateRedisCluster) -> str:
    """``redis+cluster://`` seed nodes of the shared cluster, with a key prefix of this test's own."""
    return f"{redis_cluster.url}?prefix=test-{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'chatsync.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Each test using this runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'chatsync.db'}"
    else:
        async with fresh_pg_database() as url:
            yield url


@pytest.fixture
async def migrated_db(db_url: str) -> AsyncIterator[Database]:
    async with Database(db_url) as db:
        await migrate.upgrade(db)
        yield db


@pytest.fixture
async def server_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Starts servers; each keeps uploaded files under the test's own directory unless told otherwise (with
    PostgreSQL the default is the working directory, which every test's server would share)."""
    started: list[LiveServer] = []

    async def factory(
        database_url: str,
        users: tuple[str, ...] = ("alice", "bob"),
        tokens: dict[str, str] | None = None,
        ws: str | None = None,
        **overrides: Any,
    ) -> LiveServer:
        overrides.setdefault("files_url", os.environ.get("CHATSYNC_FILES_URL") or str(tmp_path / "files"))
        settings = load_settings(database_url=database_url, port=0, **overrides)
        live = await start_server(settings, users, tokens, ws)
        started.append(live)
        return live

    yield factory
    for live in started:
        if not live.task.done():
            await live.stop()


@pytest.fixture
async def live(server_factory: Callable[..., Any], sqlite_url: str) -> LiveServer:
    """A server on SQLite with users alice, bob and admin (an admin)."""
    return await server_factory(sqlite_url, users=("alice", "bob", "admin"))


# Fixtures that start servers, and fixtures that drop a database at teardown. pytest tears fixtures down in the
# reverse order it set them up, so a test (or fixture) that asks for a server fixture before a database fixture
# drops the database under live servers: their teardown then waits on a database that is gone.
SERVER_FIXTURES = frozenset({"server_factory"})
DATABASE_FIXTURES = frozenset({"pg_url", "db_url"})


def _setup_order(item: pytest.Item) -> list[str]:
    """The fixtures of ``item`` in the order pytest sets them up: each after the fixtures it asks for."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    order: list[str] = []

    def visit(name: str) -> None:
        defs = info.name2fixturedefs.get(name)
        if name in order or not defs:
            return
        for dep in defs[-1].argnames:
            visit(dep)
        if name not in order:
            order.append(name)

    for name in item.fixturenames:
        visit(name)
    return order


# Fixtures a ``fast`` test must not use (it is in-process: no server, no database server, no browser).
SLOW_FIXTURES = SERVER_FIXTURES | DATABASE_FIXTURES | {"redis_cluster", "cluster_factory", "served", "web_server"}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fails a test whose fixtures would drop its database before stopping its servers, and a ``fast`` test that
    starts a server or uses a database server."""
    order = _setup_order(item)
    if item.get_closest_marker("fast") is not None and SLOW_FIXTURES.intersection(order):
        slow = ", ".join(sorted(SLOW_FIXTURES.intersection(order)))
        pytest.fail(f"a test marked fast uses {slow}: move it to a module that is not marked fast", pytrace=False)
    for server in SERVER_FIXTURES.intersection(order):
        late = [db for db in DATABASE_FIXTURES.intersection(order) if order.index(db) > order.index(server)]
        if late:
            pytest.fail(
                f"{server} is set up before {', '.join(sorted(late))}, so the database would be dropped under live "
                f"servers at teardown: ask for the database fixture first (e.g. `async def x({late[0]}, {server})`)",
                pytrace=False,
            )
