"""One user sending the largest requests the server accepts must not slow another user down.

    .venv/bin/python bench/fairness.py [--seconds 10] [--runs 3] [--db sqlite|postgres]

A "heavy" user sends, back to back over one WebSocket, the largest requests the default limits allow: a batch
of 50 enqueues of ~19 KB each (just under the 1 MiB frame), and ``message.addInstructions`` with 64
instructions of ~15 KB (1 MiB of system messages in one transaction), clearing its queue as it fills. A
"light" user, on a connection of its own, measures the round trip of a PING and of an enqueue to its own session
every 20 ms. Printed: the light user's p50/p99/max with the heavy user running and, as the reference in the
same minute, without it (median and spread over runs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from contextlib import nullcontext

import orjson
from websockets.asyncio.client import connect

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import create_user, pct, pg_database, run_server, summary
from server.client import TrpcClient


async def heavy(url: str, token: str, stop: asyncio.Event) -> int:
    """Largest allowed requests, back to back; returns how many it sent."""
    sent = 0
    async with TrpcClient(url, token) as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        ws_url = url.replace("http", "ws") + "/trpc"
        async with connect(ws_url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None) as ws:
            rid = 0
            while not stop.is_set():
                rid += 1
                batch = [
                    {
                        "id": rid * 100 + i,
                        "method": "mutation",
                        "params": {
                            "path": "message.enqueueMessage",
                            "input": {"sessionId": sid, "content": "x" * 19_000},
                        },
                    }
                    for i in range(50)
                ]
                await ws.send(orjson.dumps(batch).decode())
                for _ in range(50):
                    await ws.recv()
                await c.mutation("message.clearQueue", {"sessionId": sid})
                await c.mutation(
                    "message.addInstructions", {"sessionId": sid, "respond": False, "instructions": ["y" * 15_000] * 64}
                )
                sent += 2
    return sent


async def light(url: str, token: str, stop: asyncio.Event) -> tuple[list[float], list[float]]:
    pings: list[float] = []
    enqueues: list[float] = []
    async with TrpcClient(url, token) as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        ws_url = url.replace("http", "ws") + "/trpc"
        async with connect(ws_url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            n = 0
            while not stop.is_set():
                t0 = time.perf_counter()
                await ws.send("PING")
                assert await ws.recv() == "PONG"
                pings.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"light {n}"})
                enqueues.append((time.perf_counter() - t0) * 1000)
                n += 1
                if n % 90 == 0:
                    await c.mutation("message.clearQueue", {"sessionId": sid})
                await asyncio.sleep(0.02)
    return pings, enqueues


async def one_run(url: str, heavy_token: str, light_token: str, seconds: float, with_heavy: bool):
    stop = asyncio.Event()
    tasks = [asyncio.create_task(light(url, light_token, stop))]
    if with_heavy:
        tasks.append(asyncio.create_task(heavy(url, heavy_token, stop)))
    await asyncio.sleep(seconds)
    stop.set()
    results = await asyncio.gather(*tasks)
    pings, enqueues = results[0]
    return pings, enqueues, (results[1] if with_heavy else 0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    args = ap.parse_args()
    print(
        f"light user's round trips while a heavy user sends the largest allowed requests ({args.db}, "
        f"{args.seconds:.0f} s per run, {args.runs} runs; reference: the same without the heavy user)"
    )
    rows: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.runs):
        for with_heavy in (False, True):
            ctx = pg_database() if args.db == "postgres" else nullcontext(None)
            with ctx as pg_url, tempfile.TemporaryDirectory() as tmp:
                db_url = pg_url or f"sqlite+aiosqlite:///{tmp}/fair.db"
                env = {**os.environ, "CHATSYNC_DATABASE_URL": db_url}
                light_token = create_user(env, "light")
                with run_server(db_url) as srv:
                    pings, enqueues, sent = asyncio.run(
                        one_run(srv.url, srv.token, light_token, args.seconds, with_heavy)
                    )
            key = "with heavy user" if with_heavy else "alone (reference)"
            row = rows.setdefault(
                key,
                {
                    k: []
                    for k in (
                        "ping p50",
                        "ping p99",
                        "ping max",
                        "enqueue p50",
                        "enqueue p99",
                        "enqueue max",
                        "heavy requests",
                    )
                },
            )
            row["ping p50"].append(pct(pings, 50))
            row["ping p99"].append(pct(pings, 99))
            row["ping max"].append(max(pings))
            row["enqueue p50"].append(pct(enqueues, 50))
            row["enqueue p99"].append(pct(enqueues, 99))
            row["enqueue max"].append(max(enqueues))
            row["heavy requests"].append(float(sent))
    for key, row in rows.items():
        print(key)
        for name, values in row.items():
            unit = "" if name == "heavy requests" else " ms"
            print(f"  {name:15s}{unit} {summary(values)}")


if __name__ == "__main__":
    main()
