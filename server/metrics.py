"""The process's Prometheus metrics (``GET /metrics``), made with ``prometheus_client``.

Every series is declared here, with its buckets; code that does the work updates them with one call per
fan-out, per token batch, per transaction or per call — never once per subscriber (fan-out is the hot path).
Gauges that describe state (connections, subscriptions, runs) are read when scraped
(``server.http.admin.api``), so they cost nothing in between. ``docs/operations.md`` lists every series.

Multi-process: when ``PROMETHEUS_MULTIPROC_DIR`` names a directory (several worker processes behind one
port), ``prometheus_client`` keeps counters and histograms in files there and :func:`exposition` sums every
process's; the gauges read at scrape time, the fan-out's series (:class:`FanOutSeries`) and ``process_*`` are
then the answering process's.
Without it (the default: one process per replica) everything is this process's and Prometheus sums replicas.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric
from prometheus_client.process_collector import ProcessCollector

PROCESS_START = time.time()

# The ``*_created`` companions of counters and histograms double the output for a value Prometheus ignores.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

REGISTRY = CollectorRegistry(auto_describe=True)
PROCESS = ProcessCollector(registry=None)  # process_cpu_seconds_total, process_resident_memory_bytes, ...


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or None


# --- buckets (seconds unless said otherwise), chosen per series: docs/operations.md says why ---------------

RPC_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
DELIVERY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
QUEUE_WAIT_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
FIRST_TOKEN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 60.0)
RUN_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
CATCH_UP_EVENT_BUCKETS = (0, 1, 5, 10, 50, 100, 500, 1000, 5000, 10000)  # events, not seconds
CATCH_UP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
DB_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
POOL_WAIT_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0)
BUS_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
TOOL_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

# --- counters kept from the hand-written exposition (same names) ---------------------------------------------

DURABLE_EVENTS = Counter(
    "chatsync_durable_events", "Durable events committed by this process, by type.", ["type"], registry=REGISTRY
)
SLOW_CONSUMER_CLOSES = Counter(
    "chatsync_slow_consumer_closes",
    "Connections closed with code 4000 (SSE streams ended) because they did not read fast enough.",
    registry=REGISTRY,
)
HTTP_CLOSES = Counter(
    "chatsync_http_closes",
    "HTTP connections the server closed on its own: header-timeout, body-timeout, send-timeout, "
    "drain-limit, evicted (to make room for a new one), refused (no room).",
    ["reason"],
    registry=REGISTRY,
)
BUS_RECONNECTS = Counter(
    "chatsync_bus_reconnects", "Times the bus listener reconnected after an error.", registry=REGISTRY
)

# --- latency histograms -----------------------------------------------------------------------------------

RPC_DURATION = Histogram(
    "chatsync_rpc_duration_seconds",
    "Queries and mutations, from the parsed call to the result, by procedure and outcome (ok or the error code).",
    ["procedure", "outcome"],
    buckets=RPC_BUCKETS,
    registry=REGISTRY,
)
QUEUE_WAIT = Histogram(
    "chatsync_queue_wait_seconds",
    "How long a queued message waited, from enqueued to sent.",
    buckets=QUEUE_WAIT_BUCKETS,
    registry=REGISTRY,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "chatsync_time_to_first_token_seconds",
    "From a model call to its first streamed text or tool call, by provider and model.",
    ["provider", "model"],
    buckets=FIRST_TOKEN_BUCKETS,
    registry=REGISTRY,
)
RUN_DURATION = Histogram(
    "chatsync_run_duration_seconds",
    "Runs from start to end (finished, failed or aborted), by provider, model and outcome.",
    ["provider", "model", "outcome"],
    buckets=RUN_BUCKETS,
    registry=REGISTRY,
)
PROVIDER_ERRORS = Counter(
    "chatsync_provider_errors",
    "Model calls that ended with an error, by provider and error code (rate_limited, timeout, ...).",
    ["provider", "code"],
    registry=REGISTRY,
)
TOOL_DURATION = Histogram(
    "chatsync_tool_duration_seconds",
    "Server tool calls, by tool and outcome (ok, error, denied, unknown-tool or cancelled).",
    ["tool", "outcome"],
    buckets=TOOL_BUCKETS,
    registry=REGISTRY,
)
CATCH_UP_EVENTS = Histogram(
    "chatsync_resume_catchup_events",
    "Events read from the log to bring a subscription up to date (its first catch-up), per subscription.",
    buckets=CATCH_UP_EVENT_BUCKETS,
    registry=REGISTRY,
)
CATCH_UP_DURATION = Histogram(
    "chatsync_resume_catchup_seconds",
    "How long a subscription's first catch-up from the log took.",
    buckets=CATCH_UP_BUCKETS,
    registry=REGISTRY,
)
DB_TRANSACTION = Histogram(
    "chatsync_db_transaction_seconds",
    "Database transactions from begin to commit or rollback, by kind (read or write).",
    ["kind"],
    buckets=DB_BUCKETS,
    registry=REGISTRY,
)
DB_POOL_WAIT = Histogram(
    "chatsync_db_pool_wait_seconds",
    "Waiting for a database connection (the pool, and on SQLite this process's one writer), by kind.",
    ["kind"],
    buckets=POOL_WAIT_BUCKETS,
    registry=REGISTRY,
)
BUS_PUBLISH = Histogram(
    "chatsync_bus_publish_seconds",
    "Publishing a committed batch of events on the bus (a Redis round trip; in-process: scheduling).",
    buckets=BUS_BUCKETS,
    registry=REGISTRY,
)
CONNECTIONS_OPENED = Counter(
    "chatsync_connections_opened",
    "Client connections accepted, by transport (ws, sse).",
    ["transport"],
    registry=REGISTRY,
)
CONNECTIONS_CLOSED = Counter(
    "chatsync_connections_closed",
    "Client connections ended, by transport and close code (WebSocket: the code the server closed with, or "
    "client; SSE: completed, client, or the error code the stream ended with).",
    ["transport", "code"],
    registry=REGISTRY,
)
UPLOADS = Counter(
    "chatsync_uploads",
    "File uploads (POST /files), by outcome: stored, or the error code (PAYLOAD_TOO_LARGE, ...).",
    ["outcome"],
    registry=REGISTRY,
)


# --- helpers the hot paths call ------------------------------------------------------------------------------


class FanOutSeries:
    """The two series of the fan-out, the hottest path (one update per fan-out, every token of every stream):
    kept in plain numbers — no lock, one bisect — and turned into ``chatsync_fanout_deliveries_total`` and
    ``chatsync_delivery_latency_seconds`` when scraped. Updated and read on the event loop's thread only."""

    def __init__(self) -> None:
        self.deliveries = 0
        self.bounds = DELIVERY_BUCKETS
        # per kind: [count per bucket (the last is +Inf)], sum
        self.counts = {"durable": [0] * (len(DELIVERY_BUCKETS) + 1), "delta": [0] * (len(DELIVERY_BUCKETS) + 1)}
        self.sums = {"durable": 0.0, "delta": 0.0}

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        yield CounterMetricFamily(
            "chatsync_fanout_deliveries",
            "Events handed to this process's subscribers (one event to one subscriber counts one).",
            value=self.deliveries,
        )
        latency = HistogramMetricFamily(
            "chatsync_delivery_latency_seconds",
            "From the commit (durable) or the publish (delta) of an event to its frames written to this "
            "process's subscribers: one observation per fan-out.",
            labels=["kind"],
        )
        for kind, counts in self.counts.items():
            cumulative, buckets = 0, []
            for bound, n in zip((*map(repr, self.bounds), "+Inf"), counts):
                cumulative += n
                buckets.append((bound, cumulative))
            latency.add_metric([kind], buckets, self.sums[kind])
        yield latency


FAN_OUT = FanOutSeries()
REGISTRY.register(FAN_OUT)


def delivered(published_at: float, ephemeral: bool, deliveries: int) -> None:
    """One fan-out wrote ``deliveries`` frames; its batch was published at wall-clock ``published_at``."""
    series = FAN_OUT
    series.deliveries += deliveries
    if published_at:
        kind = "delta" if ephemeral else "durable"
        took = time.time() - published_at
        if took < 0.0:
            took = 0.0
        series.counts[kind][bisect.bisect_left(series.bounds, took)] += 1
        series.sums[kind] += took


_EVENT_CHILDREN: dict[str, Any] = {}


def count_durable(types: Iterable[str]) -> None:
    """Count committed durable events by type (children bound once per type: no label lookup per event)."""
    children = _EVENT_CHILDREN
    for t in types:
        child = children.get(t)
        if child is None:
            child = children[t] = DURABLE_EVENTS.labels(type=t)
        child.inc()


def caught_up(events: int, seconds: float) -> None:
    CATCH_UP_EVENTS.observe(events)
    CATCH_UP_DURATION.observe(seconds)


def queue_waited(enqueued_ms: int) -> None:
    QUEUE_WAIT.observe(max(0.0, time.time() - enqueued_ms / 1000))


def run_ended(provider: str, model: str, outcome: str, started: datetime | None, ended: datetime) -> None:
    if started is not None:
        RUN_DURATION.labels(provider, model, outcome).observe(max(0.0, (ended - started).total_seconds()))


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    """This process's value of one sample (tests, and what the admin page shows); 0 when never set."""
    value = REGISTRY.get_sample_value(name, labels or {})
    return 0.0 if value is None else value


# --- exposition ---------------------------------------------------------------------------------------------


class _Scraped:
    """What one scrape collects: the library's series (this process's, or every process's in multi-process
    mode), the gauges the app reads now, and the process's own."""

    def __init__(self, extra: Iterable[Metric]) -> None:
        self.extra = extra

    def collect(self) -> Iterator[Metric]:
        directory = multiprocess_dir()
        if directory is None:
            yield from REGISTRY.collect()
        else:
            from prometheus_client import multiprocess

            combined = CollectorRegistry()
            multiprocess.MultiProcessCollector(combined, path=directory)  # type: ignore[no-untyped-call]
            yield from combined.collect()
            yield from FAN_OUT.collect()  # this process's
        yield from self.extra
        yield from PROCESS.collect()


def exposition(extra: Iterable[Metric] = ()) -> bytes:
    """Prometheus text format 0.0.4: every series plus ``extra`` (metric families built at scrape time)."""
    return prometheus_client.generate_latest(_Scraped(extra))


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # what generate_latest writes


def gauge(name: str, help_text: str, value: float, labels: dict[str, str] | None = None) -> Metric:
    """A gauge family with one sample, read at scrape time."""
    family = prometheus_client.core.GaugeMetricFamily(name, help_text, labels=list(labels or {}))
    family.add_metric(list((labels or {}).values()), value)
    return family
