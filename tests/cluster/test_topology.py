"""docker-compose.yml describes the deployment; no Docker engine runs here, so the file is checked, and
the same topology (PostgreSQL, Redis, two replicas, one entry address) runs as real processes."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import yaml
from testkit import collect

from chatsync_client import TrpcClient

ROOT = Path(__file__).resolve().parents[2]


def load_compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_file_describes_the_topology():
    compose = load_compose()
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "chatsync-1", "chatsync-2", "lb"}
    for name in ("chatsync-1", "chatsync-2"):
        replica = services[name]
        env = replica["environment"]
        assert (
            env["CHATSYNC_DATABASE_URL"].startswith("postgresql+asyncpg://")
            and "@postgres:" in env["CHATSYNC_DATABASE_URL"]
        )
        assert env["CHATSYNC_BUS_URL"].startswith("redis://redis:")
        assert env["CHATSYNC_HOST"] == "0.0.0.0"
        assert "readyz" in " ".join(replica["healthcheck"]["test"])
        assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert replica["depends_on"]["redis"]["condition"] == "service_healthy"
        assert replica["build"] == "."
    for name in ("postgres", "redis", "lb"):
        assert services[name]["healthcheck"]["test"]
    lb = services["lb"]
    assert lb["ports"] == ["8080:8080"]
    assert {"chatsync-1", "chatsync-2"} <= set(lb["depends_on"])
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "chatsync-1:8787" in nginx and "chatsync-2:8787" in nginx
    assert "proxy_set_header Upgrade $http_upgrade" in nginx  # WebSockets pass through
    # Every variable the replicas set is one chatsync reads.
    from server.settings import Settings

    known = {f"CHATSYNC_{name.upper()}" for name in Settings.model_fields}
    assert set(services["chatsync-1"]["environment"]) <= known
    assert (ROOT / "Dockerfile").is_file()


class RoundRobinProxy:
    """A small TCP load balancer standing in for nginx: each new connection goes to the next replica."""

    def __init__(self, ports: list[int]) -> None:
        self._next = itertools.cycle(ports)
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", next(self._next))
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


async def test_compose_topology_as_processes(cluster_factory):
    """Both replicas migrate the same fresh database at start (as compose starts them), then serve
    clients that all enter through one address."""
    env = load_compose()["services"]["chatsync-1"]["environment"]
    assert env["CHATSYNC_BUS_URL"].startswith("redis://")
    cluster = await cluster_factory(2, CHATSYNC_RUN_MIGRATIONS_ON_START="true", fresh_schema=True)
    proxy = RoundRobinProxy([r.port for r in cluster.replicas])
    port = await proxy.start()
    entry = f"http://127.0.0.1:{port}"
    clients = [TrpcClient(entry, cluster.tokens["alice"]) for _ in range(4)]
    try:
        for c in clients:
            await c.connect()
        s = await clients[0].mutation("session.create", {"queuePaused": True})
        subs = [await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"}) for c in clients]
        for i, c in enumerate(clients):
            await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": f"via lb {i}"})
        streams = [await collect(sub, 4) for sub in subs]
        assert all(stream == streams[0] for stream in streams)
        assert [e["message"]["content"] for _i, e in streams[0]] == [f"via lb {i}" for i in range(4)]
    finally:
        for c in clients:
            await c.close()
        await proxy.stop()
