"""Traces, with OpenTelemetry's SDK keeping the spans in memory: a call, the run it starts (its steps, model calls
and tool call), its transactions, and the deliveries of its events by another replica (PostgreSQL + Redis) form
one trace; spans carry ids, never what was typed; JSON log lines carry the trace id; and tracing stays off
unless the OTEL_* variables ask for it."""

from __future__ import annotations

import http.server
import threading

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from server import tracing
from tests.engine.engine_helpers import FAST, server_tool, subscribe, wait_for
from tests.testkit import json_log

SECRET_TEXT = "a question nobody else should read"


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    yield exporter
    tracing.configure(None)
    provider.shutdown()


@pytest.fixture
def json_log_lines():
    with json_log("server.tracing") as (_logger, lines):
        yield lines


async def test_one_run_across_two_replicas_is_one_trace(pg_url, server_factory, redis_url, spans, json_log_lines):
    a = await server_factory(pg_url, users=("alice",), bus_url=redis_url, **FAST)
    b = await server_factory(pg_url, users=(), tokens=a.tokens, bus_url=redis_url, **FAST)
    async with a.client() as on_a, b.client() as on_b:
        sid = (await on_a.mutation("session.create", {"tools": [server_tool("calculator")]}))["id"]
        watched = await subscribe(on_b, sid)  # only replica b delivers this session's events
        spans.clear()
        content = f'/tool calculator {{"expression": "6*7"}}\n{SECRET_TEXT}'
        await on_a.mutation("message.send", {"sessionId": sid, "content": content})
        await watched.until(lambda e: e["type"] == "run-finished")
        run_id = watched.of("run-finished")[0]["runId"]

    async def run_span_ended() -> bool:  # the loop ends the run's span after its last commit
        return any(s.name == "run" for s in spans.get_finished_spans())

    await wait_for(run_span_ended)
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}

    (send,) = [s for s in finished if s.name == "rpc message.send"]
    trace_id = send.context.trace_id
    assert send.attributes["chatsync.session_id"] == sid and send.attributes["chatsync.procedure"] == "message.send"

    def parent(span):
        return by_id.get(span.parent.span_id) if span.parent is not None else None

    (run,) = [s for s in finished if s.name == "run"]
    assert parent(run) is send and run.attributes["chatsync.run_id"] == run_id
    steps = [s for s in finished if s.name == "step"]
    assert len(steps) == 2 and all(parent(s) is run for s in steps)  # the tool call, then the answer
    requests = [s for s in finished if s.name == "provider request"]
    assert len(requests) == 2 and {parent(s).name for s in requests} == {"step"}
    assert {s.attributes["chatsync.provider"] for s in requests} == {"echo"}
    (tool,) = [s for s in finished if s.name == "tool call"]
    assert parent(tool) is run and tool.attributes["chatsync.tool"] == "calculator"
    writes = [s for s in finished if s.name == "db write" and s.context.trace_id == trace_id]
    assert len(writes) >= 4 and {parent(s).name for s in writes} >= {"rpc message.send", "step", "tool call"}

    # replica b delivered the run's events, continuing the trace carried over Redis
    delivered = [s for s in finished if s.name == "deliver" and s.attributes["chatsync.session_id"] == sid]
    assert delivered and all(s.context.trace_id == trace_id for s in delivered)
    assert all(s.parent is not None and s.parent.is_remote for s in delivered)
    assert {parent(s).name for s in delivered} & {"step", "run", "tool call"}

    # one trace, and what was typed is in no span
    about = [s for s in finished if (s.attributes or {}).get("chatsync.session_id") == sid]
    assert len(about) >= 8 and all(s.context.trace_id == trace_id for s in about)
    for s in finished:
        for value in (s.attributes or {}).values():
            assert SECRET_TEXT not in str(value) and "6*7" not in str(value)

    lines = json_log_lines()
    (started,) = [line for line in lines if line["message"] == "run started" and line.get("run_id") == run_id]
    assert started["session_id"] == sid and started["trace_id"] == f"{trace_id:032x}"


async def test_off_unless_configured(server_factory, sqlite_url, monkeypatch):
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert not tracing.wanted_by_env() and not tracing.configure_from_env() and not tracing.enabled()
    assert tracing.wanted_by_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing.wanted_by_env({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing.wanted_by_env({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"})
    assert not tracing.wanted_by_env({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"})
    live = await server_factory(sqlite_url, users=("alice",), **FAST)
    async with live.client() as c:
        sid = (await c.mutation("session.create", {}))["id"]
        await c.mutation("message.send", {"sessionId": sid, "content": "hello"})
    assert not tracing.enabled() and tracing.current_ids() is None and tracing.traceparent() is None


def test_configured_from_env_exports_spans_over_otlp(monkeypatch):
    """``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``: the SDK made from the environment sends the spans to that collector
    (OTLP over HTTP; here a listener on loopback that keeps what it is sent)."""
    received: list[bytes] = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers["content-length"])))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    collector = http.server.HTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{collector.server_port}/v1/traces")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "chatsync-test")
    try:
        assert tracing.configure_from_env() and tracing.enabled()
        with tracing.span("rpc session.get", session_id="s-1"):
            assert tracing.current_ids() is not None
        tracing.shutdown()  # flushes the batch
    finally:
        tracing.shutdown()
        collector.shutdown()
        thread.join()
        collector.server_close()
    assert not tracing.enabled()
    body = b"".join(received)
    assert b"rpc session.get" in body and b"chatsync.session_id" in body and b"s-1" in body and b"chatsync-test" in body
