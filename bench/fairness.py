"""One user sending the largest requests the server accepts must not slow another user down.

    .venv/bin/python bench/fairness.py [--seconds 10] [--runs 3] [--db sqlite|postgres]

A "heavy" user sends, back to back over one WebSocket, the largest requests the default limits allow: a batch
of 50 enqueues of ~19 KB each (just under the 1 MiB frame), and ``message.addInstructions`` with 64
instructions of ~15 KB (1 MiB of system messages in one transaction), clearing its queue as it fills. A
"light" user, on a connection of its own, measures the round trip of a PING and of an enqueue to its own session
every 20 ms. Printed: the light user's p50/p99/max with the heavy user running and, as the reference in the
same minute, without it (median and spread over runs).

    .venv/bin/python bench/fairness.py --mix [--seconds 10] [--runs 3] [--db sqlite|postgres]

``--mix`` is the mixed load instead, with the server pinned to one core (the load generator to the other): a
heavy user keeps 150 sessions streaming (each sends a 120-word message to the echo model, and the next as soon
as the answer ends), runs 6 uploads of 20 MiB in parallel, back to back, while 4 connections flood
``POST /auth/link`` with wrong codes. A light user reads its session list (``session.list``, 20 sessions) every
20 ms. Printed: the light user's read p50/p99/max with and without the mix, and what the mix got done.

    .venv/bin/python bench/fairness.py --long-chat 10000 [--cache-bytes N] [--before-root DIR] [--seconds 10]

``--long-chat N`` is a heavy user with one chat of N messages (imported), sending to it one message after
another: every step of it reads the whole active path and makes its request. The light user measures a PING and
an enqueue as above. ``--cache-bytes 0`` keeps no converted conversation (every step converts the whole chat, as
the first step after a restart does); ``--before-root`` runs the same with another checkout's server,
interleaved, to compare two versions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import nullcontext
from typing import Any

import orjson
from websockets.asyncio.client import connect

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import secrets

import httpx

from bench.common import create_user, pct, pg_database, run_server, summary
from chatsync_client import TrpcClient


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


STREAMING_SESSIONS = 150
PARALLEL_UPLOADS = 6
UPLOAD_BYTES = 20 * 1024 * 1024 - 4096  # just under the default per-file limit
LINK_FLOODERS = 4


async def streamer(url: str, token: str, stop: asyncio.Event, counts: dict[str, int]) -> None:
    """Keeps STREAMING_SESSIONS sessions answering: a new message as soon as a session's answer ends."""
    words = " ".join(f"w{i}" for i in range(120))
    async with TrpcClient(url, token) as c:
        sids = [(await c.mutation("session.create", {}))["id"] for _ in range(STREAMING_SESSIONS)]
        subs = [await c.subscribe("session.events", {"sessionId": sid}) for sid in sids]

        async def keep_busy(sid: str, sub: Any) -> None:
            while not stop.is_set():
                await c.mutation("message.send", {"sessionId": sid, "content": words})
                counts["sent"] += 1
                while not stop.is_set():
                    try:
                        _id, event = await sub.next(timeout=60)
                    except TimeoutError:
                        break
                    kind = event.get("type") if isinstance(event, dict) else None
                    if kind == "text-delta":
                        counts["deltas"] += 1
                    elif kind in ("run-finished", "run-failed", "run-aborted"):
                        break

        await _until_stopped(stop, [keep_busy(sid, sub) for sid, sub in zip(sids, subs, strict=True)])


async def uploader(url: str, token: str, stop: asyncio.Event, counts: dict[str, int]) -> None:
    body = secrets.token_bytes(UPLOAD_BYTES)
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:

        async def loop() -> None:
            while not stop.is_set():
                r = await http.post(
                    "/files",
                    headers={"Authorization": f"Bearer {token}"},
                    files={"file": ("blob.bin", body, "application/octet-stream")},
                )
                counts["uploads" if r.status_code < 300 else f"upload {r.status_code}"] += 1

        await _until_stopped(stop, [loop() for _ in range(PARALLEL_UPLOADS)])


async def link_flood(url: str, stop: asyncio.Event, counts: dict[str, int]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:

        async def loop() -> None:
            while not stop.is_set():
                r = await http.post("/auth/link", json={"code": secrets.token_urlsafe(24), "deviceName": "x"})
                counts[f"link {r.status_code}"] += 1

        await _until_stopped(stop, [loop() for _ in range(LINK_FLOODERS)])


async def _until_stopped(stop: asyncio.Event, loops: list[Any]) -> None:
    tasks = [asyncio.create_task(x) for x in loops]
    await stop.wait()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def reader(url: str, token: str, stop: asyncio.Event, ready: asyncio.Event) -> list[float]:
    """The light user: its session list every 20 ms over its own WebSocket, once it has 20 sessions."""
    times: list[float] = []
    async with TrpcClient(url, token) as c:
        for _ in range(20):
            await c.mutation("session.create", {"queuePaused": True})
        ready.set()
        while not stop.is_set():
            t0 = time.perf_counter()
            await c.query("session.list", {"limit": 20})
            times.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0.02)
    return times


async def mix_run(url: str, heavy_token: str, light_token: str, seconds: float, with_mix: bool):
    stop, load_stop, ready = asyncio.Event(), asyncio.Event(), asyncio.Event()
    counts: dict[str, int] = defaultdict(int)
    load = []
    if with_mix:
        load = [
            asyncio.create_task(streamer(url, heavy_token, load_stop, counts)),
            asyncio.create_task(uploader(url, heavy_token, load_stop, counts)),
            asyncio.create_task(link_flood(url, load_stop, counts)),
        ]
        while counts["sent"] < STREAMING_SESSIONS:  # every session streaming before the light user measures
            await asyncio.sleep(0.1)
    light_task = asyncio.create_task(reader(url, light_token, stop, ready))
    await ready.wait()
    counts.clear()
    await asyncio.sleep(seconds)
    stop.set()
    times = await light_task
    snapshot = dict(counts)
    load_stop.set()
    await asyncio.gather(*load)
    return times, snapshot


def mix_main(args: argparse.Namespace) -> None:
    print(
        f"light user's session.list while another user streams {STREAMING_SESSIONS} sessions, uploads "
        f"{PARALLEL_UPLOADS} x 20 MiB and {LINK_FLOODERS} connections guess link codes ({args.db}, server on one "
        f"core, {args.seconds:.0f} s per run, {args.runs} runs; reference: the light user alone)"
    )
    os.sched_setaffinity(0, {1})  # the load generator on the other core
    rows: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.runs):
        for with_mix in (False, True):
            ctx = pg_database() if args.db == "postgres" else nullcontext(None)
            with ctx as pg_url, tempfile.TemporaryDirectory() as tmp:
                db_url = pg_url or f"sqlite+aiosqlite:///{tmp}/fair.db"
                env = {**os.environ, "CHATSYNC_DATABASE_URL": db_url}
                light_token = create_user(env, "light")
                limits = {
                    # the mix as described: one user's 150 streams and uploads past the default quota
                    "CHATSYNC_MAX_ACTIVE_RUNS_PER_USER": str(STREAMING_SESSIONS + 10),
                    "CHATSYNC_MAX_UPLOADS_IN_FLIGHT_PER_USER": str(PARALLEL_UPLOADS),
                    "CHATSYNC_MAX_USER_FILE_BYTES": str(1 << 40),
                    "CHATSYNC_MAX_FILES_PER_USER": "1000000",
                    "CHATSYNC_RATE_LIMIT_PER_SECOND": "200",
                }
                with run_server(db_url, cpus={0}, **limits) as srv:
                    times, counts = asyncio.run(mix_run(srv.url, srv.token, light_token, args.seconds, with_mix))
            key = "with the mix" if with_mix else "alone (reference)"
            row = rows.setdefault(key, defaultdict(list))
            row["session.list p50"].append(pct(times, 50))
            row["session.list p99"].append(pct(times, 99))
            row["session.list max"].append(max(times))
            for name, n in counts.items():
                row[name].append(float(n))
    for key, row in rows.items():
        print(key)
        for name, values in row.items():
            unit = " ms" if name.startswith("session.list") else ""
            print(f"  {name:22s}{unit} {summary(values)}")


async def long_chat(url: str, token: str, n: int, stop: asyncio.Event, ready: asyncio.Event) -> int:
    """One chat of ``n`` messages, answered one message after another until ``stop``; returns the answers."""
    # About 250 characters a message, in one word: the echo model counts the prompt's words by splitting every
    # message (its own usage figures), which for 10,000 messages of 40 words would cost it more than the server's
    # read and conversion of them do.
    line = "x" * 240
    transcript = {
        "format": "chatsync.session",
        "version": 1,
        "session": {"title": "long chat"},
        "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} {line}", "status": "complete"}
            for i in range(n)
        ],
    }
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        r = await http.post(
            "/sessions/import", content=orjson.dumps(transcript), headers={"Authorization": f"Bearer {token}"}
        )
        r.raise_for_status()
        sid = r.json()["id"]
    answers = 0
    async with TrpcClient(url, token) as c:
        sub = await c.subscribe("session.events", {"sessionId": sid})
        while not stop.is_set():
            await c.mutation("message.send", {"sessionId": sid, "content": f"next {answers}"})
            while True:
                _id, event = await sub.next(timeout=120)
                if isinstance(event, dict) and event.get("type") in ("run-finished", "run-failed", "run-aborted"):
                    break
            answers += 1
            ready.set()
    return answers


def long_chat_main(args: argparse.Namespace) -> None:
    roots = [("this checkout", None)] + ([("before", args.before_root)] if args.before_root else [])
    cache = {} if args.cache_bytes is None else {"CHATSYNC_CONVERSATION_CACHE_BYTES": str(args.cache_bytes)}
    print(
        f"light user's round trips while a heavy user answers in a chat of {args.long_chat} messages, one message "
        f"after another ({args.db}, {args.seconds:.0f} s per run, {args.runs} runs, conversation cache "
        f"{'default' if args.cache_bytes is None else args.cache_bytes}; reference: the light user alone)"
    )
    rows: dict[str, dict[str, list[float]]] = {}

    async def measure(url: str, heavy_token: str, light_token: str, with_heavy: bool) -> tuple[Any, ...]:
        stop, heavy_stop, ready = asyncio.Event(), asyncio.Event(), asyncio.Event()
        heavy_task = None
        if with_heavy:
            heavy_task = asyncio.create_task(long_chat(url, heavy_token, args.long_chat, heavy_stop, ready))
            await ready.wait()  # imported and answering before the light user measures
        light_task = asyncio.create_task(light(url, light_token, stop))
        await asyncio.sleep(args.seconds)
        stop.set()
        pings, enqueues = await light_task
        heavy_stop.set()
        answers = await heavy_task if heavy_task else 0
        return pings, enqueues, answers

    for run in range(args.runs):
        order = roots if run % 2 == 0 else roots[::-1]
        for label, root in [("alone (reference)", None), *order]:
            with tempfile.TemporaryDirectory() as tmp:
                db_url = f"sqlite+aiosqlite:///{tmp}/fair.db"
                env = {**os.environ, "CHATSYNC_DATABASE_URL": db_url}
                light_token = create_user(env, "light", root)
                with run_server(db_url, root=root, **cache) as srv:
                    pings, enqueues, answers = asyncio.run(
                        measure(srv.url, srv.token, light_token, label != "alone (reference)")
                    )
            row = round_trips(rows, label, pings, enqueues)
            if label != "alone (reference)":
                row["long-chat answers"].append(float(answers))
    print_rows(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--mix", action="store_true", help="the mixed load: streams, uploads and link guesses")
    ap.add_argument("--long-chat", type=int, default=0, metavar="N", help="a heavy user answering in a chat of N")
    ap.add_argument("--cache-bytes", type=int, default=None, help="the server's conversation cache (--long-chat)")
    ap.add_argument("--before-root", default=None, help="another checkout to compare with (--long-chat)")
    args = ap.parse_args()
    if args.long_chat:
        long_chat_main(args)
        return
    if args.mix:
        mix_main(args)
        return
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
            round_trips(rows, key, pings, enqueues)["heavy requests"].append(float(sent))
    print_rows(rows)


def round_trips(
    rows: dict[str, dict[str, list[float]]], key: str, pings: list[float], enqueues: list[float]
) -> dict[str, list[float]]:
    """Adds one run's light-user figures (ms) to the row ``key``; returns the row."""
    row = rows.setdefault(key, defaultdict(list))
    for name, times in (("ping", pings), ("enqueue", enqueues)):
        row[f"{name} p50"].append(pct(times, 50))
        row[f"{name} p99"].append(pct(times, 99))
        row[f"{name} max"].append(max(times))
    return row


def print_rows(rows: dict[str, dict[str, list[float]]]) -> None:
    """Each row's figures, median and spread over the runs: round trips in ms, counts as they are."""
    for key, row in rows.items():
        print(key)
        for name, values in row.items():
            unit = " ms" if name.startswith(("ping", "enqueue")) else ""
            print(f"  {name:17s}{unit} {summary(values)}")


if __name__ == "__main__":
    main()
