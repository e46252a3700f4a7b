"""One user's devices on one server (SQLite and PostgreSQL): each sees where the others have a session open
and typing, a draft typed on one is offered on the other and cleared on both when sent, and a session is unread
on every device until one of them looks at it."""

from __future__ import annotations

import asyncio

import pytest
from devices_kit import others, until

from chatsync_client import TrpcClient, TrpcError
from server.services import drafts


async def _phone(md) -> TrpcClient:
    token = await md.services.auth.create_token("alice", "phone")
    return TrpcClient(md.url, token)


async def test_a_device_sees_another_open_type_hide_and_close(md):
    async with md.client("alice") as laptop, await _phone(md) as phone:
        sid = (await laptop.mutation("session.create", {}))["id"]
        watch = await laptop.subscribe("presence.watch", {"sessionId": sid})
        first = await until(watch, lambda i: others(i) is not None)
        assert others(first) == []

        reply = await phone.mutation("presence.update", {"sessionId": sid, "visible": True, "focused": True})
        assert reply["heartbeatSeconds"] < reply["ttlSeconds"]
        seen = await until(watch, lambda i: bool(others(i)))
        assert others(seen) == [
            {
                "deviceId": others(seen)[0]["deviceId"],
                "deviceName": "phone",
                "visible": True,
                "focused": True,
                "typing": False,
                "current": False,
            }
        ]
        await phone.mutation("presence.update", {"sessionId": sid, "visible": True, "focused": True, "typing": True})
        await until(watch, lambda i: bool(others(i)) and others(i)[0]["typing"])
        await phone.mutation("presence.update", {"sessionId": sid, "visible": False})
        await until(watch, lambda i: bool(others(i)) and not others(i)[0]["visible"] and not others(i)[0]["typing"])
        await phone.close()  # the connection closes: its entry goes at once
        await until(watch, lambda i: others(i) == [])


async def test_typing_bursts_are_published_at_most_once_a_second_and_end_on_the_last_state(md):
    async with md.client("alice") as laptop, await _phone(md) as phone:
        sid = (await laptop.mutation("session.create", {}))["id"]
        watch = await laptop.subscribe("presence.watch", {"sessionId": sid})
        await until(watch, lambda i: others(i) == [])
        for n in range(20):
            await phone.mutation("presence.update", {"sessionId": sid, "visible": True, "typing": n % 2 == 0})
        # The burst took far less than the 20 s that 20 publishes would need; the watcher gets the last state
        # (typing stopped) after a handful of items, not one item per update.
        items = [await until(watch, lambda i: others(i) is not None)]
        while others(items[-1]) == [] or others(items[-1])[0]["typing"]:
            items.append(await until(watch, lambda i: others(i) is not None))
        assert len(items) < 20
        assert others(items[-1])[0]["typing"] is False


async def test_presence_is_only_among_the_owners_devices(md):
    async with md.client("alice") as alice, md.client("bob") as bob:
        sid = (await alice.mutation("session.create", {}))["id"]
        with pytest.raises(TrpcError) as err:
            await bob.mutation("presence.update", {"sessionId": sid, "visible": True})
        assert err.value.code == "NOT_FOUND"
        watch = await bob.subscribe("presence.watch", {"sessionId": sid})
        with pytest.raises(TrpcError) as err:
            await watch.next(10)
        assert err.value.code == "NOT_FOUND"
        with pytest.raises(TrpcError) as err:
            await bob.mutation("draft.save", {"sessionId": sid, "text": "x", "baseVersion": 0})
        assert err.value.code == "NOT_FOUND"


async def test_a_draft_follows_to_the_other_device_and_sending_clears_it_on_both(md, monkeypatch):
    # One write a device may make per ten minutes, not per second: the laptop's second save below is refused
    # however long the steps between the two take on a loaded machine.
    monkeypatch.setattr(drafts, "WRITES_PER_SECOND", 1 / 600)
    async with md.client("alice") as laptop, await _phone(md) as phone:
        sid = (await laptop.mutation("session.create", {"queuePaused": True}))["id"]
        on_phone = await phone.subscribe("presence.watch", {"sessionId": sid})
        start = await until(on_phone, lambda i: i.get("type") == "draft")
        assert start["draft"]["version"] == 0 and start["draft"]["text"] == ""

        saved = await laptop.mutation("draft.save", {"sessionId": sid, "text": "half a thought", "baseVersion": 0})
        assert saved["saved"] is True and saved["draft"]["version"] == 1
        offered = await until(on_phone, lambda i: i.get("type") == "draft")
        assert offered["draft"]["text"] == "half a thought"
        assert offered["draft"]["deviceName"] == "first token"
        assert (await phone.query("draft.get", {"sessionId": sid}))["text"] == "half a thought"

        # Saved again within the second: refused, nothing written.
        with pytest.raises(TrpcError) as err:
            await laptop.mutation("draft.save", {"sessionId": sid, "text": "more", "baseVersion": 1})
        assert err.value.code == "TOO_MANY_REQUESTS"
        assert (await phone.query("draft.get", {"sessionId": sid}))["version"] == 1

        # The phone takes it over, types on and sends; the clear (at the version it saw) clears it for both.
        taken = await phone.mutation("draft.save", {"sessionId": sid, "text": "half a thought, done", "baseVersion": 1})
        assert taken["saved"] and taken["draft"]["version"] == 2
        await phone.mutation("message.enqueueMessage", {"sessionId": sid, "content": "half a thought, done"})
        cleared = await phone.mutation("draft.clear", {"sessionId": sid, "baseVersion": 2})
        assert cleared["saved"] and cleared["draft"]["text"] == ""
        gone = await until(on_phone, lambda i: i.get("type") == "draft" and i["draft"]["version"] == 3)
        assert gone["draft"]["text"] == ""
        assert (await laptop.query("draft.get", {"sessionId": sid}))["text"] == ""


async def test_a_stale_device_never_overwrites_a_newer_draft(md):
    async with md.client("alice") as laptop, await _phone(md) as phone:
        sid = (await laptop.mutation("session.create", {}))["id"]
        await laptop.mutation("draft.save", {"sessionId": sid, "text": "laptop's words", "baseVersion": 0})
        await phone.mutation("draft.save", {"sessionId": sid, "text": "phone typed further", "baseVersion": 1})
        # The laptop, which saw version 1, clears after sending something else: the phone's text stays.
        refused = await laptop.mutation("draft.clear", {"sessionId": sid, "baseVersion": 1})
        assert refused["saved"] is False
        assert refused["draft"] == {**refused["draft"], "text": "phone typed further", "version": 2}
        assert (await phone.query("draft.get", {"sessionId": sid}))["text"] == "phone typed further"


async def test_draft_bounds(md):
    async with md.client("alice") as laptop:
        sid = (await laptop.mutation("session.create", {}))["id"]
        too_long = "x" * (md.settings.max_content_chars + 1)
        with pytest.raises(TrpcError) as err:
            await laptop.mutation("draft.save", {"sessionId": sid, "text": too_long, "baseVersion": 0})
        assert err.value.code == "PAYLOAD_TOO_LARGE"
        with pytest.raises(TrpcError) as err:
            await laptop.mutation(
                "draft.save", {"sessionId": sid, "text": "x", "baseVersion": 0, "attachments": [{"fileId": "nope"}]}
            )
        assert err.value.code == "NOT_FOUND"
        assert (await laptop.query("draft.get", {"sessionId": sid}))["version"] == 0


def _unread(listed: dict, sid: str) -> bool:
    return next(i for i in listed["items"] if i["id"] == sid)["unread"]


async def test_unread_everywhere_until_one_device_looks(md):
    async with md.client("alice") as laptop, await _phone(md) as phone:
        sid = (await laptop.mutation("session.create", {}))["id"]
        feeds = []
        for device in (laptop, phone):
            listed = await device.query("session.list", {})
            feeds.append(await device.subscribe("session.feed", {"lastEventId": listed["feedEventId"]}))
        # Nobody has it open: the answer leaves it unread on both devices' lists.
        await laptop.mutation("message.send", {"sessionId": sid, "content": "hello"})
        for feed in feeds:
            item = await until(feed, lambda i: i["type"] == "session-updated" and i["session"]["unread"])
            assert item["session"]["attention"] == "answer"
        assert _unread(await phone.query("session.list", {}), sid)
        # The phone opens it: read on both.
        await phone.mutation("presence.update", {"sessionId": sid, "visible": True})
        for feed in feeds:
            await until(feed, lambda i: i["type"] == "session-updated" and not i["session"]["unread"])
        assert not _unread(await laptop.query("session.list", {}), sid)


async def test_an_answer_while_a_device_has_the_session_visible_marks_nothing_unread(md):
    async with md.client("alice") as laptop, await _phone(md) as phone:
        sid = (await laptop.mutation("session.create", {}))["id"]
        await phone.mutation("presence.update", {"sessionId": sid, "visible": True})
        listed = await laptop.query("session.list", {})
        feed = await laptop.subscribe("session.feed", {"lastEventId": listed["feedEventId"]})
        await laptop.mutation("message.send", {"sessionId": sid, "content": "hello"})
        items = [await until(feed, lambda i: i["type"] == "session-updated")]
        while items[-1]["session"]["status"] != "idle":
            items.append(await until(feed, lambda i: i["type"] == "session-updated"))
        assert not any(i["session"]["unread"] for i in items)
        assert not _unread(await laptop.query("session.list", {}), sid)


async def test_mark_read_is_the_owners(md):
    async with md.client("alice") as alice, md.client("bob") as bob:
        sid = (await alice.mutation("session.create", {}))["id"]
        await alice.mutation("message.send", {"sessionId": sid, "content": "hi"})
        with pytest.raises(TrpcError) as err:
            await bob.mutation("session.markRead", {"sessionId": sid})
        assert err.value.code == "NOT_FOUND"
        for _ in range(200):
            if _unread(await alice.query("session.list", {}), sid):
                break
            await asyncio.sleep(0.05)
        await alice.mutation("session.markRead", {"sessionId": sid})
        assert not _unread(await alice.query("session.list", {}), sid)
