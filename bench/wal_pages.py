"""Which pages an answered message's write transactions put in SQLite's write-ahead log, B-tree by B-tree.

    .venv/bin/python bench/wal_pages.py [--sessions 200] [--rounds 3]

A commit costs about two ``pwrite`` calls per page it changed (the log frame's header, then the page), and its
share of the checkpoint that copies the page into the database later: pages per transaction are what a write
transaction costs besides its statements. They do not depend on the machine or its load, so two checkouts
compare exactly.

Every service is wired as the server wires them (``open_services``, as ``bench/answer_cost.py``) on a SQLite file,
with the checkpointer held off so that the log only grows. S sessions get a message each per round; after the
warm rounds (the sessions then have a history, as in ``bench/capacity.py``), one more round is measured: the frames
each commit appended are read from the log file (each frame's header names its page) and the pages are named by
SQLite's ``dbstat`` table after the round. Transactions are told apart by who committed them: the send
(``message.send``), a step's end (``RunLoop._finish_step``), the heartbeat (``lease.Heartbeats``) or other.
Printed per kind: how many, pages per transaction (median and range), and the mean pages per transaction of each
B-tree (a table, its primary key's index ``sqlite_autoindex_*``, or a secondary index; ``sqlite_schema`` is page 1,
whose header counts the file's pages and changes whenever a B-tree grows).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
from collections import Counter, defaultdict
from types import FrameType
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.answer_cost import run_path_settings

FRAME_HEADER, WAL_HEADER = 24, 32
KINDS = (("_finish_step", "step end"), ("Heartbeats", "heartbeat"), ("send", "send"))


def _kind() -> str:
    """Who is committing: the first known frame on the stack, innermost first."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_qualname
        for marker, kind in KINDS:
            if marker in name:
                return kind
        frame = frame.f_back
    return "other"


async def measure(sessions: int, rounds: int) -> tuple[dict[str, list[list[int]]], dict[int, str]]:
    """Per kind of transaction, the pages each one put in the log; and which B-tree each page belongs to."""
    import server.store.db as db_module
    from server.app import open_services
    from server.store import sqlite_inline

    db_module.CHECKPOINT_SECONDS = 1e9  # the log only grows: each commit's frames are at its end
    settings, path = await run_path_settings(sessions, echo_delay=0.001)
    wal = path + "-wal"
    measuring = False
    by_kind: dict[str, list[list[int]]] = defaultdict(list)
    commit = sqlite_inline.InlineConnection.commit

    async def counted_commit(self: Any) -> None:
        kind = _kind()
        before = os.path.getsize(wal) if os.path.exists(wal) else 0
        await commit(self)
        after = os.path.getsize(wal)
        if not measuring or after <= before:
            return
        with open(wal, "rb") as f:
            page_size = int.from_bytes(f.read(WAL_HEADER)[8:12], "big")  # the log's header names it
            start = max(before, WAL_HEADER)
            f.seek(start)
            data = f.read(after - start)
        step = FRAME_HEADER + page_size
        by_kind[kind].append([int.from_bytes(data[i : i + 4], "big") for i in range(0, len(data), step)])

    sqlite_inline.InlineConnection.commit = counted_commit  # type: ignore[method-assign]
    async with open_services(settings) as services:
        user = (await services.auth.create_user("bench"))[0]
        ids = [(await services.sessions.create(user, {})).id for _ in range(sessions)]
        orchestrator = services.orchestrator

        async def one_round() -> None:
            for sid in ids:
                await services.runs.send(user, sid, "word " * 60, [], [], None)
            while orchestrator.running_sessions():
                await asyncio.sleep(0.01)

        for _ in range(rounds):
            await one_round()
        measuring = True
        await one_round()
        measuring = False
    conn = sqlite3.connect(path)
    try:
        owner = {int(pageno): str(name) for name, pageno in conn.execute("SELECT name, pageno FROM dbstat")}
    finally:
        conn.close()
    return by_kind, owner


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="warm rounds before the measured one")
    args = ap.parse_args()
    found, owner = asyncio.run(measure(args.sessions, args.rounds))
    for kind in ("send", "step end", "heartbeat", "other"):
        txs = found.get(kind)
        if not txs:
            continue
        sizes = [len(t) for t in txs]
        print(
            f"{kind}: {len(txs)} transactions, pages each {statistics.median(sizes):.0f} "
            f"({min(sizes)}-{max(sizes)}), mean {statistics.mean(sizes):.1f}"
        )
        trees: Counter[str] = Counter()
        for pages in txs:
            trees.update(owner.get(p, "(freed since)") for p in pages)
        for tree, n in trees.most_common():
            print(f"  {n / len(txs):5.2f}  {tree}")


if __name__ == "__main__":
    main()
