"""Helpers shared by the test suites (imported as ``testkit``; the tests folder is on sys.path)."""
from __future__ import annotations

import contextlib
import os
import random
import socket
import uuid
from collections.abc import AsyncIterator

import asyncpg

from server.client import TrpcError

PG_HOST = os.environ.get("CHATSYNC_TEST_PG_HOST", "127.0.0.1")
PG_ADMIN_DSN = f"postgresql://postgres@{PG_HOST}:5432/postgres"
REDIS_URL = os.environ.get("CHATSYNC_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@contextlib.asynccontextmanager
async def fresh_pg_database() -> AsyncIterator[str]:
    """CREATE a uniquely named database, yield its SQLAlchemy URL, DROP it afterwards."""
    name = f"chatsync_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield f"postgresql+asyncpg://postgres@{PG_HOST}:5432/{name}"
    finally:
        admin = await asyncpg.connect(PG_ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


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
                await client.mutation("message.updateQueuedMessage",
                                      {"sessionId": session_id, "messageId": target["id"], "content": f"u{i}"})
            elif op == "move":
                target = rng.choice(queue)
                await client.mutation("message.moveQueuedMessage", {
                    "sessionId": session_id, "messageId": target["id"], "toIndex": rng.randrange(len(queue))})
            else:
                target = rng.choice(queue)
                await client.mutation("message.removeQueuedMessage",
                                      {"sessionId": session_id, "messageId": target["id"]})
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
