"""What one answered message costs the server's run path, without sockets: CPU, transactions and statements.

    .venv/bin/python bench/answer_cost.py [--sessions 50] [--rounds 6] [--runs 3]
    .venv/bin/python bench/answer_cost.py --before-root ../older-checkout     # interleaved with another checkout

Every service is wired as the server wires them (``open_services``) on a SQLite file with the in-process bus and
the offline echo model; S sessions each get a message per round, all sent at once, and the round ends when every
run has finished. Nobody subscribes, so what is measured is the run's own work — the send, its transactions,
the token path, what observes commits — not the fan-out (``bench/fanout.py``) or the socket writes.

It prints, per checkout, the CPU per answer (process CPU over a round ÷ answers) for a short answer (60 words)
and a long one (600 words), the per-token cost the two imply (their difference ÷ 540), and per answer: write
transactions, read transactions and SQL statements, counted by kind — through the ORM's unit of work or a Core
statement on SQLAlchemy's connection ("sqlalchemy"), or a prepared statement straight on ``sqlite3``
("prepared"). The counts do not depend on the machine's load, so they compare two checkouts exactly even on a
busy host; the CPU figures are medians over ``--runs`` interleaved runs with their range.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


async def _measure(sessions: int, rounds: int, words: int) -> dict[str, Any]:
    """One checkout's figures (runs in a child process whose working directory is that checkout)."""
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import AsyncEngine

    from server.app import open_services
    from server.settings import load_settings
    from server.store import migrate, prepared
    from server.store.db import Database

    folder = tempfile.mkdtemp(prefix="answer-cost-")
    url = f"sqlite+aiosqlite:///{folder}/chatsync.db"
    async with Database(url) as db:
        await migrate.upgrade(db)
    settings = load_settings(
        database_url=url,
        bus_url="memory://",
        files_url=f"{folder}/files",
        run_migrations_on_start=False,
        echo_delay=0.005,
        sweep_seconds=60,
        max_active_runs_per_user=sessions + 10,
    )
    counts: Counter[str] = Counter()
    async with open_services(settings) as services:
        user = (await services.auth.create_user("bench"))[0]
        ids = [(await services.sessions.create(user, {})).id for _ in range(sessions)]

        async def one_round() -> None:
            for sid in ids:
                await services.runs.send(user, sid, "word " * words, [], [], None)
            while services.orchestrator.running_sessions():
                await asyncio.sleep(0.01)

        await one_round()  # warm: statements compiled, caches filled
        db = services.db
        write, read = db.write, db.read

        def counted_write(**kwargs: Any) -> Any:
            counts["write transactions"] += 1
            return write(**kwargs)

        def counted_read() -> Any:
            counts["read transactions"] += 1
            return read()

        db.write, db.read = counted_write, counted_read  # type: ignore[method-assign]
        # A one-statement read (``Database.read_rows``, where the checkout has it) counts as a read transaction.
        read_rows = getattr(db, "read_rows", None)
        if read_rows is not None:

            def counted_read_rows(*args: Any) -> Any:
                counts["read transactions"] += 1
                return read_rows(*args)

            db.read_rows = counted_read_rows  # type: ignore[method-assign]
        for method in ("execute", "rows"):
            run_prepared = getattr(prepared.PreparedConnection, method, None)
            if run_prepared is None:
                continue

            async def counted_prepared(self: Any, *args: Any, _run: Any = run_prepared) -> Any:
                counts["statements, prepared"] += 1
                return await _run(self, *args)

            setattr(prepared.PreparedConnection, method, counted_prepared)
        # Every engine the database holds: the writer's and the reader's, and on a SQLite file the one the ORM
        # joins a write's transaction through.
        engines = {value for value in vars(db).values() if isinstance(value, AsyncEngine)}
        for engine in engines:
            event.listen(
                engine.sync_engine,
                "before_cursor_execute",
                lambda *_args: counts.update(["statements, sqlalchemy"]),
            )
        cpu = []
        for _ in range(rounds):
            started = time.process_time()
            await one_round()
            cpu.append((time.process_time() - started) * 1000 / sessions)
    answers = sessions * rounds
    return {"cpu_ms": statistics.median(cpu), "per_answer": {k: v / answers for k, v in counts.items()}}


def _child(root: str, sessions: int, rounds: int, words: int) -> dict[str, Any]:
    script = os.path.join(ROOT, "bench", "answer_cost.py")
    out = subprocess.run(
        [sys.executable, script, "--child", f"{sessions}", f"{rounds}", f"{words}"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        sys.path.insert(0, os.getcwd())
        sessions, rounds, words = (int(v) for v in sys.argv[2:])
        print(json.dumps(asyncio.run(_measure(sessions, rounds, words))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before-root", help="another checkout, measured interleaved with this one")
    args = ap.parse_args()
    roots = {"this checkout": ROOT} | ({"before": os.path.abspath(args.before_root)} if args.before_root else {})
    short: dict[str, list[float]] = {name: [] for name in roots}
    long: dict[str, list[float]] = {name: [] for name in roots}
    counted: dict[str, dict[str, float]] = {}
    for run in range(args.runs):
        for name, root in roots.items():
            s = _child(root, args.sessions, args.rounds, 60)
            lg = _child(root, args.sessions, args.rounds, 600)
            short[name].append(s["cpu_ms"])
            long[name].append(lg["cpu_ms"])
            counted[name] = s["per_answer"]
            load = os.getloadavg()[0]
            print(
                f"  run {run + 1} {name}: {s['cpu_ms']:.2f} ms (60 words), {lg['cpu_ms']:.2f} ms (600 words),"
                f" load {load:.1f}"
            )
    for name in roots:
        token = [(lg - s) / 540 * 1000 for s, lg in zip(short[name], long[name], strict=True)]
        print(
            f"{name}: CPU per answer {_spread(short[name])} ms (60 words), {_spread(long[name])} ms (600 words); "
            f"per token {_spread(token)} µs; n={args.runs}"
        )
        per = counted[name]
        print("  per answer: " + ", ".join(f"{k} {per.get(k, 0):.2f}" for k in sorted(per)))


if __name__ == "__main__":
    main()
