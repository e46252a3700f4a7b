"""Reconnect storm: every client of a server loses its connection at once and resumes with its lastEventId.

    .venv/bin/python bench/reconnect_storm.py [--clients 10000] [--scenario restart|cut] [--replicas 1|2]
        [--changing 100] [--rate 100] [--generators 3] [--runs 1]

N clients (raw WebSockets, each with a device token of its own) on N/2 sessions, spread over ``--generators``
load-generator processes; ``--changing`` of the sessions keep changing (``message.enqueueMessage`` at
``--rate`` per second in all, round robin, with a ``clearQueue`` now and then to stay under the queue limit).
Every client subscribes to ``session.events`` from ``lastEventId`` 0 and tracks the last seq it got.

Then the storm:

* ``restart``: SIGTERM to the server(s) (chatsync's graceful shutdown: a ``reconnect`` notification, close
  4001), then the same command again on the same port and database. Clients retry refused connections
  every 50-100 ms.
* ``cut``: every load generator aborts all its sockets at the same moment (RST, as a dropped NAT or load
  balancer would); the server stays up.

Every client reconnects at once and resumes with ``lastEventId`` = its last seq. Reported: error frames and
close codes the clients got (``4001`` is the restart's own; anything else counts), events lost or repeated at
any client (each client's seqs must run 1, 2, 3, ... up to its session's ``last_seq`` in the database once
the changes stop), time from the storm to the last client's ``started``, and p50/p99 of each client's
resume latency (its disconnect to its new subscription's ``started``). ``--replicas 2`` runs two servers on
PostgreSQL + Redis (clients split between them; both restart).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack, suppress
from typing import Any

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import (
    ROOT,
    cpu_seconds,
    cpu_seconds_with_reaped,
    free_port,
    machine_ticks,
    pct,
    pg_database,
    steal_share,
    summary,
    wait_ready,
)
from bench.wsclient import open_ws

# A browser waits for a WebSocket's upgrade as long as TCP lets it; so does this client, nearly (a shorter
# timeout would make the storm worse: the abandoned connection still costs the server its handshake).
HANDSHAKE_TIMEOUT = 600

# --- load generator (a process of its own) --------------------------------------------------------------


class Client:
    __slots__ = (
        "dropped_at",
        "dups",
        "gaps",
        "gen",
        "last_seq",
        "resumed",
        "sid",
        "started",
        "stopping",
        "token",
        "url",
        "ws",
    )

    def __init__(self, gen: Gen, url: str, token: str, sid: str) -> None:
        self.gen, self.url, self.token, self.sid = gen, url, token, sid
        self.last_seq = 0
        self.dups = self.gaps = 0
        self.ws: Any = None
        self.started = asyncio.Event()
        self.dropped_at: float | None = None
        self.resumed = True
        self.stopping = False

    def on_text(self, raw: bytes) -> None:
        gen = self.gen
        if raw.startswith(b'{"id":null'):
            return  # the server's reconnect notification: its close follows
        msg = orjson.loads(raw)
        if "error" in msg:
            err = msg["error"]
            code = (err.get("data") or {}).get("code", str(err.get("code")))
            gen.errors[code] = gen.errors.get(code, 0) + 1
            if self.ws is not None and self.ws.transport is not None:
                self.ws.transport.abort()  # as a client would: reconnect and resume
            return
        result = msg.get("result") or {}
        kind = result.get("type")
        if kind == "started":
            if not self.resumed and self.dropped_at is not None:
                now = time.time()
                gen.resumes.append(now - self.dropped_at)
                gen.last_resume = max(gen.last_resume, now)
                self.resumed = True
            self.started.set()
            return
        if kind != "data":
            return
        data = result.get("data")
        if not isinstance(data, dict) or "id" not in data:
            key = "untracked:" + str((data or {}).get("type"))
            gen.errors[key] = gen.errors.get(key, 0) + 1
            return
        seq = int(data["id"])
        if seq <= self.last_seq:
            self.dups += 1
            return
        if seq != self.last_seq + 1:
            self.gaps += seq - self.last_seq - 1
        self.last_seq = seq

    async def connect(self) -> None:
        """Connect and subscribe from ``last_seq``, retrying refused connections; returns once sent."""
        while not self.stopping:
            try:
                self.ws = await asyncio.wait_for(open_ws(self.url, self.on_text), HANDSHAKE_TIMEOUT)
            except (OSError, ConnectionError, TimeoutError):
                self.gen.refused += 1
                await asyncio.sleep(0.05 + random.random() * 0.05)
                continue
            break
        self.ws.send_text(orjson.dumps({"method": "connectionParams", "data": {"token": self.token}}).decode())
        self.ws.send_text(
            orjson.dumps(
                {
                    "id": 1,
                    "method": "subscription",
                    "params": {
                        "path": "session.events",
                        "input": {"sessionId": self.sid, "lastEventId": str(self.last_seq)},
                    },
                }
            ).decode()
        )

    async def live(self) -> None:
        """Stay connected: whenever the socket closes, reconnect and resume."""
        while not self.stopping:
            ws = self.ws
            code = await ws.closed
            if self.stopping:
                return
            if self.dropped_at is None or self.resumed:
                self.dropped_at = time.time()
                self.resumed = False
            if code is not None and code not in (1006, 1005):
                self.gen.closes[code] = self.gen.closes.get(code, 0) + 1
            self.started.clear()
            await self.connect()


class Gen:
    def __init__(self) -> None:
        self.errors: dict[str, int] = {}
        self.closes: dict[int, int] = {}
        self.resumes: list[float] = []
        self.last_resume = 0.0
        self.refused = 0
        self.clients: list[Client] = []

    async def main(self, conn: Any, jobs: list[tuple[str, str, str]]) -> None:
        loop = asyncio.get_running_loop()
        self.clients = [Client(self, url, token, sid) for url, token, sid in jobs]
        # Connect the clients at most 200 at a time (the initial connection is not what is measured).
        sem = asyncio.Semaphore(200)

        async def first(c: Client) -> None:
            async with sem:
                await c.connect()
                await asyncio.wait_for(c.started.wait(), 120)

        await asyncio.gather(*(first(c) for c in self.clients))
        tasks = [asyncio.create_task(c.live()) for c in self.clients]
        conn.send(("ready", len(self.clients)))
        while True:
            cmd, arg = await loop.run_in_executor(None, conn.recv)
            if cmd == "reset":
                self.errors.clear()
                self.closes.clear()
                self.resumes.clear()
                self.last_resume = 0.0
                self.refused = 0
                for c in self.clients:
                    c.dups = c.gaps = 0
                conn.send(("ok", None))
            elif cmd == "cut":
                at = arg
                await asyncio.sleep(max(0.0, at - time.time()))
                for c in self.clients:
                    c.ws.transport.abort()
                conn.send(("ok", None))
            elif cmd == "resumed":  # how many have resumed since their last drop
                conn.send(("ok", (sum(1 for c in self.clients if c.resumed and c.started.is_set()), self.last_resume)))
            elif cmd == "settle":  # arg: {sid: last_seq}; wait until every client has it
                final: dict[str, int] = arg
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    if all(c.last_seq >= final[c.sid] for c in self.clients):
                        break
                    await asyncio.sleep(0.2)
                await asyncio.sleep(0.5)  # a late duplicate would arrive now
                short = sum(1 for c in self.clients if c.last_seq < final[c.sid])
                missing = sum(max(0, final[c.sid] - c.last_seq) for c in self.clients)
                conn.send(
                    (
                        "ok",
                        {
                            "errors": self.errors,
                            "closes": self.closes,
                            "resumes": self.resumes,
                            "last_resume": self.last_resume,
                            "refused": self.refused,
                            "dups": sum(c.dups for c in self.clients),
                            "gaps": sum(c.gaps for c in self.clients),
                            "short_clients": short,
                            "missing": missing,
                            "delivered": sum(c.last_seq for c in self.clients),
                        },
                    )
                )
            elif cmd == "stop":
                for c in self.clients:
                    c.stopping = True
                    if c.ws is not None and c.ws.transport is not None:
                        c.ws.transport.abort()
                for t in tasks:
                    t.cancel()
                conn.send(("ok", None))
                return


def gen_process(conn: Any, jobs: list[tuple[str, str, str]]) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with suppress(ImportError):
        import uvloop

        uvloop.install()
    asyncio.run(Gen().main(conn, jobs))


# --- servers ------------------------------------------------------------------------------------------


class Servers:
    def __init__(self, env: dict[str, str], ports: list[int], logdir: str) -> None:
        self.env, self.ports, self.logdir = env, ports, logdir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.starts = 0

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}" for p in self.ports]

    def start(self) -> None:
        self.procs = []
        for port in self.ports:
            log = open(os.path.join(self.logdir, f"server-{port}.log"), "ab")
            env = {**self.env, "CHATSYNC_PORT": str(port)}
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "server.cli", "serve"], env=env, cwd=ROOT, stdout=log, stderr=log
                )
            )
        self.starts += 1

    def wait_ready(self, timeout: float = 60) -> None:
        for url, proc in zip(self.urls(), self.procs):
            wait_ready(url, proc, timeout)

    def terminate(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            proc.wait(60)

    def log_problems(self) -> int:
        n = 0
        for name in os.listdir(self.logdir):
            with open(os.path.join(self.logdir, name), "rb") as f:
                n += sum(1 for line in f if b"Traceback" in line or b" ERROR " in line or b"ERROR:" in line)
        return n


async def prepare(db_url: str, clients: int, sessions: int) -> tuple[list[str], list[str]]:
    """A user, ``clients`` device tokens and ``sessions`` sessions, written straight into the database."""
    from server.services.auth import hash_token, new_token
    from server.store import migrate
    from server.store.db import Database
    from server.store.models import ApiToken, ChatSession, User, utcnow

    tokens = [new_token() for _ in range(clients)]
    sids = [str(uuid.uuid4()) for _ in range(sessions)]
    async with Database(db_url) as db:
        await migrate.upgrade(db)
        user_id = str(uuid.uuid4())
        async with db.write() as s:
            s.add(User(id=user_id, name="storm", role="user", feed_seq=0))
        for i in range(0, clients, 2000):
            async with db.write() as s:
                s.add_all(
                    ApiToken(id=str(uuid.uuid4()), user_id=user_id, token_hash=hash_token(t), name=f"client {j}")
                    for j, t in enumerate(tokens[i : i + 2000], i)
                )
        now = utcnow()
        for i in range(0, sessions, 2000):
            async with db.write() as s:
                s.add_all(
                    ChatSession(id=sid, owner_id=user_id, title="", created_at=now, updated_at=now, queue_paused=True)
                    for sid in sids[i : i + 2000]
                )
    return tokens, sids


async def last_seqs(db_url: str) -> dict[str, int]:
    from sqlalchemy import select

    from server.store.db import Database
    from server.store.models import ChatSession

    async with Database(db_url) as db, db.read() as s:
        rows = (await s.execute(select(ChatSession.id, ChatSession.last_seq))).all()
        return dict(rows)


async def changer(
    urls: list[str], token: str, sids: list[str], rate: float, stop: asyncio.Event, counter: list[int]
) -> int:
    """``message.enqueueMessage`` round robin over ``sids`` at ``rate``/s (failures while a server restarts are
    retried with a new connection); a ``clearQueue`` every 50 messages of a session."""
    from chatsync_client import TrpcClient

    sent = 0
    counts = dict.fromkeys(sids, 0)
    i = 0
    client: Any = None
    next_at = time.monotonic()
    while not stop.is_set():
        sid = sids[i % len(sids)]
        try:
            if client is None:
                client = TrpcClient(urls[i % len(urls)], token)
                await client.__aenter__()
            if counts[sid] and counts[sid] % 50 == 0:
                await asyncio.wait_for(client.mutation("message.clearQueue", {"sessionId": sid}), 10)
            await asyncio.wait_for(client.mutation("message.enqueueMessage", {"sessionId": sid, "content": "x"}), 10)
            counts[sid] += 1
            sent += 1
            counter[0] = sent
            i += 1
        except Exception:
            if client is not None:
                with suppress(Exception):
                    await client.__aexit__(None, None, None)
            client = None
            await asyncio.sleep(0.2)
            continue
        next_at += 1 / rate
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if next_at < time.monotonic() - 1:
            next_at = time.monotonic()  # fell behind (a restart): do not burst to catch up
    if client is not None:
        with suppress(Exception):
            await client.__aexit__(None, None, None)
    return sent


def infra_cpu() -> dict[str, float]:
    """CPU seconds so far of this machine's PostgreSQL and Redis processes, with their exited children (every
    one of them: the numbers include whatever else uses them meanwhile)."""
    out = {"postgres": 0.0, "redis": 0.0}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            if comm.startswith("postgres"):
                out["postgres"] += cpu_seconds_with_reaped(int(pid))
            elif comm.startswith("redis-server"):
                out["redis"] += cpu_seconds_with_reaped(int(pid))
        except OSError:
            continue
    return out


def ask(conns: list[Any], cmd: str, arg: Any = None) -> list[Any]:
    for c in conns:
        c.send((cmd, arg))
    return [c.recv()[1] for c in conns]


async def one_run(args: argparse.Namespace, db_url: str, bus_url: str, tmp: str) -> dict[str, Any]:
    n = args.clients
    sessions = max(args.changing, n // 2)
    tokens, sids = await prepare(db_url, n + 1, sessions)
    changer_token = tokens.pop()
    ports = [free_port() for _ in range(args.replicas)]
    env = {
        **os.environ,
        "CHATSYNC_DATABASE_URL": db_url,
        "CHATSYNC_BUS_URL": bus_url,
        "CHATSYNC_LOG_LEVEL": "warning",
        "CHATSYNC_RATE_LIMIT_PER_SECOND": "0",
        "CHATSYNC_MAX_CONNECTIONS": str(n + 1000),
        "CHATSYNC_RUN_MIGRATIONS_ON_START": "false",
    }
    servers = Servers(env, ports, tmp)
    servers.start()
    servers.wait_ready()
    urls = servers.urls()
    ws_urls = [u.replace("http", "ws") + "/trpc?connectionParams=1" for u in urls]
    jobs = [(ws_urls[i % len(ws_urls)], tokens[i], sids[i % sessions]) for i in range(n)]
    ctx = mp.get_context("spawn")
    conns, procs = [], []
    for g in range(args.generators):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=gen_process, args=(child, jobs[g :: args.generators]), daemon=True)
        p.start()
        conns.append(parent)
        procs.append(p)
    t0 = time.monotonic()
    ready = [c.recv() for c in conns]
    print(f"  {sum(r[1] for r in ready)} clients subscribed in {time.monotonic() - t0:.1f} s", flush=True)

    stop = asyncio.Event()
    changing = sids[: args.changing]
    counter = [0]
    change_task = asyncio.create_task(changer(urls, changer_token, changing, args.rate, stop, counter))
    await asyncio.sleep(args.warmup)
    # Steady state first: what an enqueue costs the servers, PostgreSQL and Redis with every client connected.
    steady0 = (counter[0], sum(cpu_seconds(p.pid) for p in servers.procs), infra_cpu())
    await asyncio.sleep(args.steady)
    steady1 = (counter[0], sum(cpu_seconds(p.pid) for p in servers.procs), infra_cpu())
    steady_n = max(1, steady1[0] - steady0[0])
    steady = {
        "enqueues": steady1[0] - steady0[0],
        "server_ms": (steady1[1] - steady0[1]) / steady_n * 1000,
        "postgres_ms": (steady1[2]["postgres"] - steady0[2]["postgres"]) / steady_n * 1000,
        "redis_ms": (steady1[2]["redis"] - steady0[2]["redis"]) / steady_n * 1000,
    }
    ask(conns, "reset")
    ticks0 = machine_ticks()
    load0 = os.getloadavg()[0]
    cpu0 = sum(cpu_seconds(p.pid) for p in servers.procs)
    infra0 = infra_cpu()
    storm_at = time.time() + 0.3
    restart_s = None
    if args.scenario == "cut":
        await asyncio.to_thread(ask, conns, "cut", storm_at)
    else:
        await asyncio.sleep(storm_at - time.time())
        cpu0 = 0.0  # the new processes' CPU is counted from their start
        await asyncio.to_thread(servers.terminate)
        servers.start()
        await asyncio.to_thread(servers.wait_ready)
        restart_s = time.time() - storm_at
    deadline = time.monotonic() + args.timeout
    while True:
        states = await asyncio.to_thread(ask, conns, "resumed")
        done = sum(s[0] for s in states)
        if done == n or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.25)
    all_resumed = max(s[1] for s in states) - storm_at if done == n else float("nan")
    server_cpu = sum(cpu_seconds(p.pid) for p in servers.procs) - cpu0
    infra1 = infra_cpu()
    await asyncio.sleep(args.after)
    stop.set()
    sent = await change_task
    await asyncio.sleep(0.5)
    final = await last_seqs(db_url)
    reports = await asyncio.to_thread(ask, conns, "settle", final)
    steal = steal_share(ticks0, machine_ticks())
    await asyncio.to_thread(ask, conns, "stop")
    for p in procs:
        p.join(10)
    servers.terminate()
    errors: dict[str, int] = {}
    closes: dict[int, int] = {}
    resumes: list[float] = []
    for r in reports:
        for k, v in r["errors"].items():
            errors[k] = errors.get(k, 0) + v
        for k, v in r["closes"].items():
            closes[k] = closes.get(k, 0) + v
        resumes += r["resumes"]
    return {
        "resumed": done,
        "all_resumed_s": all_resumed,
        "restart_s": restart_s,
        "p50_ms": pct(resumes, 50) * 1000,
        "p99_ms": pct(resumes, 99) * 1000,
        "errors": errors,
        "closes": closes,
        "unexpected_closes": sum(v for k, v in closes.items() if k != 4001),
        "refused": sum(r["refused"] for r in reports),
        "dups": sum(r["dups"] for r in reports),
        "gaps": sum(r["gaps"] for r in reports),
        "short_clients": sum(r["short_clients"] for r in reports),
        "missing": sum(r["missing"] for r in reports),
        "sent": sent,
        "server_cpu_s": server_cpu,
        "postgres_cpu_s": infra1["postgres"] - infra0["postgres"],
        "redis_cpu_s": infra1["redis"] - infra0["redis"],
        "server_log_problems": servers.log_problems(),
        "steal": steal,
        "load": load0,
        "steady": steady,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=10_000)
    ap.add_argument("--scenario", choices=("restart", "cut"), default="restart")
    ap.add_argument("--replicas", type=int, choices=(1, 2), default=1)
    ap.add_argument("--changing", type=int, default=100, help="sessions that keep changing")
    ap.add_argument("--rate", type=float, default=100.0, help="enqueues per second over the changing sessions")
    ap.add_argument("--generators", type=int, default=3, help="load-generator processes")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of changes before the storm")
    ap.add_argument("--steady", type=float, default=10.0, help="seconds of steady changes measured before the storm")
    ap.add_argument("--after", type=float, default=3.0, help="seconds of changes after every client resumed")
    ap.add_argument("--timeout", type=float, default=600.0, help="give up waiting for resumes after this")
    args = ap.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    where = "1 process, SQLite, memory bus" if args.replicas == 1 else "2 replicas, PostgreSQL + Redis"
    print(
        f"reconnect storm ({args.scenario}): {args.clients} clients on {max(args.changing, args.clients // 2)} "
        f"sessions, {args.changing} changing at {args.rate:g} enqueues/s; {where}; "
        f"{args.generators} load generators; {args.runs} run(s)",
        flush=True,
    )
    results = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            if args.replicas == 1:
                db_url, bus_url = f"sqlite+aiosqlite:///{tmp}/storm.db", "memory://"
            else:
                db_url = stack.enter_context(pg_database())
                bus_url = f"redis://127.0.0.1:6379/0?prefix=storm-{uuid.uuid4().hex[:8]}:"
            r = asyncio.run(one_run(args, db_url, bus_url, tmp))
        results.append(r)
        st = r["steady"]
        print(
            f"  steady ({st['enqueues']} enqueues, 2 subscribers each): CPU per enqueue: "
            f"servers {st['server_ms']:.2f} ms, "
            f"PostgreSQL {st['postgres_ms']:.2f} ms, Redis {st['redis_ms']:.3f} ms",
            flush=True,
        )
        print(
            f"  run: resumed {r['resumed']}/{args.clients}, all resumed after {r['all_resumed_s']:.1f} s"
            + (f" (servers back after {r['restart_s']:.1f} s)" if r["restart_s"] is not None else "")
            + f", resume p50 {r['p50_ms']:.0f} ms p99 {r['p99_ms']:.0f} ms; errors {r['errors'] or 0}, "
            f"closes {r['closes'] or {}}, lost {r['gaps'] + r['missing']} (clients short {r['short_clients']}), "
            f"duplicated {r['dups']}; refused connects {r['refused']}; {r['sent']} enqueues; "
            f"server CPU {r['server_cpu_s']:.1f} s (PostgreSQL {r['postgres_cpu_s']:.1f} s, Redis "
            f"{r['redis_cpu_s']:.1f} s); server log errors {r['server_log_problems']}; "
            f"load avg {r['load']:.1f}, steal {r['steal'] * 100:.1f}%",
            flush=True,
        )
    print(f"time until all resumed s  {summary([r['all_resumed_s'] for r in results])}")
    print(f"resume p50 ms             {summary([r['p50_ms'] for r in results])}")
    print(f"resume p99 ms             {summary([r['p99_ms'] for r in results])}")
    print(f"errors                    {sum(sum(r['errors'].values()) for r in results)}")
    print(f"unexpected closes         {sum(r['unexpected_closes'] for r in results)}")
    lost = sum(r["gaps"] + r["missing"] for r in results)
    print(f"lost / duplicated         {lost} / {sum(r['dups'] for r in results)}")


if __name__ == "__main__":
    main()
