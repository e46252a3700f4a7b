"""What the send alone costs (``message.send`` that starts a run: its one write transaction), in CPU per call.

    .venv/bin/python bench/send_cost.py [--sessions 50] [--rounds 6] [--runs 3]
    .venv/bin/python bench/send_cost.py --before-root ../older-checkout     # interleaved with another checkout

Set up as ``bench/answer_cost.py`` sets up the run path (every service as the server wires them, a SQLite file, the
in-process bus, the offline echo model, nobody subscribed), but the echo model waits 10 s before its first word,
and the run loops the sends hand their runs to are started after the round's sends (as the orchestrator would,
only later): the process CPU measured around each ``RunService.send`` call is the send's own (its statements,
events, commit and publish). Each round then aborts the runs and waits until every session is idle. Printed
per checkout: the median over the rounds of the CPU per send, median and range over ``--runs`` interleaved runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.answer_cost import checkouts, run_child, run_path_arguments, run_path_settings


async def _measure(sessions: int, rounds: int) -> dict[str, Any]:
    """One checkout's figures (runs in a child process whose working directory is that checkout)."""
    from server.app import open_services

    settings, _path = await run_path_settings(sessions, echo_delay=10)
    async with open_services(settings) as services:
        user = (await services.auth.create_user("bench"))[0]
        ids = [(await services.sessions.create(user, {})).id for _ in range(sessions)]

        orchestrator = services.orchestrator
        start = orchestrator.start
        held: list[tuple[Any, ...]] = []

        def hold(*args: Any) -> None:
            held.append(args)

        async def one_round() -> float:
            # The run loops the sends hand their runs to begin after the round's sends, not inside one.
            orchestrator.start = hold  # type: ignore[method-assign]
            spent = 0.0
            for sid in ids:
                started = time.process_time()
                await services.runs.send(user, sid, "word " * 60, [], [], None)
                spent += time.process_time() - started
            orchestrator.start = start  # type: ignore[method-assign]
            for args in held:
                start(*args)
            held.clear()
            for sid in ids:
                await services.runs.abort(user, sid)
            while services.orchestrator.running_sessions():
                await asyncio.sleep(0.01)
            return spent * 1_000_000 / sessions

        await one_round()  # warm: statements compiled, caches filled, every session titled
        per_send = [await one_round() for _ in range(rounds)]
    return {"send_us": statistics.median(per_send)}


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        sys.path.insert(0, os.getcwd())
        print(json.dumps(asyncio.run(_measure(int(sys.argv[2]), int(sys.argv[3])))))
        return
    args = run_path_arguments(__doc__).parse_args()
    roots = checkouts(args)
    figures: dict[str, list[float]] = {name: [] for name in roots}
    for run in range(args.runs):
        for name, root in roots.items():
            figures[name].append(run_child("send_cost.py", root, args.sessions, args.rounds)["send_us"])
            print(f"  run {run + 1} {name}: {figures[name][-1]:.0f} µs per send, load {os.getloadavg()[0]:.1f}")
    for name, values in figures.items():
        print(
            f"{name}: CPU per send {statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f}) µs;"
            f" n={args.runs}"
        )


if __name__ == "__main__":
    main()
