"""Admin inspection over HTTP (/admin/api/*, /admin, /metrics) on a real server: who may read what, paging and
filters, a session's detail with the clients subscribed to it, the event log, totals, and the metrics."""

import asyncio
import re

import httpx
import pytest

from tests.testkit import collect


def bearer(live, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {live.tokens[user]}"}


async def get(live, path: str, user: str | None = "admin", **params):
    headers = bearer(live, user) if user else {}
    async with httpx.AsyncClient(base_url=live.url) as http:
        return await http.get(path, headers=headers, params=params)


async def make_sessions(live) -> dict[str, list[str]]:
    """alice: 3 sessions (one with a paused queue of 2), bob: 1."""
    ids: dict[str, list[str]] = {"alice": [], "bob": []}
    async with live.client("alice") as c:
        for i in range(3):
            s = await c.mutation("session.create", {"title": f"alice {i}", "queuePaused": True})
            ids["alice"].append(s["id"])
        for text in ("one", "two"):
            await c.mutation("message.enqueueMessage", {"sessionId": ids["alice"][0], "content": text})
    async with live.client("bob") as c:
        ids["bob"].append((await c.mutation("session.create", {"title": "bob's"}))["id"])
    return ids


@pytest.mark.parametrize(
    "path", ["/admin/api/sessions", "/admin/api/stats", "/admin/api/sessions/x", "/admin/api/sessions/x/events"]
)
async def test_only_admins_get_in(live, path):
    assert (await get(live, path, None)).status_code == 401
    async with httpx.AsyncClient(base_url=live.url) as http:
        wrong = await http.get(path, headers={"Authorization": "Bearer cs_not-a-token"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "UNAUTHORIZED"
    forbidden = await get(live, path, "alice")
    assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "FORBIDDEN"


@pytest.fixture
async def any_db_live(db_url, server_factory):
    """The same users as ``live``, on SQLite and on PostgreSQL (the admin queries are plain SQL on both)."""
    return await server_factory(db_url, users=("alice", "bob", "admin"))


async def test_sessions_of_every_user_with_filters_and_pages(any_db_live):
    live = any_db_live
    ids = await make_sessions(live)
    everything = (await get(live, "/admin/api/sessions")).json()
    assert [s["id"] for s in everything["items"]] == [*reversed(ids["bob"]), *reversed(ids["alice"])]
    assert everything["nextCursor"] is None
    first = next(s for s in everything["items"] if s["id"] == ids["alice"][0])
    assert first["owner"]["name"] == "alice" and first["queueLength"] == 2 and first["queuePaused"] is True
    assert first["lease"] is None and first["title"] == "alice 0"

    by_name = (await get(live, "/admin/api/sessions", owner="bob")).json()["items"]
    by_id = (await get(live, "/admin/api/sessions", owner=by_name[0]["owner"]["id"])).json()["items"]
    assert [s["id"] for s in by_name] == [s["id"] for s in by_id] == ids["bob"]
    assert (await get(live, "/admin/api/sessions", status="running")).json()["items"] == []
    assert len((await get(live, "/admin/api/sessions", status="idle")).json()["items"]) == 4

    seen, cursor = [], None
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = (await get(live, "/admin/api/sessions", **params)).json()
        seen += [s["id"] for s in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [s["id"] for s in everything["items"]]


@pytest.mark.parametrize(
    "params, message",
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"status": "sleeping"}, "status"),
        ({"cursor": "!!"}, "cursor"),
    ],
)
async def test_bad_parameters_are_400(live, params, message):
    r = await get(live, "/admin/api/sessions", **params)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "BAD_REQUEST" and message in r.json()["error"]["message"].lower()


async def test_session_detail_names_subscribers_and_the_log(live):
    ids = await make_sessions(live)
    sid = ids["alice"][0]
    assert (await get(live, "/admin/api/sessions/no-such-session")).status_code == 404
    async with live.client("bob") as bob_client:
        await bob_client.mutation("session.delete", {"sessionId": ids["bob"][0]})
    assert (await get(live, f"/admin/api/sessions/{ids['bob'][0]}")).status_code == 404

    async with live.client("alice") as c:
        sub = await c.subscribe("session.events", {"sessionId": sid}, last_event_id="0")
        log = await collect(sub, 2)
        detail = (await get(live, f"/admin/api/sessions/{sid}")).json()
        assert detail["owner"]["name"] == "alice"
        assert [q["content"] for q in detail["snapshot"]["queue"]] == ["one", "two"]
        assert detail["eventLog"] == {"oldestRetainedSeq": 1, "lastSeq": 2}
        clients = detail["connectedClients"]
        assert clients["replica"] == live.services.orchestrator.owner
        assert [(x["userName"], x["transport"], x["position"]) for x in clients["clients"]] == [("alice", "ws", "2")]

    events = (await get(live, f"/admin/api/sessions/{sid}/events")).json()
    assert [(e["seq"], e["type"]) for e in events["items"]] == [(int(i), item["type"]) for i, item in log]
    assert events["items"][0]["event"]["message"]["content"] == "one"
    page = (await get(live, f"/admin/api/sessions/{sid}/events", after=1, limit=1)).json()
    assert [e["seq"] for e in page["items"]] == [2] and page["nextAfter"] == 2
    assert (await get(live, f"/admin/api/sessions/{sid}/events", after=-1)).status_code == 400


async def test_stats_count_the_database_and_this_replica(any_db_live):
    live = any_db_live
    await make_sessions(live)
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"title": "watched"}))["id"]
        await c.subscribe("session.events", {"sessionId": sid})
        for _ in range(100):
            stats = (await get(live, "/admin/api/stats")).json()
            if stats["replica"]["subscriptions"] == 1:
                break
            await asyncio.sleep(0.02)
        assert stats["database"]["sessions"] == {"idle": 5}
        assert stats["database"]["queuedMessages"] == 2 and stats["database"]["users"] == 3
        assert stats["replica"]["webSocketConnections"] >= 1 and stats["replica"]["subscribedSessions"] == 1
        assert stats["replica"]["bus"] == "memory"


async def test_metrics_count_events_and_connections(live):
    def sample(text: str, name: str, labels: str = "") -> float:
        m = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.MULTILINE)
        return float(m.group(1)) if m else 0.0

    before = (await get(live, "/metrics", None)).text
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        sub = await c.subscribe("session.events", {"sessionId": sid})
        await sub.wait_started()
        for text in ("a", "b", "c"):
            await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": text})
        await collect(sub, 3)
        r = await get(live, "/metrics", None)
        assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
        after = r.text
    added = '{type="queue-message-added"}'
    assert (
        sample(after, "chatsync_durable_events_total", added) - sample(before, "chatsync_durable_events_total", added)
        == 3
    )
    assert sample(after, "chatsync_fanout_deliveries_total") - sample(before, "chatsync_fanout_deliveries_total") >= 3
    assert sample(after, "chatsync_websocket_connections") >= 1 and sample(after, "chatsync_subscriptions") == 1
    assert sample(after, "process_resident_memory_bytes") > 1e6
    assert "# TYPE chatsync_durable_events_total counter" in after


async def test_metrics_token_when_configured(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("admin",), metrics_token="scrape-me")
    async with httpx.AsyncClient(base_url=live.url) as http:
        assert (await http.get("/metrics")).status_code == 401
        assert (await http.get("/metrics", headers={"Authorization": "Bearer nope"})).status_code == 401
        ok = await http.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert ok.status_code == 200 and "chatsync_build_info" in ok.text


async def test_page_and_openapi(live):
    page = await get(live, "/admin", None)
    assert page.status_code == 200 and "<title>chatsync admin</title>" in page.text
    csp = page.headers["content-security-policy"]
    nonce = re.search(r"'nonce-([^']+)'", csp).group(1)
    assert f'<script nonce="{nonce}">' in page.text and "default-src 'none'" in csp
    assert nonce != re.search(
        r"'nonce-([^']+)'", (await get(live, "/admin", None)).headers["content-security-policy"]
    ).group(1)
    spec = (await get(live, "/admin/api/openapi.json", None)).json()
    assert spec["openapi"].startswith("3.")
    assert set(spec["paths"]) == {
        "/admin/api/sessions",
        "/admin/api/sessions/{session_id}",
        "/admin/api/sessions/{session_id}/events",
        "/admin/api/stats",
    }
