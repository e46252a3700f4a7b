"""Streaming overhead: one model answer streamed token by token to 1, 10 and 100 subscribers.

    .venv/bin/python bench/streaming.py [--subscribers 1 10 100] [--tokens 2000] [--full-tokens N]
        [--rate 200] [--runs 3]

The server is a real `chatsync serve` process (SQLite, in-process bus) with one extra provider, ``stamp``:
the echo model's shape (streamed words, ``stop``), but each token is the wall-clock time at which the provider
yielded it, so a subscriber on the same machine measures the latency the server adds between the provider and
the client (stream buffer, ephemeral event, fan-out, WebSocket write, client parse).

Two passes per subscriber count:

* ``full speed``: tokens as fast as the server takes them (``sleep(0)`` between tokens, like a provider
  whose socket always has data). Gives server CPU per delivered delta: the server's whole CPU time for the
  run (including its database writes and the send mutation) divided by deltas x subscribers.
* ``paced``: ``--rate`` tokens per second (a fast real model). Gives latency provider -> client, p50 and p99.

``--server reference`` runs the same passes against ``bench/reference_broadcast.py`` (a bare ``websockets``
server broadcasting the same stamped tokens): run it beside chatsync, minutes apart, to tell the server's cost
from the machine's.

Each paced run also prints the host's steal time (the share of the machine's CPU time its hypervisor took
away). ``--trace`` adds the server's own share of the latency, timed inside the server process: provider ->
start of the fan-out, the fan-out (one ``write()`` per subscriber), and how many tokens had a single
``write()`` call that took over 0.5 ms (the kernel waking a subscriber, or the vCPU not running).

Subscribers are raw WebSocket clients (``bench/wsclient.py``, on uvloop) in ``--procs`` separate processes. Prints
median ± half-range over runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import Server, cpu_seconds, machine_ticks, pct, run_server, steal_share, summary
from server.llm.assemble import TurnAssembler
from server.llm.providers.base import Provider
from server.llm.types import ChatRequest, TurnEvent


class StampProvider(Provider):
    """Streams ``n`` tokens (``n`` = the last user message), each its own emission time in ns.
    The model name is the pace: ``full`` or tokens per second."""

    provider_id = "stamp"

    async def _attempt(self, request: ChatRequest) -> AsyncIterator[TurnEvent]:
        n = int(next(m.content for m in reversed(request.messages) if m.role == "user").split()[0])
        model = request.options.model
        interval = 0.0 if model == "full" else 1.0 / float(model)
        asm = TurnAssembler(self.provider_id)
        start = time.perf_counter()
        for i in range(n):
            if interval:
                delay = start + i * interval - time.perf_counter()
                await asyncio.sleep(max(delay, 0))
            else:
                await asyncio.sleep(0)
            for event in asm.text(f"{time.time_ns()} "):
                yield event
        asm.finish_with("stop")
        asm.set_usage(1, n)
        for event in asm.end():
            yield event


def serve() -> None:
    """``python -m bench.streaming --serve``: chatsync serve with the ``stamp`` provider registered."""
    from server.cli import main
    from server.llm import providers

    providers.register_provider("stamp", "bench.streaming", "StampProvider")
    if os.environ.get("BENCH_CPU_SPLIT"):
        from bench import cpu_split

        cpu_split.install(os.environ["BENCH_CPU_SPLIT"])
    if os.environ.get("BENCH_TRACE_FILE"):
        trace_fan_out(os.environ["BENCH_TRACE_FILE"])
    main(["serve"])


def trace_fan_out(path: str) -> None:
    """Time every text delta's fan-out inside the server; one line per delta:
    ``<ms from provider to fan-out start> <ms in fan-out> <ms of its slowest write()>``."""
    from server.rpc import uvicorn_ws as transport  # the module whose _write_all makes the fan-out's writes
    from server.sync.hub import Hub

    out = open(path, "a", buffering=1)
    writes: list[int] = []
    write_all, on_message = transport._write_all, Hub._on_message

    def timed_write_all(batch):  # type: ignore[no-untyped-def]
        for item in batch:
            t = time.perf_counter_ns()
            write_all([item])
            writes.append(time.perf_counter_ns() - t)

    def timed_fan_out(self, session_id, events):  # type: ignore[no-untyped-def]
        writes.clear()
        start_wall, start = time.time_ns(), time.perf_counter_ns()
        on_message(self, session_id, events)
        took = time.perf_counter_ns() - start
        if events[0].type == "text-delta" and writes:
            stamp = int(orjson.loads(events[0].json)["delta"].split()[0])
            out.write(f"{(start_wall - stamp) / 1e6:.4f} {took / 1e6:.4f} {max(writes) / 1e6:.4f}\n")

    transport._write_all = timed_write_all  # type: ignore[assignment]
    Hub._on_message = timed_fan_out  # type: ignore[method-assign]


def bench_server(trace_file: str | None = None, reference: bool = False) -> contextlib.AbstractContextManager[Server]:
    """A real server process with the ``stamp`` provider registered (or the bare reference server)."""
    if reference:
        return run_server(token="reference", command=("bench/reference_broadcast.py",))
    extra = {"BENCH_TRACE_FILE": trace_file} if trace_file else {}
    return run_server(command=("-m", "bench.streaming", "--serve"), CHATSYNC_SEND_QUEUE_FRAMES="1000000", **extra)


def read_trace(path: str) -> dict:
    """Percentiles of the server-side trace lines written since the file was last truncated."""
    with open(path) as f:
        rows = [tuple(float(x) for x in line.split()) for line in f if line.strip()]
    open(path, "w").close()
    if not rows:
        return {}
    return {
        "to_fan_out": [r[0] for r in rows],
        "fan_out": [r[1] for r in rows],
        "stalled_write": sum(1 for r in rows if r[2] > 0.5) / len(rows),
    }


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process ``pid`` on ``cpus`` only (threads it starts later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), cpus)


def subscriber_proc(
    url: str,
    token: str,
    sid: str,
    count: int,
    ready: mp.Queue,
    results: mp.Queue,  # type: ignore[type-arg]
    cpus: set[int] | None = None,
) -> None:
    """``count`` subscribers on the light client of ``bench/wsclient.py`` (as ``bench/fanout.py``): frames are
    parsed in ``data_received``, so the latency measured is the server's, not a client library's queueing."""
    from bench.wsclient import subscribe_session

    if cpus:
        os.sched_setaffinity(0, cpus)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def one(stats: dict) -> None:
        loop = asyncio.get_running_loop()
        started, finished = loop.create_future(), loop.create_future()
        expected_offset = 0

        def on_text(raw: bytes) -> None:
            nonlocal expected_offset
            now = time.time_ns()
            result = orjson.loads(raw)["result"]
            if result.get("type") == "started":
                started.set_result(None)
                return
            data = result["data"]
            ev = data["data"] if "id" in data and isinstance(data.get("data"), dict) else data
            if ev["type"] == "text-delta":
                stats["deltas"] += 1
                if ev["offset"] != expected_offset:
                    stats["gaps"] += 1
                expected_offset = ev["offset"] + len(ev["delta"])
                stats["lat"].append((now - int(ev["delta"].split()[0])) / 1e6)
            elif ev["type"] == "run-finished" and not finished.done():
                finished.set_result(None)

        ws = await subscribe_session(url, token, sid, on_text)
        await started
        ready.put(1)
        await finished
        assert ws.transport is not None
        ws.transport.close()

    async def main() -> None:
        stats = {"deltas": 0, "gaps": 0, "lat": []}
        await asyncio.gather(*(one(stats) for _ in range(count)))
        results.put(stats)

    asyncio.run(main())


async def _call(url: str, token: str, path: str, inp: dict) -> dict:
    from chatsync_client import TrpcClient

    async with TrpcClient(url, token) as c:
        return await c.mutation(path, inp)


def one_run(
    srv: Server,
    subscribers: int,
    tokens: int,
    pace: str,
    procs: int,
    trace_file: str | None = None,
    pinned: bool = False,
) -> dict:
    sid = asyncio.run(_call(srv.url, srv.token, "session.create", {"provider": "stamp", "model": pace}))["id"]
    ctx = mp.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    nprocs = min(procs, subscribers)
    per = [subscribers // nprocs + (1 if i < subscribers % nprocs else 0) for i in range(nprocs)]
    client_cpus = {1} if pinned else None
    if pinned:
        pin(srv.pid, {0})
    ps = [
        ctx.Process(target=subscriber_proc, args=(srv.url, srv.token, sid, n, ready, results, client_cpus)) for n in per
    ]
    for p in ps:
        p.start()
    for _ in range(subscribers):
        ready.get(timeout=120)
    if trace_file:
        read_trace(trace_file)  # start empty
    cpu0, ticks0 = cpu_seconds(srv.pid), machine_ticks()
    t0 = time.perf_counter()
    asyncio.run(_call(srv.url, srv.token, "message.send", {"sessionId": sid, "content": str(tokens)}))
    stats = [results.get(timeout=300) for _ in ps]
    elapsed = time.perf_counter() - t0
    cpu1, steal = cpu_seconds(srv.pid), steal_share(ticks0, machine_ticks())
    for p in ps:
        p.join(10)
    delivered = sum(s["deltas"] for s in stats)
    lat = [x for s in stats for x in s["lat"]]
    return {
        "delivered": delivered,
        "expected": tokens * subscribers,
        "gaps": sum(s["gaps"] for s in stats),
        "cpu_us": (cpu1 - cpu0) * 1e6 / max(delivered, 1),
        "p50": pct(lat, 50),
        "p99": pct(lat, 99),
        "rate": delivered / elapsed,
        "steal": steal,
        "trace": read_trace(trace_file) if trace_file else {},
    }


def main() -> None:
    if "--serve" in sys.argv:
        serve()
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--subscribers", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument(
        "--full-tokens",
        type=int,
        default=0,
        help="tokens per answer in the full-speed pass (default: --tokens); at ~150,000 deltas/s "
        "2,000 tokens last a tenth of a second, so one scheduler hiccup is the whole p99",
    )
    ap.add_argument("--rate", type=float, default=200, help="tokens per second of the paced pass")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--procs", type=int, default=2, help="subscriber processes")
    ap.add_argument(
        "--pin",
        action="store_true",
        help="server on CPU 0, subscriber processes on CPU 1 (the scheduler then never runs a woken "
        "subscriber in the server's place, nor the server in a subscriber's)",
    )
    ap.add_argument("--trace", action="store_true", help="also time the server's share of the paced latency")
    ap.add_argument(
        "--server",
        choices=("chatsync", "reference"),
        default="chatsync",
        help="reference: bench/reference_broadcast.py, a bare websockets broadcast() of the same tokens "
        "(no run, no database, no stream buffer): the floor on this machine at this hour",
    )
    args = ap.parse_args()
    if args.trace and args.server == "reference":
        ap.error("--trace times chatsync's own fan-out")
    print(
        f"streaming: {args.server}, {args.tokens} tokens per answer ({args.full_tokens or args.tokens} at full "
        f"speed), {args.runs} runs each; median ± half-range"
    )
    trace_file = None
    if args.trace:
        fd, trace_file = tempfile.mkstemp(prefix="chatsync-trace-")
        os.close(fd)
    for n in args.subscribers:
        with bench_server(trace_file, args.server == "reference") as srv:
            full = [
                one_run(srv, n, args.full_tokens or args.tokens, "full", args.procs, pinned=args.pin)
                for _ in range(args.runs)
            ]
            paced = [
                one_run(srv, n, args.tokens, f"{args.rate:g}", args.procs, trace_file, pinned=args.pin)
                for _ in range(args.runs)
            ]
        lost = sum(r["expected"] - r["delivered"] + r["gaps"] for r in full + paced)
        print(
            f"{n:>4} subscribers | full speed: CPU/delivered delta {summary([r['cpu_us'] for r in full])} µs, "
            f"{summary([r['rate'] for r in full])} deltas/s delivered, latency p50 "
            f"{summary([r['p50'] for r in full])} ms p99 {summary([r['p99'] for r in full])} ms"
        )
        print(
            f"     {'':>12} | paced {args.rate:g} tok/s: latency p50 {summary([r['p50'] for r in paced])} ms, "
            f"p99 {summary([r['p99'] for r in paced])} ms, CPU/delivered delta "
            f"{summary([r['cpu_us'] for r in paced])} µs | lost or out of order: {lost}"
        )
        for r in full:
            print(
                f"     {'':>12} | full-speed run: {r['rate']:.0f} deltas/s, CPU/delta {r['cpu_us']:.1f} µs, "
                f"p50 {r['p50']:.2f} ms, p99 {r['p99']:.2f} ms, host steal {r['steal'] * 100:.1f}%"
            )
        for r in paced:
            line = (
                f"     {'':>12} | paced run: p50 {r['p50']:.2f} ms, p99 {r['p99']:.2f} ms, "
                f"host steal {r['steal'] * 100:.1f}%"
            )
            tr = r["trace"]
            if tr:
                line += (
                    f" | in the server: provider -> fan-out p50 {pct(tr['to_fan_out'], 50):.2f} / p99 "
                    f"{pct(tr['to_fan_out'], 99):.2f} ms, fan-out p50 {pct(tr['fan_out'], 50):.2f} / p99 "
                    f"{pct(tr['fan_out'], 99):.2f} ms, tokens with a write() over 0.5 ms "
                    f"{tr['stalled_write'] * 100:.1f}%"
                )
            print(line)
    if trace_file:
        os.unlink(trace_file)


if __name__ == "__main__":
    main()
