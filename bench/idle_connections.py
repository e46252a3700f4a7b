"""Memory per idle, subscribed connection (WebSocket or SSE stream) on one server process.

    .venv/bin/python bench/idle_connections.py [--connections 10000] [--runs 3] [--sessions 100] [--transport sse]

Opens N connections (authenticated with connectionParams, each subscribed to ``session.events`` of one of
``--sessions`` sessions), waits until all are started, and reads the server's RSS from /proc before and
after. Prints KiB per connection (median ± half-range over runs). The server's file-descriptor limit must
exceed N (`ulimit -n`). An SSE stream counts as started at its ``connected`` event (sent as the
subscription starts); the settling pause before the second reading lets the last ones finish.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
import urllib.parse

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import run_server, summary
from bench.wsclient import open_ws
from chatsync_client import TrpcClient


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class SseStream(asyncio.Protocol):
    """A raw ``GET /trpc/session.events`` that reads (and drops) the stream; ``on_text`` sees each chunk."""

    def __init__(self, request: bytes, on_text) -> None:  # type: ignore[no-untyped-def]
        self.request, self.on_text = request, on_text
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.on_text(data)


async def open_sse(url: str, token: str, sid: str, on_text) -> SseStream:  # type: ignore[no-untyped-def]
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.urlencode(
        {
            "input": orjson.dumps({"sessionId": sid}).decode(),
            "connectionParams": orjson.dumps({"token": token}).decode(),
        }
    )
    request = (
        f"GET /trpc/session.events?{query} HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    _t, proto = await asyncio.get_running_loop().create_connection(
        lambda: SseStream(request, on_text), parts.hostname, parts.port
    )
    return proto


async def one_run(n: int, sessions: int, transport: str = "ws") -> tuple[float, float, int]:
    with run_server(CHATSYNC_MAX_CONNECTIONS=str(n + 100)) as srv:
        async with TrpcClient(srv.url, srv.token) as c:
            sids = [(await c.mutation("session.create", {"queuePaused": True}))["id"] for _ in range(sessions)]
        await asyncio.sleep(0.5)
        before = rss_kib(srv.pid)
        started = 0
        all_started = asyncio.Event()
        conns = []

        def on_text(raw: bytes) -> None:
            nonlocal started
            if b'"started"' in raw or b"event: connected" in raw:
                started += 1
                if started == n:
                    all_started.set()

        url = srv.url.replace("http", "ws") + "/trpc?connectionParams=1"
        t0 = time.perf_counter()
        for i in range(n):
            # At most 200 subscriptions in flight: this measures memory, not a reconnect storm.
            while i - started > 200:
                await asyncio.sleep(0.005)
            if transport == "sse":
                conns.append(await open_sse(srv.url, srv.token, sids[i % sessions], on_text))
                continue
            ws = await open_ws(url, on_text)
            ws.send_text(orjson.dumps({"method": "connectionParams", "data": {"token": srv.token}}).decode())
            ws.send_text(
                orjson.dumps(
                    {
                        "id": 1,
                        "method": "subscription",
                        "params": {"path": "session.events", "input": {"sessionId": sids[i % sessions]}},
                    }
                ).decode()
            )
            conns.append(ws)
        deadline = time.perf_counter() + 300
        while not all_started.is_set():
            if time.perf_counter() > deadline:
                raise TimeoutError(f"only {started} of {n} subscriptions started")
            await asyncio.sleep(0.2)
        setup = time.perf_counter() - t0
        await asyncio.sleep(2)  # let the server settle (GC, buffers)
        after = rss_kib(srv.pid)
        for ws in conns:
            ws.transport.close()
        return (after - before) / n, setup, after


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--transport", choices=("ws", "sse"), default="ws")
    args = ap.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(
        f"idle subscribed connections ({args.transport}): {args.connections} on one process, {args.sessions} sessions, "
        f"{args.runs} runs"
    )
    per, setups, totals = [], [], []
    for _ in range(args.runs):
        kib, setup, total = asyncio.run(one_run(args.connections, args.sessions, args.transport))
        per.append(kib)
        setups.append(setup)
        totals.append(total / 1024)
        print(f"  run: {kib:.1f} KiB/connection, server RSS {total / 1024:.0f} MiB, setup {setup:.1f} s")
    print(f"KiB per idle connection  {summary(per)}")
    print(f"server RSS MiB           {summary(totals)}")
    print(f"connect+subscribe time s {summary(setups)}")


if __name__ == "__main__":
    main()
