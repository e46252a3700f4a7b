"""Many sessions at once: S sessions, 3 subscribers each, every session's user sending while answers stream.

    .venv/bin/python bench/capacity.py --sessions 50 100 200 [--seconds 20] [--send-every 4] [--tokens 60] [--runs 3]
    .venv/bin/python bench/capacity.py --server reference ...   # the same load on the bare broadcast() server

The server is a real `chatsync serve` process (SQLite, in-process bus) with ``bench/streaming.py``'s ``stamp``
provider at ``--pace`` tokens per second (30: the echo model's pace, a human-like one): it streams like the
echo model, but each token is the wall-clock time the provider yielded it, so latency is provider -> client.
Each session has 3 subscribers (raw WebSocket clients, ``bench/wsclient.py``), spread over ``--procs`` load
generator processes. The first subscriber of each session is also its user: every ``--send-every`` seconds
(jittered, first send at a random offset) it sends ``message.send`` on its own socket asking for ``--tokens``
tokens. A send during an answer is queued and sent when the answer ends, so queue events, run events and
text deltas mix. Each user sends ``seconds / send-every`` messages; a subscriber is done when it saw the
run of every one finish.

Per S it prints: token latency p50/p99 (provider -> subscriber, text deltas), server CPU µs per delivered
event (all frames a subscriber got: deltas, queue and run events), the server's RSS at the end, losses (a gap
in a subscriber's event ids or in a message's delta offsets, or a run missing), and the host's steal. Then
the largest S whose median p99 stayed <= ``--p99-ms`` with nothing lost. ``--server reference`` replays the
same load (same sessions, same sends, same token pace) on ``bench/reference_broadcast.py``: the ratio of the
two, at the same delivered rate, does not drift with the machine as the absolute figures do.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import random
import statistics
import sys
import time

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import cpu_seconds, machine_ticks, pct, run_server, steal_share, summary
from bench.idle_connections import rss_kib
from chatsync_client import TrpcClient

SUBSCRIBERS_PER_SESSION = 3


def load_proc(
    url: str,
    token: str,
    subs: list[tuple[str, bool]],
    messages: int,
    send_every: float,
    tokens: int,
    ready: mp.Queue,
    go: mp.Event,
    results: mp.Queue,
) -> None:  # type: ignore[type-arg]
    """One load-generator process: ``subs`` are (session id, sends) pairs, one subscriber each."""
    from bench.wsclient import subscribe_session

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    stats = {"events": 0, "deltas": 0, "losses": 0, "lat": [], "sent": 0, "send_errors": 0}
    lat = stats["lat"]

    async def one(sid: str, sends: bool) -> None:
        loop = asyncio.get_running_loop()
        started, finished = loop.create_future(), loop.create_future()
        state = {"last_id": None, "offsets": {}, "runs": 0}

        def on_text(raw: bytes) -> None:
            now = time.time_ns()
            msg = orjson.loads(raw)
            if msg.get("id") != 1:  # the reply to one of this user's sends
                if "error" in msg:
                    stats["send_errors"] += 1
                return
            result = msg["result"]
            kind = result.get("type")
            if kind == "started":
                started.set_result(None)
                return
            if kind != "data":
                return
            data = result["data"]
            tracked = "id" in result
            ev = data["data"] if tracked else data
            stats["events"] += 1
            etype = ev["type"]
            if etype != "text-delta" and tracked:
                eid = int(result["id"])
                if state["last_id"] is not None and eid != state["last_id"] + 1:
                    stats["losses"] += 1
                state["last_id"] = eid
            if etype == "text-delta":  # ephemeral: ordered by its offset in the message, not by an id
                stats["deltas"] += 1
                offsets = state["offsets"]
                if ev["offset"] != offsets.get(ev["messageId"], 0):
                    stats["losses"] += 1
                offsets[ev["messageId"]] = ev["offset"] + len(ev["delta"])
                lat.append((now - int(ev["delta"].split()[0])) / 1e6)
            elif etype == "run-finished":
                state["runs"] += 1
                if state["runs"] == messages and not finished.done():
                    finished.set_result(None)

        ws = await subscribe_session(url, token, sid, on_text)
        await started
        ready.put(1)
        while not go.is_set():
            await asyncio.sleep(0.05)
        if sends:
            await asyncio.sleep(random.uniform(0, send_every))
            for n in range(messages):
                ws.send_text(
                    orjson.dumps(
                        {
                            "id": 2 + n,
                            "method": "mutation",
                            "params": {"path": "message.send", "input": {"sessionId": sid, "content": str(tokens)}},
                        }
                    ).decode()
                )
                stats["sent"] += 1
                if n < messages - 1:
                    await asyncio.sleep(send_every * random.uniform(0.75, 1.25))
        try:
            await asyncio.wait_for(finished, 300)
        except TimeoutError:
            stats["losses"] += messages - state["runs"]  # runs that never finished here
        assert ws.transport is not None
        ws.transport.close()

    async def main() -> None:
        await asyncio.gather(*(one(sid, sends) for sid, sends in subs))
        results.put(stats)

    asyncio.run(main())


async def create_sessions(url: str, token: str, n: int, pace: str) -> list[str]:
    async with TrpcClient(url, token) as c:
        return [(await c.mutation("session.create", {"provider": "stamp", "model": pace}))["id"] for _ in range(n)]


def one_run(args: argparse.Namespace, sessions: int) -> dict:
    if args.server == "reference":
        ctx_server = run_server(token="reference", command=("bench/reference_broadcast.py",))
    else:
        ctx_server = run_server(
            command=("-m", "bench.streaming", "--serve"),
            CHATSYNC_MAX_QUEUE_LENGTH="1000",
            CHATSYNC_MAX_CONNECTIONS=str(sessions * 4 + 100),
        )
    with ctx_server as srv:
        sids = asyncio.run(create_sessions(srv.url, srv.token, sessions, str(args.pace)))
        messages = max(1, round(args.seconds / args.send_every))
        per_proc: list[list[tuple[str, bool]]] = [[] for _ in range(args.procs)]
        for i, sid in enumerate(sids):
            for j in range(SUBSCRIBERS_PER_SESSION):  # a session's subscribers spread over the processes
                per_proc[(i + j) % args.procs].append((sid, j == 0))
        ctx = mp.get_context("spawn")
        ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        procs = [
            ctx.Process(
                target=load_proc,
                args=(srv.url, srv.token, subs, messages, args.send_every, args.tokens, ready, go, results),
            )
            for subs in per_proc
            if subs
        ]
        for p in procs:
            p.start()
        for _ in range(sessions * SUBSCRIBERS_PER_SESSION):
            ready.get(timeout=300)
        cpu0, ticks0, t0 = cpu_seconds(srv.pid), machine_ticks(), time.perf_counter()
        go.set()
        stats = [results.get(timeout=600) for _ in procs]
        elapsed = time.perf_counter() - t0
        cpu1, steal, rss = cpu_seconds(srv.pid), steal_share(ticks0, machine_ticks()), rss_kib(srv.pid)
        for p in procs:
            p.join(10)
    events = sum(s["events"] for s in stats)
    lat = [x for s in stats for x in s["lat"]]
    expected_deltas = sessions * messages * args.tokens * SUBSCRIBERS_PER_SESSION
    deltas = sum(s["deltas"] for s in stats)
    return {
        "events": events,
        "deltas": deltas,
        "expected_deltas": expected_deltas,
        "losses": sum(s["losses"] for s in stats) + (expected_deltas - deltas),
        "send_errors": sum(s["send_errors"] for s in stats),
        "p50": pct(lat, 50),
        "p99": pct(lat, 99),
        "cpu_us": (cpu1 - cpu0) * 1e6 / max(events, 1),
        "rate": events / elapsed,
        "rss_mib": rss / 1024,
        "steal": steal,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, nargs="+", default=[50, 100, 200])
    ap.add_argument("--seconds", type=float, default=20, help="how long each user keeps sending")
    ap.add_argument("--send-every", type=float, default=4.0, help="seconds between a user's messages (±25%%)")
    ap.add_argument("--tokens", type=int, default=60, help="tokens per answer")
    ap.add_argument("--pace", type=float, default=30, help="tokens per second of the model")
    ap.add_argument("--procs", type=int, default=2, help="load generator processes")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--p99-ms", type=float, default=50)
    ap.add_argument("--server", choices=("chatsync", "reference"), default="chatsync")
    args = ap.parse_args()
    print(
        f"capacity: {args.server}, sessions {args.sessions} x {SUBSCRIBERS_PER_SESSION} subscribers on "
        f"{args.procs} processes, a send every {args.send_every:g} s for {args.seconds:g} s, {args.tokens} tokens "
        f"at {args.pace:g}/s per answer, {args.runs} runs"
    )
    best = None
    for sessions in args.sessions:
        runs = [one_run(args, sessions) for _ in range(args.runs)]
        for r in runs:
            print(
                f"  S={sessions} run: events={r['events']} deltas={r['deltas']}/{r['expected_deltas']} "
                f"losses={r['losses']} send errors={r['send_errors']} {r['rate']:.0f} events/s "
                f"p50={r['p50']:.2f}ms p99={r['p99']:.2f}ms cpu={r['cpu_us']:.1f}us/event "
                f"rss={r['rss_mib']:.0f}MiB steal={r['steal'] * 100:.1f}%"
            )
        p99 = summary([r["p99"] for r in runs])
        lost = sum(r["losses"] for r in runs)
        print(
            f"S={sessions}: events/s {summary([r['rate'] for r in runs])}; latency p50 ms "
            f"{summary([r['p50'] for r in runs])}, p99 ms {p99}; server CPU us/event "
            f"{summary([r['cpu_us'] for r in runs])}; RSS MiB {summary([r['rss_mib'] for r in runs])}; "
            f"lost {lost}; steal % {summary([r['steal'] * 100 for r in runs])}"
        )
        if lost == 0 and statistics.median(r["p99"] for r in runs) <= args.p99_ms:
            best = sessions
    print(f"largest S with p99 <= {args.p99_ms:g} ms and nothing lost: {best}")


if __name__ == "__main__":
    main()
