"""What one answered message costs the server's run path, without sockets: CPU, transactions and statements.

    .venv/bin/python bench/answer_cost.py [--sessions 50] [--rounds 6] [--runs 3]
    .venv/bin/python bench/answer_cost.py --before-root ../older-checkout     # interleaved with another checkout
    .venv/bin/python bench/answer_cost.py --tools [--before-root ...]          # each answer makes a tool round
    .venv/bin/python bench/answer_cost.py --per-round 2 [--before-root ...]    # a second message, auto-sent
    .venv/bin/python bench/answer_cost.py --history 400 [--before-root ...]    # in chats of 400 messages

Every service is wired as the server wires them (``open_services``) on a SQLite file with the in-process bus and
the offline echo model; S sessions each get a message per round, all sent at once, and the round ends when every
run has finished. Nobody subscribes, so what is measured is the run's own work — the send, its transactions,
the token path, what observes commits — not the fan-out (``bench/fanout.py``) or the socket writes. With
``--per-round 2`` each session gets a second message right after its first, which waits in the queue and is sent
by the end of the first answer (the auto-send); every figure is then per answer of either kind. With
``--history N`` each session first holds N messages (N/2 one-word questions and their answers), so the answers
measured are in a conversation that long: every step reads and converts the whole conversation.

It prints, per checkout, the CPU per answer (process CPU over a round ÷ answers) for a short answer (60 words)
and a long one (600 words), the per-token cost the two imply (their difference ÷ 540), and per answer: write
transactions, read transactions and SQL statements, counted by kind — through the ORM's unit of work or a Core
statement on SQLAlchemy's connection ("sqlalchemy"), or a prepared statement straight on ``sqlite3``
("prepared"). The counts do not depend on the machine's load, so they compare two checkouts exactly even on a
busy host; the CPU figures are medians over ``--runs`` interleaved runs with their range.

``--tools``: each message makes the echo model call three tools in its first step — a server tool
(``current_time``), a client tool (``get_weather``) and a server tool that needs approval (``calculator``). The
server runs the first, the run waits for people (``requires-action``), and then every session gets its client
tool's output (``tool.submitOutputs``: ``RunService.submit_outputs``, which does not resume the run yet) and its
approval (``tool.approve``: ``RunService.approve``, which resumes it); the run executes the approved call and the
model answers from the three results. Per answer it prints the same figures and, apart, the statements of the
``submit_outputs`` call and of the ``approve`` call themselves and their CPU (the run an approval resumes is
started once every approval of the round was made, so that its work is not counted as the approval's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool(name: str, executor: str = "server", approval: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "description": name,
        "parameters": {"type": "object", "properties": {}},
        "executor": executor,
        "requiresApproval": approval,
    }


TOOLS = [_tool("current_time"), _tool("get_weather", "client"), _tool("calculator", approval=True)]
TOOL_LINES = '\n/tool current_time {}\n/tool get_weather {"city": "Paris"}\n/tool calculator {"expression": "6*7"}'
PHASES = ("submit_outputs", "approve")


def _open_calls(path: str) -> dict[str, dict[str, str]]:
    """The calls without a result, by session, then by tool name: read on a connection of the bench's own
    (``sqlite3``), outside what is counted."""
    conn = sqlite3.connect(path)
    try:
        found: dict[str, dict[str, str]] = {}
        for session_id, call_id, name in conn.execute(
            "SELECT session_id, id, name FROM tool_calls WHERE has_result = 0"
        ):
            found.setdefault(session_id, {})[name] = call_id
        return found
    finally:
        conn.close()


def _statuses(path: str) -> Counter[str]:
    conn = sqlite3.connect(path)
    try:
        return Counter(s for (s,) in conn.execute("SELECT status FROM sessions"))
    finally:
        conn.close()


async def run_path_settings(sessions: int, echo_delay: float) -> tuple[Any, str]:
    """The settings the run path is measured with (``sessions`` runs at once, the echo model waiting
    ``echo_delay`` between words), on a new, migrated SQLite file; and the file's path."""
    from server.settings import load_settings
    from server.store import migrate
    from server.store.db import Database

    folder = tempfile.mkdtemp(prefix="answer-cost-")
    path = f"{folder}/chatsync.db"
    url = f"sqlite+aiosqlite:///{path}"
    async with Database(url) as db:
        await migrate.upgrade(db)
    settings = load_settings(
        database_url=url,
        bus_url="memory://",
        files_url=f"{folder}/files",
        run_migrations_on_start=False,
        echo_delay=echo_delay,
        sweep_seconds=60,
        max_active_runs_per_user=sessions + 10,
    )
    return settings, path


async def _measure(
    sessions: int, rounds: int, words: int, tools: bool = False, per_round: int = 1, history: int = 0
) -> dict[str, Any]:
    """One checkout's figures (runs in a child process whose working directory is that checkout)."""
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import AsyncEngine

    from server.app import open_services
    from server.store import prepared

    settings, path = await run_path_settings(sessions, echo_delay=0.005)
    counts: Counter[str] = Counter()
    phase_cpu: Counter[str] = Counter()
    async with open_services(settings) as services:
        user = (await services.auth.create_user("bench"))[0]
        fields = {"tools": TOOLS} if tools else {}
        ids = [(await services.sessions.create(user, fields)).id for _ in range(sessions)]
        content = "word " * words + (TOOL_LINES if tools else "")
        orchestrator = services.orchestrator

        async def settled() -> None:
            while orchestrator.running_sessions():
                await asyncio.sleep(0.01)

        async def phase(name: str, calls: list[Any]) -> None:
            """Run ``calls`` (awaitables made on demand) one after another, their statements and CPU counted as
            ``name``; a run one of them starts is started after the last."""
            start, deferred = orchestrator.start, []
            orchestrator.start = lambda *args: deferred.append(args)  # type: ignore[method-assign]
            before = Counter(counts)
            started = time.process_time()
            try:
                for call in calls:
                    await call()
            finally:
                orchestrator.start = start  # type: ignore[method-assign]
            phase_cpu[name] += time.process_time() - started
            for key, value in (counts - before).items():
                counts[f"{name}: {key}"] += value
            for args in deferred:
                start(*args)

        async def tool_round() -> None:
            """Every session is waiting on people: a client output for each, then an approval for each."""
            await settled()
            waiting = _open_calls(path)
            if sorted(waiting) != sorted(ids) or any(set(c) != {"get_weather", "calculator"} for c in waiting.values()):
                raise RuntimeError(f"expected a client call and an approval in every session, found {waiting}")

            def submit(sid: str) -> Any:
                given = [{"callId": waiting[sid]["get_weather"], "output": "sunny"}]
                return lambda: services.runs.submit_outputs(user, sid, given)

            def approve(sid: str) -> Any:
                return lambda: services.runs.approve(user, sid, waiting[sid]["calculator"], True, None)

            await phase("submit_outputs", [submit(sid) for sid in ids])
            await phase("approve", [approve(sid) for sid in ids])

        async def one_round() -> None:
            for sid in ids:
                for _ in range(per_round):  # a second one waits in the queue for the first's answer
                    await services.runs.send(user, sid, content, [], [], None)
            if tools:
                await tool_round()
            await settled()
            if tools and _statuses(path) != Counter({"idle": sessions}):
                raise RuntimeError(f"a round ended with sessions not idle: {_statuses(path)}")

        for _ in range(history // 2):  # the conversation so far: one-word questions and their answers
            for sid in ids:
                await services.runs.send(user, sid, "earlier", [], [], None)
            await settled()
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
        phase_cpu.clear()
        for _ in range(rounds):
            started = time.process_time()
            await one_round()
            cpu.append((time.process_time() - started) * 1000 / (sessions * per_round))
    answers = sessions * rounds * per_round
    return {
        "cpu_ms": statistics.median(cpu),
        "per_answer": {k: v / answers for k, v in counts.items()},
        "phase_cpu_ms": {k: v * 1000 / answers for k, v in phase_cpu.items()},
    }


def _child(
    root: str, sessions: int, rounds: int, words: int, tools: bool = False, per_round: int = 1, history: int = 0
) -> dict[str, Any]:
    return run_child("answer_cost.py", root, sessions, rounds, words, int(tools), per_round, history)


def run_child(script: str, root: str, *args: object) -> dict[str, Any]:
    """Run ``bench/<script> --child <args>`` of this checkout against the checkout at ``root`` (its working
    directory and import path); returns the JSON of the child's last line."""
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", script), "--child", *(f"{a}" for a in args)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def run_path_arguments(doc: str | None) -> argparse.ArgumentParser:
    """The options of a run-path benchmark: how many sessions, rounds and runs, and the checkout to compare."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before-root", help="another checkout, measured interleaved with this one")
    return ap


def checkouts(args: argparse.Namespace) -> dict[str, str]:
    """This checkout, and the one ``--before-root`` names, by the names the figures are printed under."""
    return {"this checkout": ROOT} | ({"before": os.path.abspath(args.before_root)} if args.before_root else {})


def main() -> None:
    if len(sys.argv) == 8 and sys.argv[1] == "--child":
        sys.path.insert(0, os.getcwd())
        sessions, rounds, words, tools, per_round, history = (int(v) for v in sys.argv[2:])
        print(json.dumps(asyncio.run(_measure(sessions, rounds, words, bool(tools), per_round, history))))
        return
    ap = run_path_arguments(__doc__)
    ap.add_argument("--tools", action="store_true", help="each answer goes through a round of tool calls")
    ap.add_argument(
        "--per-round", type=int, choices=(1, 2), default=1, help="messages per session per round (2: one auto-sent)"
    )
    ap.add_argument(
        "--history",
        type=int,
        default=0,
        help="messages each session holds before the measured answers (one-word exchanges, half of them answers)",
    )
    args = ap.parse_args()
    if args.tools and args.per_round != 1:
        ap.error("--tools measures one message per session per round")
    roots = checkouts(args)
    short: dict[str, list[float]] = {name: [] for name in roots}
    long: dict[str, list[float]] = {name: [] for name in roots}
    counted: dict[str, dict[str, float]] = {}
    phases: dict[str, dict[str, list[float]]] = {name: {p: [] for p in PHASES} for name in roots}
    for run in range(args.runs):
        for name, root in roots.items():
            s = _child(root, args.sessions, args.rounds, 60, args.tools, args.per_round, args.history)
            lg = _child(root, args.sessions, args.rounds, 600, args.tools, args.per_round, args.history)
            short[name].append(s["cpu_ms"])
            long[name].append(lg["cpu_ms"])
            counted[name] = s["per_answer"]
            for p, ms in s["phase_cpu_ms"].items():
                phases[name][p].append(ms)
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
        print("  per answer: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(per.items()) if ":" not in k))
        for p in PHASES:
            if phases[name][p]:
                mine = ", ".join(f"{k[len(p) + 2 :]} {v:.2f}" for k, v in sorted(per.items()) if k.startswith(p + ":"))
                print(f"  {p} (one call): CPU {_spread(phases[name][p])} ms; {mine}")


if __name__ == "__main__":
    main()
