"""Several real `chatsync serve` processes sharing one PostgreSQL database and one Redis."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from testkit import free_port, fresh_pg_database

from server.services.auth import AuthService
from server.store import migrate
from server.store.db import Database


@dataclass
class Replica:
    port: int
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "server.cli", "serve"], env=self.env, stdout=log, stderr=subprocess.STDOUT
            )

    async def ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient() as http:
            while time.monotonic() < deadline:
                assert self.proc is not None and self.proc.poll() is None, self.log_path.read_text()[-3000:]
                try:
                    if (await http.get(self.url + "/readyz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise TimeoutError(f"replica on {self.port} not ready")

    async def terminate(self) -> None:
        """SIGTERM: the graceful path (reconnect notices, drain)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            await asyncio.get_running_loop().run_in_executor(None, self.proc.wait, 30)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@dataclass
class Cluster:
    database_url: str
    bus_url: str
    tokens: dict[str, str]
    replicas: list[Replica] = field(default_factory=list)

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
            async with Database(db_url) as db:
                await migrate.upgrade(db)
                auth = AuthService(db)
                tokens = {name: (await auth.create_user(name))[1] for name in ("alice", "bob")}
        cluster = Cluster(db_url, bus_url or redis_url, tokens)
        for i in range(n):
            port = free_port()
            replica_env = {
                **os.environ,
                "CHATSYNC_DATABASE_URL": db_url,
                "CHATSYNC_BUS_URL": cluster.bus_url,
                "CHATSYNC_PORT": str(port),
                "CHATSYNC_LOG_LEVEL": os.environ.get("CHATSYNC_TEST_REPLICA_LOG_LEVEL", "warning"),
                "CHATSYNC_RUN_MIGRATIONS_ON_START": "false",
                **env,
            }
            cluster.replicas.append(Replica(port, replica_env, tmp_path / f"replica-{i}.log"))
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
