"""Round trip of `message.enqueueMessage` over one WebSocket (commit + event log + publish + reply).

    .venv/bin/python bench/roundtrip.py [--n 2000] [--runs 3]

Prints p50/p99 in milliseconds per backend (SQLite, PostgreSQL) and the server process's CPU per call (not
PostgreSQL's), median and spread over runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import cpu_seconds, pct, pg_database, run_server, summary
from chatsync_client import TrpcClient


async def one_run(url: str, token: str, n: int, pid: int) -> tuple[float, float, float, float]:
    async with TrpcClient(url, token) as c:
        s = await c.mutation("session.create", {"queuePaused": True})
        lat = []
        cpu0 = cpu_seconds(pid)
        for i in range(n):
            if i and i % 90 == 0:
                await c.mutation("message.clearQueue", {"sessionId": s["id"]})
            t0 = time.perf_counter()
            await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": f"m{i}"})
            lat.append((time.perf_counter() - t0) * 1000)
        cpu_ms = (cpu_seconds(pid) - cpu0) * 1000 / n  # the queue clears count in: 1 call in 90
        return pct(lat, 50), pct(lat, 99), n / (sum(lat) / 1000), cpu_ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backends", nargs="+", choices=("sqlite", "postgres"), default=["sqlite", "postgres"])
    args = ap.parse_args()
    print(f"enqueue round trip, {args.n} sequential calls per run, {args.runs} runs")
    for name in args.backends:
        p50s, p99s, rates, cpus = [], [], [], []
        for _ in range(args.runs):
            ctx = pg_database() if name == "postgres" else None
            db_url = ctx.__enter__() if ctx else None
            try:
                with run_server(db_url) as srv:
                    p50, p99, rate, cpu = asyncio.run(one_run(srv.url, srv.token, args.n, srv.pid))
            finally:
                if ctx:
                    ctx.__exit__(None, None, None)
            p50s.append(p50)
            p99s.append(p99)
            rates.append(rate)
            cpus.append(cpu)
        print(
            f"{name:9s} p50 ms {summary(p50s)}   p99 ms {summary(p99s)}   calls/s {summary(rates)}"
            f"   server CPU ms/call {summary(cpus)}"
        )


if __name__ == "__main__":
    main()
