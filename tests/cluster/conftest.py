"""Several real `chatsync serve` processes sharing one PostgreSQL database and one Redis."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field

import pytest
from servers import ServerProcess
from testkit import fresh_pg_database, schema_at_head

from server.services.auth import AuthService
from server.store.db import Database


@dataclass
class Cluster:
    database_url: str
    bus_url: str
    tokens: dict[str, str]
    replicas: list[ServerProcess] = field(default_factory=list)

    @property
    def urls(self) -> list[str]:
        return [r.url for r in self.replicas]


@pytest.fixture
async def cluster_factory(tmp_path, redis_url):
    clusters: list[Cluster] = []

    async def make(n: int = 2, bus_url: str | None = None, fresh_schema: bool = False, **env: str) -> Cluster:
        """``fresh_schema``: leave the database empty, so the replicas migrate it as they start."""
        cm = fresh_pg_database()
        db_url = await cm.__aenter__()
        cleanups.append(cm)
        tokens: dict[str, str] = {}
        if not fresh_schema:
            await schema_at_head(db_url)
            async with Database(db_url) as db:
                auth = AuthService(db)
                tokens = {name: (await auth.create_user(name))[1] for name in ("alice", "bob")}
        cluster = Cluster(db_url, bus_url or redis_url, tokens)
        for i in range(n):
            replica_env = {
                "CHATSYNC_BUS_URL": cluster.bus_url,
                "CHATSYNC_LOG_LEVEL": os.environ.get("CHATSYNC_TEST_REPLICA_LOG_LEVEL", "warning"),
                "CHATSYNC_RUN_MIGRATIONS_ON_START": "false",
                **env,
            }
            cluster.replicas.append(ServerProcess(tmp_path, database_url=db_url, name=f"replica-{i}", env=replica_env))
        for r in cluster.replicas:
            r.start()
        await asyncio.gather(*(r.ready() for r in cluster.replicas))
        if fresh_schema:
            async with Database(db_url) as db:
                auth = AuthService(db)
                cluster.tokens.update({name: (await auth.create_user(name))[1] for name in ("alice", "bob")})
        clusters.append(cluster)
        return cluster

    cleanups: list = []
    yield make
    for cluster in clusters:
        for r in cluster.replicas:
            r.kill()
    for cm in cleanups:
        await cm.__aexit__(None, None, None)
