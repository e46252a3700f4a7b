"""Two devices of one user, each on its own replica (PostgreSQL + Redis): presence and drafts travel between
replicas, and a device whose replica dies without a word drops out once its entry expires."""

from __future__ import annotations

from devices_kit import others, until
from scenario_kit import exchange_link

from chatsync_client import TrpcClient
from server.services.auth import AuthService
from server.store.db import Database


async def _second_device(cluster, name: str) -> str:
    async with Database(cluster.database_url) as db:
        return await AuthService(db).create_token("alice", name)


async def test_presence_and_drafts_cross_replicas(cluster_factory):
    cluster = await cluster_factory(2)
    a, b = cluster.urls
    phone_token = await _second_device(cluster, "phone")
    async with TrpcClient(a, cluster.tokens["alice"]) as laptop, TrpcClient(b, phone_token) as phone:
        sid = (await laptop.mutation("session.create", {"queuePaused": True}))["id"]
        on_laptop = await laptop.subscribe("presence.watch", {"sessionId": sid})
        await until(on_laptop, lambda i: others(i) == [])

        await phone.mutation("presence.update", {"sessionId": sid, "visible": True, "focused": True})
        seen = await until(on_laptop, lambda i: bool(others(i)))
        assert others(seen)[0]["deviceName"] == "phone" and others(seen)[0]["visible"]
        await phone.mutation("presence.update", {"sessionId": sid, "visible": True, "focused": True, "typing": True})
        await until(on_laptop, lambda i: bool(others(i)) and others(i)[0]["typing"])

        # A draft typed on the phone (replica b) is offered on the laptop (replica a), then cleared on both.
        await phone.mutation("draft.save", {"sessionId": sid, "text": "from the phone", "baseVersion": 0})
        offered = await until(on_laptop, lambda i: i.get("type") == "draft")
        assert offered["draft"]["text"] == "from the phone" and offered["draft"]["deviceName"] == "phone"
        await laptop.mutation("message.enqueueMessage", {"sessionId": sid, "content": "from the phone"})
        assert (await laptop.mutation("draft.clear", {"sessionId": sid, "baseVersion": 1}))["saved"]
        assert (await phone.query("draft.get", {"sessionId": sid}))["text"] == ""

        await phone.mutation("presence.update", {"sessionId": sid, "visible": False})
        await until(on_laptop, lambda i: bool(others(i)) and not others(i)[0]["visible"])
        await phone.close()
        await until(on_laptop, lambda i: others(i) == [])


async def test_a_device_whose_replica_dies_drops_out_when_its_entry_expires(cluster_factory):
    # A short TTL, so the test waits seconds, not the default 20.
    cluster = await cluster_factory(2, CHATSYNC_PRESENCE_TTL_SECONDS="2")
    a, b = cluster.urls
    phone_token = await _second_device(cluster, "phone")
    async with TrpcClient(a, cluster.tokens["alice"]) as laptop:
        sid = (await laptop.mutation("session.create", {}))["id"]
        on_laptop = await laptop.subscribe("presence.watch", {"sessionId": sid})
        await until(on_laptop, lambda i: others(i) == [])
        phone = TrpcClient(b, phone_token)
        await phone.connect()
        await phone.mutation("presence.update", {"sessionId": sid, "visible": True})
        await until(on_laptop, lambda i: bool(others(i)))
        # The phone's replica is killed: nobody says the phone left. Its entry expires (TTL 2 s) and the laptop's
        # replica, which reads the sets it watches every TTL/2, tells the laptop.
        cluster.replicas[1].kill()
        await until(on_laptop, lambda i: others(i) == [], timeout=30)
        await phone.close()


async def test_unread_is_cleared_on_every_replica_by_a_look_on_one(cluster_factory):
    cluster = await cluster_factory(2, CHATSYNC_ECHO_DELAY="0.001")
    a, b = cluster.urls
    phone_token = await _second_device(cluster, "phone")
    async with TrpcClient(a, cluster.tokens["alice"]) as laptop, TrpcClient(b, phone_token) as phone:
        sid = (await laptop.mutation("session.create", {}))["id"]
        feeds = []
        for device in (laptop, phone):
            listed = await device.query("session.list", {})
            feeds.append(await device.subscribe("session.feed", {"lastEventId": listed["feedEventId"]}))
        await laptop.mutation("message.send", {"sessionId": sid, "content": "hello"})
        for feed in feeds:
            await until(feed, lambda i: i["type"] == "session-updated" and i["session"]["unread"])
        await phone.mutation("presence.update", {"sessionId": sid, "visible": True})
        for feed in feeds:
            await until(feed, lambda i: i["type"] == "session-updated" and not i["session"]["unread"])
        # While the phone (replica b) has it in view, an answer run on replica a marks nothing unread.
        await laptop.mutation("message.send", {"sessionId": sid, "content": "again"})
        item = await until(feeds[0], lambda i: i["type"] == "session-updated" and i["session"]["status"] == "idle")
        assert item["session"]["unread"] is False


async def test_the_device_list_is_live_across_replicas(cluster_factory):
    """``auth.watchDevices`` on replica a follows what happens on replica b: a link made, that link spent (the
    new device under the name the link was made with, not the one its browser offered), a rename, a revoke."""
    cluster = await cluster_factory(2)
    a, b = cluster.urls
    async with TrpcClient(a, cluster.tokens["alice"]) as laptop, TrpcClient(b, cluster.tokens["alice"]) as other:
        watch = await laptop.subscribe("auth.watchDevices")
        first = await until(watch, lambda i: True)
        assert [d["current"] for d in first["devices"]] == [True] and first["links"] == []

        link = await other.mutation("auth.createLink", {"deviceName": "kitchen tablet"})
        listed = await until(watch, lambda i: bool(i["links"]))
        assert [x["id"] for x in listed["links"]] == [link["id"]]

        signed_in = await exchange_link(b, link["code"], "Chrome on Linux")
        assert signed_in.status_code == 200, signed_in.text
        added = await until(watch, lambda i: len(i["devices"]) == 2 and not i["links"])
        tablet = next(d for d in added["devices"] if not d["current"])
        assert tablet["name"] == "kitchen tablet"

        await other.mutation("auth.renameDevice", {"deviceId": tablet["id"], "name": "hall tablet"})
        await until(watch, lambda i: "hall tablet" in [d["name"] for d in i["devices"]])
        await other.mutation("auth.revokeDevice", {"deviceId": tablet["id"]})
        gone = await until(watch, lambda i: len(i["devices"]) == 1)
        assert gone["devices"][0]["current"]
