"""Counters this process keeps for ``GET /metrics``, and the Prometheus text format they are served in.

Counters are plain integers bumped where the work happens (one addition per fan-out, not per delivery, on
the hot path) and live for the process, as Prometheus expects: a restart resets them and ``rate()`` copes.
Gauges (connections, subscriptions, runs, memory) are read when scraped, so they cost nothing in between.
Everything is per process; Prometheus scrapes each replica and sums.
"""

from __future__ import annotations

import os
import resource
import time
from collections import Counter
from collections.abc import Iterable, Mapping

PROCESS_START = time.time()


class Counters:
    """The process's counters. ``events`` is keyed by durable event type (``run-finished``, ...)."""

    __slots__ = ("deliveries", "events", "http_closes", "slow_consumer_closes")

    def __init__(self) -> None:
        self.events: Counter[str] = Counter()
        self.deliveries = 0  # events written to subscribers (one event to one subscriber = 1)
        self.slow_consumer_closes = 0  # connections closed with 4000 because their buffer was full
        # HTTP connections the server closed on its own, by why (``rpc/uvicorn_http.py``): header-timeout,
        # body-timeout, send-timeout, drain-limit, evicted (to make room), refused (no room).
        self.http_closes: Counter[str] = Counter()


COUNTERS = Counters()

Sample = tuple[Mapping[str, str], float]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items())) + "}"


def render(families: Iterable[tuple[str, str, str, Iterable[Sample]]]) -> str:
    """Prometheus text exposition format 0.0.4: ``(name, type, help, [(labels, value), ...])`` per family."""
    out: list[str] = []
    for name, kind, help_text, samples in families:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            number = repr(float(value)) if isinstance(value, float) and not value.is_integer() else str(int(value))
            out.append(f"{name}{_labels(labels)} {number}")
    return "\n".join(out) + "\n"


def process_families() -> list[tuple[str, str, str, list[Sample]]]:
    """The standard ``process_*`` metrics, read from the kernel."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    rss = 0
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        rss = usage.ru_maxrss * 1024
    try:
        fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        fds = 0
    return [
        (
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time spent, in seconds.",
            [({}, usage.ru_utime + usage.ru_stime)],
        ),
        ("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", [({}, rss)]),
        ("process_open_fds", "gauge", "Number of open file descriptors.", [({}, fds)]),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since the Unix epoch, in seconds.",
            [({}, PROCESS_START)],
        ),
    ]
