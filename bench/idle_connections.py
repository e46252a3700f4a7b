"""Memory per idle, subscribed WebSocket connection on one server process.

    .venv/bin/python bench/idle_connections.py [--connections 10000] [--runs 3] [--sessions 100]

Opens N connections (authenticated with connectionParams, each subscribed to ``session.events`` of one of
``--sessions`` sessions), waits until all are started, and reads the server's RSS from /proc before and
after. Prints KiB per connection (median ± half-range over runs). The server's file-descriptor limit must
exceed N (`ulimit -n`).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import run_server, summary  # noqa: E402
from bench.wsclient import open_ws  # noqa: E402
from server.client import TrpcClient  # noqa: E402


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def one_run(n: int, sessions: int) -> tuple[float, float, int]:
    with run_server() as srv:
        async with TrpcClient(srv.url, srv.token) as c:
            sids = [(await c.mutation("session.create", {"queuePaused": True}))["id"] for _ in range(sessions)]
        await asyncio.sleep(0.5)
        before = rss_kib(srv.pid)
        started = 0
        all_started = asyncio.Event()
        conns = []

        def on_text(raw: bytes) -> None:
            nonlocal started
            if b'"started"' in raw:
                started += 1
                if started == n:
                    all_started.set()

        url = srv.url.replace("http", "ws") + "/trpc?connectionParams=1"
        t0 = time.perf_counter()
        for i in range(n):
            # At most 200 subscriptions in flight: this measures memory, not a reconnect storm.
            while i - started > 200:
                await asyncio.sleep(0.005)
            ws = await open_ws(url, on_text)
            ws.send_text(orjson.dumps({"method": "connectionParams", "data": {"token": srv.token}}).decode())
            ws.send_text(orjson.dumps({"id": 1, "method": "subscription", "params": {
                "path": "session.events", "input": {"sessionId": sids[i % sessions]}}}).decode())
            conns.append(ws)
        deadline = time.perf_counter() + 300
        while not all_started.is_set():
            if time.perf_counter() > deadline:
                raise TimeoutError(f"only {started} of {n} subscriptions started")
            await asyncio.sleep(0.2)
        setup = time.perf_counter() - t0
        await asyncio.sleep(2)  # let the server settle (GC, buffers)
        after = rss_kib(srv.pid)
        for ws in conns:
            ws.transport.close()
        return (after - before) / n, setup, after


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"idle subscribed connections: {args.connections} on one process, {args.sessions} sessions, {args.runs} runs")
    per, setups, totals = [], [], []
    for _ in range(args.runs):
        kib, setup, total = asyncio.run(one_run(args.connections, args.sessions))
        per.append(kib)
        setups.append(setup)
        totals.append(total / 1024)
        print(f"  run: {kib:.1f} KiB/connection, server RSS {total / 1024:.0f} MiB, setup {setup:.1f} s")
    print(f"KiB per idle connection  {summary(per)}")
    print(f"server RSS MiB           {summary(totals)}")
    print(f"connect+subscribe time s {summary(setups)}")


if __name__ == "__main__":
    main()
