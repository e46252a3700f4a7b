"""Admin inspection on two replicas (PostgreSQL + Redis): the database's view (sessions, lease) is the same from
either replica; live state (running loops, subscribers) is the answering replica's, and it says which it is."""

from __future__ import annotations

import asyncio

import httpx

from chatsync_client import TrpcClient
from server.services.auth import AuthService
from server.store.db import Database


async def test_admin_sees_the_run_and_its_owner_from_both_replicas(cluster_factory):
    cluster = await cluster_factory(2, CHATSYNC_ECHO_DELAY="0.05")
    async with Database(cluster.database_url) as db:
        _admin, admin_token = await AuthService(db).create_user("root", admin=True)
    headers = {"Authorization": f"Bearer {admin_token}"}
    a, b = cluster.urls

    async with (
        TrpcClient(a, cluster.tokens["alice"]) as alice_a,
        TrpcClient(b, cluster.tokens["alice"]) as alice_b,
        httpx.AsyncClient(headers=headers) as http,
    ):
        sid = (await alice_a.mutation("session.create", {"title": "long answer"}))["id"]
        sub = await alice_b.subscribe("session.events", {"sessionId": sid})
        await sub.wait_started()
        await alice_a.mutation("message.send", {"sessionId": sid, "content": " ".join(["word"] * 200)})

        async def running_on(url: str) -> list[str]:
            return (await http.get(url + "/admin/api/stats")).json()["replica"]["runningSessions"]

        for _ in range(200):
            listed = [
                (await http.get(url + "/admin/api/sessions", params={"status": "running"})).json()["items"]
                for url in (a, b)
            ]
            if listed[0] and listed[1] and (sid in await running_on(a) or sid in await running_on(b)):
                break
            await asyncio.sleep(0.05)
        assert [s["id"] for s in listed[0]] == [s["id"] for s in listed[1]] == [sid]
        lease = listed[0][0]["lease"]
        other = listed[1][0]["lease"]  # read a moment later: the heartbeat may have renewed it since
        assert lease["live"] is True and (lease["owner"], lease["runId"]) == (other["owner"], other["runId"])

        stats = {url: (await http.get(url + "/admin/api/stats")).json()["replica"] for url in (a, b)}
        owner = [url for url in (a, b) if sid in stats[url]["runningSessions"]]
        assert len(owner) == 1, stats  # exactly one replica runs it, and the lease names that one
        assert stats[owner[0]]["id"] == lease["owner"]
        assert stats[a]["id"] != stats[b]["id"] and stats[a]["bus"] == "redis"

        details = {url: (await http.get(f"{url}/admin/api/sessions/{sid}")).json() for url in (a, b)}
        assert details[a]["lease"]["owner"] == details[b]["lease"]["owner"] == lease["owner"]
        assert details[b]["connectedClients"]["replica"] == stats[b]["id"]
        assert [c["userName"] for c in details[b]["connectedClients"]["clients"]] == ["alice"]
        assert details[a]["connectedClients"]["clients"] == []  # alice subscribed on the other replica
        await alice_a.mutation("run.abort", {"sessionId": sid})
