"""Shared fixtures: real SQLite files, a fresh PostgreSQL database per test, real uvicorn servers on
real sockets (``server_factory``; how servers are started is in ``servers.py``). Services that are missing make
tests fail, never skip."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import fixture_checks
import pytest
import testkit
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


@pytest.fixture(autouse=True, scope="session")
def _drop_templates() -> Iterator[None]:
    """The migrated template databases that servers' new databases are copied from go with the run."""
    yield
    testkit.drop_templates()


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


# The modules that take longest, slowest first (a full run on two workers, each 10 s or more): they are handed
# out before all others, so no worker is left running a long one while the other has nothing to do. xdist would
# otherwise hand out modules by their number of tests, and these have few (``scripts/test.sh`` turns that off).
SLOWEST_MODULES = (
    "tests/web/test_web_app.py",
    "tests/web/test_web_core.py",
    "tests/web/test_web_attachments.py",
    "tests/llm/test_played_histories.py",  # one test, 10,000 histories on every core
    "tests/test_static_checks.py",
    "tests/web/test_web_settings.py",
    "tests/engine/test_mcp_tools.py",
    "tests/pubsub/test_redis_cluster.py",
    "tests/files/test_upload_bounds.py",
    "tests/cluster/test_replicas.py",
    "tests/test_client_stores_js.py",
    "tests/web/test_web_organise.py",
    "tests/multidevice/test_devices.py",
    "tests/chatsync_client/tui/test_chat_tui.py",
    "tests/sync/test_admission.py",
    "tests/files/test_upload.py",
    "tests/multidevice/test_send_now.py",
    "tests/cluster/test_stream_across_replicas.py",
    "tests/files/test_attach_race.py",
    "tests/cluster/test_file_races.py",
    "tests/multidevice/test_presence_drafts_unread.py",
    "tests/cluster/test_faults.py",
    "tests/pubsub/test_redis_faults.py",
    "tests/multidevice/test_exactly_once.py",
    "tests/files/test_collect.py",
    "tests/web/test_web_versions.py",
    "tests/files/test_memory.py",
    "tests/sessions/test_branches.py",
    "tests/engine/test_streaming.py",
    "tests/test_conformance_js.py",
    "tests/rpc/test_outbox.py",
    "tests/multidevice/test_push.py",
    "tests/cluster/test_resume_across_replicas.py",
    "tests/sessions/test_purge.py",
    "tests/test_slow_clients.py",
    "tests/files/test_files_on_replicas.py",
    "tests/cli/test_cli_link.py",
    "tests/test_package.py",
    "tests/rpc/test_http_connections.py",
    "tests/rpc/test_nul_input.py",
    "tests/cluster/test_runs_across_replicas.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules of ``SLOWEST_MODULES`` first, in that order, then the others by their number of tests (most
    first); a module's tests keep their order."""
    rank = {module: i for i, module in enumerate(SLOWEST_MODULES)}
    tests = Counter(item.nodeid.split("::", 1)[0] for item in items)

    def key(item: pytest.Item) -> tuple[int, int, str]:
        module = item.nodeid.split("::", 1)[0]
        return (rank.get(module, len(rank)), -tests[module], module)

    items.sort(key=key)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fails a test whose fixtures would drop its database before stopping its servers, and a ``fast`` test that
    starts a server or uses a database server (``fixture_checks``)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return

    def asks_for(name: str) -> tuple[str, ...] | None:
        defs = info.name2fixturedefs.get(name)
        return tuple(defs[-1].argnames) if defs else None

    order = fixture_checks.setup_order(item.fixturenames, asks_for)
    why = fixture_checks.problem(order, fast=item.get_closest_marker("fast") is not None)
    if why is not None:
        pytest.fail(why, pytrace=False)
