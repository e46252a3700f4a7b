"""Fan-out: N subscribers on one session, one publisher at a fixed rate.

    .venv/bin/python bench/fanout.py --subscribers 100 --rate 200 --seconds 10 [--runs 3] [--procs 2] [--replicas 2]
    .venv/bin/python bench/fanout.py --server reference ...   # the same load on a bare websockets broadcast()

Every published change is durable (committed with its event-log row) before it fans out. Subscribers
are raw WebSocket clients in ``--procs`` separate processes (sharing the machine with the server, as a
load generator does). Prints deliveries, losses (gaps or repeats in each subscriber's seq), latency
p50/p99 from the publisher's clock stamp to the subscriber's receipt, and server CPU µs per delivery.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import sys
import time
import uuid

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import cpu_seconds, cpu_split, machine_ticks, pct, pg_database, run_server, steal_share, summary
from chatsync_client import TrpcClient


def subscriber_proc(
    url: str, token: str, sid: str, count: int, ready: mp.Queue, results: mp.Queue, stalled_count: int = 0
) -> None:  # type: ignore[type-arg]
    from bench.wsclient import subscribe_session

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    stats = {"deliveries": 0, "losses": 0, "lat": []}
    lat = stats["lat"]
    debug = bool(os.environ.get("FANOUT_DEBUG"))
    stalled_ws: list = []

    async def one(done: asyncio.Future) -> None:
        state = {"expected": None, "started": asyncio.get_running_loop().create_future()}

        def on_text(raw: bytes) -> None:
            now = time.time_ns()
            msg = orjson.loads(raw)
            result = msg.get("result", {})
            if result.get("type") == "started":
                state["started"].set_result(None)
                return
            if "id" not in result:
                raise RuntimeError(f"unexpected frame {raw[:300]!r}")
            seq = int(result["id"])
            if state["expected"] is not None and seq != state["expected"]:
                stats["losses"] += 1
            state["expected"] = seq + 1
            stats["deliveries"] += 1
            ev = result["data"]["data"]
            content = ev["message"]["content"] if ev["type"] == "queue-message-added" else ""
            stamp = content.partition("-")[0]
            if stamp.isdigit():
                lat.append((now - int(stamp)) / 1e6)
                if debug:
                    stats.setdefault("by_seq", {}).setdefault(seq, []).append(lat[-1])
            elif content == STOP and not done.done():  # the last event of the run: everything before it came
                done.set_result(None)

        ws = await subscribe_session(url, token, sid, on_text)
        await state["started"]
        ready.put(1)
        await done
        assert ws.transport is not None
        ws.transport.close()

    async def stalled() -> None:
        """A subscriber that stops reading after it started: its socket buffers fill up."""
        started = asyncio.get_running_loop().create_future()

        def on_text(raw: bytes) -> None:
            if b'"started"' in raw and not started.done():
                started.set_result(None)

        ws = await subscribe_session(url, token, sid, on_text, rcvbuf=64 * 1024)
        await started
        assert ws.transport is not None
        ws.transport.pause_reading()
        stalled_ws.append(ws)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        dones = [loop.create_future() for _ in range(count)]
        await asyncio.gather(*(stalled() for _ in range(stalled_count)))
        await asyncio.gather(*(one(d) for d in dones))
        # Read what the stalled ones were sent: the last thing should be the server's close frame (4000).
        codes = []
        for ws in stalled_ws:
            assert ws.transport is not None
            ws.transport.resume_reading()
            try:
                codes.append(await asyncio.wait_for(asyncio.shield(ws.closed), 10))
            except TimeoutError:
                codes.append("open")
            ws.transport.close()
        # 4000 when the close frame was still there to read; None when the server had to abort the
        # connection (it waits 5 s for a closing client to take its buffered frames).
        stats["stalled_closed"] = sum(1 for c in codes if c in (4000, None))
        results.put(stats)

    asyncio.run(main())


STOP = "stop"
"""Content of the sentinel change that ends a run (timed changes carry the publisher's clock)."""

CLEAR_EVERY = 500
"""Changes between two clears of the queue (the server runs with a queue limit of 1000)."""


async def publish(url: str, token: str, sid: str, rate: float, seconds: float, label: str = "", pad: str = "") -> int:
    """Enqueue at a fixed rate (clearing the queue before it fills); returns the last seq written.

    Contents are the publisher's clock in ns (``label`` prefixed for warm-up events, which are not timed).
    """
    async with TrpcClient(url, token) as c:
        interval = 1 / rate
        start = time.perf_counter()
        n = 0
        pending: set[asyncio.Task] = set()
        while time.perf_counter() - start < seconds:
            target = start + n * interval
            delay = target - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if n and n % CLEAR_EVERY == 0:
                # Keeps the queue under its limit. The clear is a change too (fanned out like the others): it
                # takes this slot of the schedule, so changes stay 1/rate apart. (Sent right before the
                # next enqueue, it made two fan-outs back to back, and those deliveries were the p99.)
                await c.mutation("message.clearQueue", {"sessionId": sid})
                n += 1
                continue
            t = asyncio.create_task(
                c.mutation("message.enqueueMessage", {"sessionId": sid, "content": label + str(time.time_ns()) + pad})
            )
            pending.add(t)
            t.add_done_callback(pending.discard)
            n += 1
        await asyncio.gather(*pending)
        snap = await c.query("session.get", {"sessionId": sid})
        return int(snap["lastEventId"])


def one_run(args: argparse.Namespace) -> dict:
    with contextlib.ExitStack() as stack:
        env = {"CHATSYNC_MAX_QUEUE_LENGTH": "1000"}
        if args.stalled:
            # Small enough that a stalled subscriber overflows within the run and is closed with 4000.
            env["CHATSYNC_SEND_BUFFER_BYTES"] = str(256 * 1024)
        db_url = None
        if args.replicas > 1:
            # Replicas share PostgreSQL and Redis (a key prefix of this run's own).
            db_url = stack.enter_context(pg_database())
            env["CHATSYNC_BUS_URL"] = f"redis://127.0.0.1:6379/0?prefix=bench-{uuid.uuid4().hex[:8]}:"
        if args.server == "reference":
            srv = stack.enter_context(run_server(token="reference", command=("bench/reference_broadcast.py",)))
        else:
            srv = stack.enter_context(run_server(db_url, **env))
        servers = [srv] + [
            stack.enter_context(run_server(db_url, token=srv.token, **env)) for _ in range(args.replicas - 1)
        ]

        async def create() -> str:
            async with TrpcClient(srv.url, srv.token) as c:
                return (await c.mutation("session.create", {"queuePaused": True}))["id"]

        sid = asyncio.run(create())
        ctx = mp.get_context("spawn")
        ready, results = ctx.Queue(), ctx.Queue()
        per = [
            args.subscribers // args.procs + (1 if i < args.subscribers % args.procs else 0) for i in range(args.procs)
        ]
        # Subscriber processes spread over the replicas; the publisher talks to the first one.
        procs = [
            ctx.Process(
                target=subscriber_proc,
                args=(servers[i % len(servers)].url, srv.token, sid, n, ready, results, args.stalled if i == 0 else 0),
            )
            for i, n in enumerate(per)
            if n
        ]
        for p in procs:
            p.start()
        for _ in range(args.subscribers):
            ready.get(timeout=120)
        # Warm-up: subscribers finish their initial log reads, caches fill; not timed, not counted for CPU.
        pad = "-" + "x" * args.payload if args.payload else ""
        warm_seq = asyncio.run(publish(srv.url, srv.token, sid, args.rate, args.warmup, label="warm-", pad=pad))
        time.sleep(0.5)
        cpu0 = sum(cpu_seconds(x.pid) for x in servers)
        load0 = sum(cpu_seconds(p.pid) for p in procs if p.pid)
        split0 = [sum(v) for v in zip(*(cpu_split(x.pid) for x in servers))]
        ticks0 = machine_ticks()
        published_seq = asyncio.run(publish(srv.url, srv.token, sid, args.rate, args.seconds, pad=pad))

        async def sentinel() -> int:
            """The last change of the run, which tells every subscriber to stop; returns its seq."""
            async with TrpcClient(srv.url, srv.token) as c:
                await c.mutation("message.clearQueue", {"sessionId": sid})  # (no event if already empty)
                await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": STOP})
                return int((await c.query("session.get", {"sessionId": sid}))["lastEventId"])

        last_seq = asyncio.run(sentinel())
        stats = [results.get(timeout=120) for _ in procs]
        cpu1 = sum(cpu_seconds(x.pid) for x in servers)
        load1 = sum(cpu_seconds(p.pid) for p in procs if p.pid)
        split1 = [sum(v) for v in zip(*(cpu_split(x.pid) for x in servers))]
        steal = steal_share(ticks0, machine_ticks())
        for p in procs:
            p.join(10)
        deliveries = sum(s["deliveries"] for s in stats)
        if os.environ.get("FANOUT_DEBUG"):
            by_seq: dict[int, float] = {}
            for st in stats:
                for k, v in st.get("by_seq", {}).items():
                    by_seq[k] = max(by_seq.get(k, 0), *v)
            worst = sorted(by_seq.items(), key=lambda kv: -kv[1])[:10]
            print("  slowest events (seq, max latency ms):", [(k, round(v, 1)) for k, v in worst])
        lat = [x for s in stats for x in s["lat"]]
        return {
            "events": last_seq,
            "deliveries": deliveries,
            "expected": last_seq * args.subscribers,
            "losses": sum(s["losses"] for s in stats) + (last_seq * args.subscribers - deliveries),
            "p50": pct(lat, 50),
            "p99": pct(lat, 99),
            # Deliveries of the measured phase (the warm-up's are checked for losses but not timed).
            "cpu_us": (cpu1 - cpu0) * 1e6 / max((last_seq - warm_seq) * args.subscribers, 1),
            # The load generator's own CPU (it shares the machine): what the server's latency competes with.
            "client_cpu_us": (load1 - load0) * 1e6 / max((last_seq - warm_seq) * args.subscribers, 1),
            "sys_share": (split1[1] - split0[1]) / max(cpu1 - cpu0, 1e-9),
            "steal": steal,
            "stalled_closed": sum(s.get("stalled_closed", 0) for s in stats),
            "rate": (published_seq - warm_seq) * args.subscribers / args.seconds,
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--subscribers", type=int, default=100)
    ap.add_argument("--rate", type=float, default=200, help="published events per second")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=2, help="seconds published before measuring")
    ap.add_argument("--procs", type=int, default=2, help="subscriber processes")
    ap.add_argument("--replicas", type=int, default=1, help="server processes (>1: PostgreSQL + Redis)")
    ap.add_argument(
        "--server",
        choices=("chatsync", "reference"),
        default="chatsync",
        help="reference: bench/reference_broadcast.py, a bare websockets broadcast() server "
        "(nothing durable) under the same load, for a ratio that does not drift with the machine",
    )
    ap.add_argument("--payload", type=int, default=0, help="extra characters per published message")
    ap.add_argument(
        "--stalled",
        type=int,
        default=0,
        help="extra subscribers that stop reading (the others' latency should not move)",
    )
    args = ap.parse_args()
    if args.server == "reference" and args.replicas != 1:
        ap.error("--server reference runs one process")
    print(
        f"fan-out: {args.server}, {args.replicas} replica(s), {args.subscribers} subscribers, "
        f"{args.rate:g} events/s for {args.seconds:g} s "
        f"(target {args.subscribers * args.rate:,.0f} deliveries/s), {args.runs} runs"
    )
    runs = [one_run(args) for _ in range(args.runs)]
    for r in runs:
        print(
            f"  run: events={r['events']} deliveries={r['deliveries']}/{r['expected']} losses={r['losses']} "
            f"p50={r['p50']:.2f}ms p99={r['p99']:.2f}ms cpu={r['cpu_us']:.1f}us/delivery "
            f"(kernel {r['sys_share'] * 100:.0f}%) load generator {r['client_cpu_us']:.1f}us/delivery "
            f"host steal={r['steal'] * 100:.1f}%"
        )
    print(f"deliveries/s      {summary([r['rate'] for r in runs])}")
    print(f"losses            {sum(r['losses'] for r in runs)}")
    print(f"latency p50 ms    {summary([r['p50'] for r in runs])}")
    print(f"latency p99 ms    {summary([r['p99'] for r in runs])}")
    print(f"server CPU us/delivery {summary([r['cpu_us'] for r in runs])}")
    if args.stalled:
        print(
            f"stalled subscribers disconnected by the server: {[r['stalled_closed'] for r in runs]} "
            f"of {args.stalled} per run"
        )


if __name__ == "__main__":
    main()
