"""Helpers shared by the test suites (imported as ``testkit``; the tests folder is on sys.path)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import io
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from chatsync_client import TrpcError

ROOT = Path(__file__).resolve().parent.parent
CLIENT_JS = ROOT / "client_js"
PG_HOST = os.environ.get("CHATSYNC_TEST_PG_HOST", "127.0.0.1")
PG_ADMIN_DSN = f"postgresql://postgres@{PG_HOST}:5432/postgres"
REDIS_URL = os.environ.get("CHATSYNC_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


async def pg_admin(sql: str) -> None:
    """Run one statement (``CREATE DATABASE``, ``DROP DATABASE``) on the PostgreSQL server's own database."""
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await admin.execute(sql)
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def fresh_pg_database() -> AsyncIterator[str]:
    """CREATE a uniquely named database, yield its SQLAlchemy URL, DROP it afterwards."""
    name = f"chatsync_test_{uuid.uuid4().hex[:12]}"
    await pg_admin(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+asyncpg://postgres@{PG_HOST}:5432/{name}"
    finally:
        await pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Migrating a new database is most of a test server's start (about a second: thirteen migrations). A server's new
# database therefore starts as a copy of one migrated once per test process (``schema_at_head``); the migrations
# themselves, from an empty database, are tested in tests/store/test_migrations.py, tests/cli and the replicas'.
_templates: dict[str, str] = {}  # "sqlite": the migrated file; "postgres": the migrated database's name


async def _migrated_template(kind: str, url: str) -> str:
    from server.store import migrate
    from server.store.db import Database

    if kind not in _templates:
        async with Database(url) as db:
            await migrate.upgrade(db)
        _templates[kind] = url
    return _templates[kind]


async def _copy_pg_template(name: str) -> bool:
    """Replace the empty database ``name`` by a copy of the migrated template; False if it is not empty or in use."""
    target = await asyncpg.connect(f"postgresql://postgres@{PG_HOST}:5432/{name}")
    try:
        if await target.fetchval(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
        ):
            return False
    finally:
        await target.close()
    if "postgres" not in _templates:
        template = f"chatsync_template_{uuid.uuid4().hex[:12]}"
        await pg_admin(f'CREATE DATABASE "{template}"')
        await _migrated_template("postgres", f"postgresql+asyncpg://postgres@{PG_HOST}:5432/{template}")
    template = _templates["postgres"].rsplit("/", 1)[1]
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        try:
            await admin.execute(f'DROP DATABASE "{name}"')  # not WITH (FORCE): a connection of the test's keeps it
        except asyncpg.ObjectInUseError:
            return False
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await admin.close()
    return True


async def schema_at_head(database_url: str) -> None:
    """Bring a server's database to the head of the migrations: a new SQLite file or an empty PostgreSQL database
    of ``fresh_pg_database`` becomes a copy of the migrated template; then ``migrate.upgrade`` runs as always
    (nothing left to do on a copy)."""
    from sqlalchemy.engine import make_url

    from server.store import migrate
    from server.store.db import Database

    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and not os.path.exists(url.database):
        if "sqlite" not in _templates:
            folder = tempfile.mkdtemp(prefix="chatsync-template-")
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            await _migrated_template("sqlite", f"sqlite+aiosqlite:///{os.path.join(folder, 'chatsync.db')}")
        shutil.copyfile(make_url(_templates["sqlite"]).database or "", url.database)
    elif url.get_backend_name() == "postgresql" and (url.database or "").startswith("chatsync_test_"):
        await _copy_pg_template(url.database or "")
    async with Database(database_url) as db:
        await migrate.upgrade(db)


def drop_templates() -> None:
    """Remove the migrated templates of this process (the SQLite one goes with its folder at exit)."""
    url = _templates.pop("postgres", None)
    if url is None:
        return

    asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)'))


async def collect(sub, until_seq: int, timeout: float = 20):
    """Tracked events from ``sub`` until seq ``until_seq`` (inclusive)."""
    got = []
    while not got or int(got[-1][0]) < until_seq:
        item = await sub.next(timeout)
        got.append(item)
    return got


async def make_changes(client, session_id: str, rng: random.Random, n: int) -> int:
    """``n`` random queue edits; returns how many took effect (each wrote exactly one event)."""
    done = 0
    for i in range(n):
        queue = await client.query("message.getQueuedMessages", {"sessionId": session_id})
        op = rng.choice(["enqueue", "enqueue", "update", "move", "remove"]) if queue else "enqueue"
        try:
            if op == "enqueue":
                await client.mutation("message.enqueueMessage", {"sessionId": session_id, "content": f"m{i}"})
            elif op == "update":
                target = rng.choice(queue)
                await client.mutation(
                    "message.updateQueuedMessage",
                    {"sessionId": session_id, "messageId": target["id"], "content": f"u{i}"},
                )
            elif op == "move":
                target = rng.choice(queue)
                await client.mutation(
                    "message.moveQueuedMessage",
                    {"sessionId": session_id, "messageId": target["id"], "toIndex": rng.randrange(len(queue))},
                )
            else:
                target = rng.choice(queue)
                await client.mutation(
                    "message.removeQueuedMessage", {"sessionId": session_id, "messageId": target["id"]}
                )
            done += 1
        except TrpcError as exc:
            # Another client removed the item first, or moved the queue under us: a legal race.
            assert exc.code in ("NOT_FOUND", "BAD_REQUEST"), exc
    return done


def replay_queue(events):
    """Rebuild the queue from events alone, as a UI does."""
    queue: list[dict] = []
    for _id, ev in events:
        t = ev["type"]
        if t == "queue-message-added":
            queue.append(ev["message"])
        elif t == "queue-message-removed":
            queue = [m for m in queue if m["id"] != ev["messageId"]]
        elif t == "queue-message-updated":
            queue = [ev["message"] if m["id"] == ev["message"]["id"] else m for m in queue]
        elif t == "queue-reordered":
            by_id = {m["id"]: m for m in queue}
            queue = [by_id[i] for i in ev["order"]]
        elif t == "queue-cleared":
            queue = []
    return queue


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """A redis-server of the test's own, so the test can kill it without touching anyone else's."""

    def __init__(
        self, port: int | None = None, args: tuple[str, ...] = (), cwd: str | None = None, cluster_bus: bool = False
    ) -> None:
        # A port chosen here may be taken by someone else (an outgoing connection's local port, say) between
        # free_port() and redis-server's bind: then the first start tries new ports. A port given, or one a
        # started node has used (a cluster node's nodes.conf records it), is kept.
        self._ports_fixed = port is not None
        self.port = port or free_port()
        self.bus_port = free_port() if cluster_bus else None
        self.args = args
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        attempts = 1 if self._ports_fixed else 5
        for _ in range(attempts):
            if self._start_once():
                self._ports_fixed = True
                return
            self.port = free_port()
            if self.bus_port is not None:
                self.bus_port = free_port()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def _start_once(self) -> bool:
        """Start redis-server; False if it exited (its port was taken) or did not listen within 10 s."""
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        bus = ("--cluster-port", str(self.bus_port)) if self.bus_port is not None else ()
        base = (binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
        self.proc = subprocess.Popen(
            [*base, *bus, *self.args],
            cwd=self.cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                # A PING, not only a connect: what listens on the port must be this redis-server.
                with socket.create_connection(("127.0.0.1", self.port), 0.2) as conn:
                    conn.settimeout(2)
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        self.kill()
        return False

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def freeze(self) -> None:
        """Stop the server (SIGSTOP): it keeps its connections open and answers nothing, as a Redis that hangs
        or is cut off by the network does. ``kill()`` works on a frozen server too."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


class PrivateRedisCluster:
    """A Redis Cluster of ``masters`` redis-server processes of the test's own (no replicas), each in its own
    folder under ``root``. A node can be killed and started again: it rejoins with its slots (nodes.conf)."""

    def __init__(self, root: str, masters: int = 3) -> None:
        self.nodes: list[PrivateRedis] = []
        for i in range(masters):
            folder = os.path.join(root, f"node-{i}")
            os.makedirs(folder, exist_ok=True)
            # The cluster bus port is given explicitly: the default (port + 10000) need not be free.
            self.nodes.append(
                PrivateRedis(
                    args=(
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "1000",
                        "--cluster-require-full-coverage",
                        "no",
                    ),
                    cwd=folder,
                    cluster_bus=True,
                )
            )

    def start(self) -> None:
        """Start the nodes and form the cluster; if that fails, the nodes started so far are killed."""
        try:
            for node in self.nodes:
                node.start()
            cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
            subprocess.run(
                [cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes), "--cluster-yes"],
                check=True,
                capture_output=True,
                timeout=60,
            )
            self.wait_ok()
        except BaseException:
            self.stop()
            raise

    def wait_ok(self, timeout: float = 30) -> None:
        """Until every node reports the cluster healthy (all slots served, every node known)."""
        cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            infos = [
                subprocess.run([cli, "-p", str(n.port), "cluster", "info"], capture_output=True, text=True).stdout
                for n in self.nodes
            ]
            if all("cluster_state:ok" in i and f"cluster_known_nodes:{len(self.nodes)}" in i for i in infos):
                return
            time.sleep(0.1)
        raise RuntimeError("redis cluster did not become ok")

    def owner_of(self, key: str) -> PrivateRedis:
        """The node that serves a key's (or shard channel's) slot."""
        import redis
        from redis.crc import key_slot

        slot = key_slot(key.encode())
        with redis.Redis(port=self.nodes[0].port) as r:
            for start, end, master, *_ in r.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return next(n for n in self.nodes if n.port == master[1])
        raise LookupError(f"no node serves slot {slot}")

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)


class HoldingProxy:
    """A TCP proxy in front of a server that can stop passing the server's bytes back (``hold``) and cut
    every connection (``cut``): a client whose request reached the server but whose reply never arrived."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.hold = False
        self._server: asyncio.base_events.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def start(self) -> HoldingProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, holdable: bool) -> None:
            try:
                while data := await src.read(65536):
                    if holdable and self.hold:
                        continue  # swallowed: the client never sees it
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, True))

    def cut(self) -> None:
        for w in self._writers:
            w.transport.abort()
        self._writers.clear()

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def open_sockets_to(ports: set[int]) -> list[tuple[int, str]]:
    """This process's TCP sockets (IPv4) whose remote port is one of ``ports``, as (port, state) (Linux)."""
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                ours.add(link[len("socket:[") : -1])
    states = {"01": "ESTABLISHED", "02": "SYN_SENT", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "08": "CLOSE_WAIT"}
    found = []
    with open("/proc/self/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            port = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[9] in ours and port in ports:
                found.append((port, states.get(fields[3], fields[3])))
    return found


def process_memory(pid: int) -> dict[str, int]:
    """``VmRSS`` (resident now) and ``VmHWM`` (peak resident) of process ``pid``, in bytes (Linux)."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) * 1024
    return values


@contextlib.contextmanager
def json_log(logger_name: str) -> Iterator[tuple[logging.Logger, Callable[[], list[dict[str, Any]]]]]:
    """Records of ``logger_name`` (DEBUG and up) in the JSON log format: ``(logger, lines)``, where ``lines()``
    parses what was written so far."""
    from server.logformat import JsonFormatter

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield logger, lambda: [json.loads(line) for line in out.getvalue().splitlines()]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def need(tool: str, why: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"`{tool}` is not on PATH: {why} (bash scripts/setup.sh --with-node installs what is missing)")
    return path


def ensure_node_modules(*required: Path) -> None:
    """``npm ci`` in client_js when ``@trpc/client`` (or any of ``required``) is missing."""
    wanted = [CLIENT_JS / "node_modules" / "@trpc" / "client" / "package.json", *required]
    if all(p.exists() for p in wanted):
        return
    done = subprocess.run(
        [need("npm", "client_js needs npm"), "ci", "--no-audit", "--no-fund"],
        cwd=CLIENT_JS,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"npm ci failed in client_js ({done.returncode}):\n{done.stdout}\n{done.stderr}")
