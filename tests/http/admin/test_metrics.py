"""``/metrics`` after a scripted session (send, queue, tool call, a failing model, an upload, a resume), parsed
with prometheus_client's own parser: every series docs/operations.md lists is exposed, the counts match what
the script did, and every series the Grafana dashboard and the alert rules in deploy/ use exists."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.engine.engine_helpers import FAST, idle, server_tool, subscribe, wait_for

ROOT = Path(__file__).resolve().parents[3]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def documented_series() -> dict[str, str]:
    """The metric families of the table in docs/operations.md ("Metrics"), with their types (a counter's family
    is its name without ``_total``, as the parser names it)."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    out: dict[str, str] = {}
    for row in section.splitlines():
        if row.startswith("| `"):
            cells = [c.strip() for c in row.split("|")]
            for name in re.findall(r"`((?:chatsync|process)_[a-z_]+)`", cells[1]):
                kind = cells[2] or ("counter" if name.endswith("_total") else "gauge")
                out[name.removesuffix("_total") if kind == "counter" else name] = kind
    return out


async def scrape(url: str) -> tuple[Samples, dict[str, str]]:
    async with httpx.AsyncClient(base_url=url) as http:
        r = await http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(r.text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, types


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def added(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


@pytest.fixture
async def server(server_factory, sqlite_url, tmp_path):
    return await server_factory(sqlite_url, users=("alice",), files_url=str(tmp_path / "files"), **FAST)


async def test_scripted_session_shows_in_metrics(server):
    before, _ = await scrape(server.url)
    async with server.client("alice") as c:
        s = (await c.mutation("session.create", {"tools": [server_tool("calculator")], "queuePaused": True}))["id"]
        st = await subscribe(c, s)
        # send: one run, streamed
        await c.mutation("message.send", {"sessionId": s, "content": "hello there"})
        await st.until_type("run-finished", 1)
        # queue: a message waits in the paused queue, then is sent when the queue resumes
        await c.mutation("message.enqueueMessage", {"sessionId": s, "content": "queued words"})
        await c.mutation("message.resumeQueue", {"sessionId": s})
        await st.until_type("run-finished", 2)
        # a server tool call: two steps (the call, then the answer with its result)
        await c.mutation("message.send", {"sessionId": s, "content": '/tool calculator {"expression": "6*7"}'})
        await st.until_type("run-finished", 3)
        # the model fails
        await c.mutation("message.send", {"sessionId": s, "content": "/fail boom"})
        await st.until_type("run-failed", 1)
        last = int((await idle(c, s))["lastEventId"])
        # a call with bad input
        with pytest.raises(Exception):
            await c.mutation("message.send", {"content": "no session"})
        # resume from the third event: the catch-up reads the rest from the log
        mid, _ = await scrape(server.url)
        resumed = await subscribe(c, s, last_event_id="3")
        await resumed.until(lambda e: e.get("type") == "run-failed")
    async with httpx.AsyncClient(base_url=server.url) as http:
        auth = {"authorization": f"Bearer {server.tokens['alice']}"}
        stored = await http.post("/files", files={"file": ("a.txt", b"some text", "text/plain")}, headers=auth)
        refused = await http.post("/files", content=b"not multipart", headers=auth)
        # an SSE subscription the client leaves
        query = {"input": json.dumps({"sessionId": s})}
        async with http.stream("GET", "/trpc/session.events", params=query, headers=auth, timeout=30) as stream:
            assert await anext(stream.aiter_lines()) == "event: connected"
    assert stored.status_code == 200 and refused.status_code == 400

    async def both_closed() -> bool:
        now, _ = await scrape(server.url)
        closed = "chatsync_connections_closed_total"
        return all(added(before, now, closed, transport=t, code="client") >= 1 for t in ("ws", "sse"))

    await wait_for(both_closed)
    after, types = await scrape(server.url)

    # every documented series is exposed, with the type the docs give it
    documented = documented_series()
    assert len(documented) >= 30
    missing = set(documented) - set(types)
    assert not missing, f"documented but not exposed: {sorted(missing)}"
    assert {name: types[name] for name in documented} == documented
    undocumented = {name for name in types if name.startswith("chatsync_")} - set(documented)
    assert not undocumented, f"exposed but not documented: {sorted(undocumented)}"

    def count(name: str, **labels: str) -> float:
        return added(before, after, name + "_count", **labels)

    rpc = "chatsync_rpc_duration_seconds"
    assert count(rpc, procedure="message.send", outcome="ok") == 3
    assert count(rpc, procedure="message.send", outcome="BAD_REQUEST") == 1
    assert count(rpc, procedure="message.enqueueMessage", outcome="ok") == 1
    assert count(rpc, procedure="message.resumeQueue", outcome="ok") == 1
    assert count(rpc, procedure="session.create", outcome="ok") == 1
    events = "chatsync_durable_events_total"
    assert added(before, after, events, type="run-finished") == 3
    assert added(before, after, events, type="run-failed") == 1
    assert added(before, after, events, type="tool-call-result") == 1
    echo = {"provider": "echo", "model": "echo"}
    assert count("chatsync_run_duration_seconds", outcome="finished", **echo) == 3
    assert count("chatsync_run_duration_seconds", outcome="failed", **echo) == 1
    # steps that streamed something: hello, the queued message, the tool call and the answer after it
    assert count("chatsync_time_to_first_token_seconds", **echo) == 4
    assert added(before, after, "chatsync_provider_errors_total", provider="echo", code="echo_failure") == 1
    assert count("chatsync_queue_wait_seconds") == 1
    assert count("chatsync_tool_duration_seconds", tool="calculator", outcome="ok") == 1
    # the resume: one catch-up that read every event after the third
    assert added(mid, after, "chatsync_resume_catchup_events_count") == 1
    assert added(mid, after, "chatsync_resume_catchup_events_sum") == last - 3
    assert added(mid, after, "chatsync_resume_catchup_seconds_count") == 1
    # fan-outs: durable events and streamed deltas each observed, at most once per event batch
    durable = count("chatsync_delivery_latency_seconds", kind="durable")
    deltas = count("chatsync_delivery_latency_seconds", kind="delta")
    assert 0 < durable <= added(before, after, "chatsync_fanout_deliveries_total") and deltas > 0
    assert count("chatsync_bus_publish_seconds") >= durable
    assert count("chatsync_db_transaction_seconds", kind="write") >= 5
    assert count("chatsync_db_pool_wait_seconds", kind="write") >= 5
    assert count("chatsync_db_transaction_seconds", kind="read") >= 1
    assert added(before, after, "chatsync_uploads_total", outcome="stored") == 1
    assert added(before, after, "chatsync_uploads_total", outcome="BAD_REQUEST") == 1
    assert added(before, after, "chatsync_connections_opened_total", transport="ws") == 1
    assert added(before, after, "chatsync_connections_closed_total", transport="ws", code="client") == 1
    assert added(before, after, "chatsync_connections_opened_total", transport="sse") == 1
    assert added(before, after, "chatsync_connections_closed_total", transport="sse", code="client") == 1
    # histograms are consistent: +Inf bucket == count, for every labelled child
    for (name, labels), v in after.items():
        if name.endswith("_count") and types.get(name[: -len("_count")]) == "histogram":
            assert after[(name[: -len("_count")] + "_bucket", labels | {("le", "+Inf")})] == v


def series_used(expr: str) -> set[str]:
    return set(re.findall(r"\b((?:chatsync|process)_[a-z_]+)", expr))


def exposed_names(types: dict[str, str]) -> set[str]:
    """Every sample name a query may use: counters' ``_total``, histograms' ``_bucket``/``_sum``/``_count``."""
    names: set[str] = set()
    for family, kind in types.items():
        if kind == "counter":
            names.add(family + "_total")
        elif kind == "histogram":
            names |= {family + "_bucket", family + "_sum", family + "_count"}
        else:
            names.add(family)
    return names


async def test_dashboard_and_alerts_use_only_exposed_series(server):
    _, types = await scrape(server.url)
    exposed = exposed_names(types)
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus-alerts.yml").read_text())
    alerts = [r for group in rules["groups"] for r in group["rules"]]
    assert len(exprs) >= 8 and len(alerts) >= 4
    for expr in exprs + [r["expr"] for r in alerts]:
        used = series_used(expr)
        assert used, f"no chatsync series in {expr!r}"
        assert used <= exposed, f"{expr!r} uses {sorted(used - exposed)}, which /metrics does not expose"
    for rule in alerts:
        assert rule["alert"] and rule["annotations"]["summary"]
        assert rule["labels"]["severity"] in ("warning", "critical")


def test_several_processes_are_summed_with_a_multiprocess_directory(tmp_path):
    """PROMETHEUS_MULTIPROC_DIR: two processes count and time calls; a third one's scrape sums both."""
    import subprocess
    import sys

    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    work = (
        "from server import metrics\n"
        "metrics.UPLOADS.labels(outcome='stored').inc()\n"
        "metrics.RPC_DURATION.labels('session.get', 'ok').observe(0.003)\n"
        "metrics.delivered(0.0, False, 7)\n"
    )
    for _ in range(2):
        subprocess.run([sys.executable, "-c", work], env=env, check=True, timeout=60)
    scrape = "import sys; from server import metrics; sys.stdout.write(metrics.exposition().decode())"
    text = subprocess.run([sys.executable, "-c", scrape], env=env, check=True, timeout=60, capture_output=True).stdout
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }
    assert value(samples, "chatsync_uploads_total", outcome="stored") == 2
    rpc = {"procedure": "session.get", "outcome": "ok"}
    assert value(samples, "chatsync_rpc_duration_seconds_count", **rpc) == 2
    assert value(samples, "chatsync_rpc_duration_seconds_bucket", le="0.005", **rpc) == 2
    # the fan-out's series are the scraping process's own (it delivered nothing)
    assert value(samples, "chatsync_fanout_deliveries_total") == 0
    assert value(samples, "process_open_fds") > 0
