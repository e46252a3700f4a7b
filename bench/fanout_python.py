"""The Python share of fan-out: ns per delivery from the hub to ``transport.write``, with no network.

    .venv/bin/python bench/fanout_python.py [--subscribers 1000] [--events 200] [--runs 5]

Builds the real objects a live subscription uses (``Hub``, ``Delivery``, ``TransportWriter``) over a
transport whose ``write`` only counts, and publishes durable events through the hub. What ``bench/fanout.py``
measures beyond this is the kernel's send path and the durable write. Prints the best and the median run
(warm caches: a lower bound of what one delivery costs the server in Python).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from server.domain.events import EventEnvelope
from server.pubsub.memory import MemoryBus
from server.rpc.uvicorn_ws import TransportWriter
from server.sync.delivery import Delivery
from server.sync.hub import Hub
from server.sync.writer import SubscriptionWriter


class CountingTransport:
    def __init__(self) -> None:
        self.frames = 0

    def write(self, data: bytes) -> None:
        self.frames += 1

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str) -> None:
        return None  # no socket: every frame goes through write()

    def get_write_buffer_size(self) -> int:
        return 0


class Protocol:
    close_sent = False

    def __init__(self) -> None:
        self.transport = CountingTransport()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--subscribers", type=int, default=1000)
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    hub = Hub(MemoryBus())
    protocols = []
    for _ in range(args.subscribers):
        proto = Protocol()
        protocols.append(proto)
        writer = TransportWriter(proto, 1 << 20, lambda: None)
        delivery = Delivery(
            None,
            hub,
            "s",
            0,
            lambda *_: None,
            None,  # type: ignore[arg-type]
            SubscriptionWriter(writer, b'{"id":1'),
        )
        delivery._catching_up = False  # live, as after its catch-up
        delivery._done = asyncio.get_running_loop().create_future()
        await hub.attach(delivery)
    seq, per_run = 0, []
    for _ in range(args.runs):
        start = time.perf_counter()
        for _ in range(args.events):
            seq += 1
            env = EventEnvelope.build("s", seq, "queue-message-added", {"message": {"id": f"q{seq}", "content": "x"}})
            hub._on_message("s", (env,))
        per_run.append((time.perf_counter() - start) / (args.events * args.subscribers) * 1e9)
    assert all(p.transport.frames == seq for p in protocols), "a delivery was lost"
    print(
        f"{args.subscribers} subscribers: best {min(per_run):.0f} ns, median {statistics.median(per_run):.0f} ns "
        f"per delivery (Python, no network)"
    )


if __name__ == "__main__":
    asyncio.run(main())
