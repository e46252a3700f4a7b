"""Finding and keeping chats: ``session.list``'s search over titles and message texts (bounded, wildcards taken
literally), pinned sessions first, archived ones apart, and pin/archive reaching every device by ``session.feed``.
On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from engine_helpers import FAST, Stream

from chatsync_client import TrpcError


@pytest.fixture
async def org(db_url: str, server_factory: Callable[..., Any]) -> Any:
    return await server_factory(db_url, users=("alice", "bob"), **FAST)


async def answered(c: Any, session_id: str, text: str) -> None:
    """Send ``text`` and wait until the echo model's answer is stored (the run finished)."""
    sub = await c.subscribe("session.events", {"sessionId": session_id})
    await sub.wait_started()  # from now: the send must come after the subscription started
    st = Stream(sub)
    sent = await c.mutation("message.send", {"sessionId": session_id, "content": text})
    await st.until(lambda e: e["type"] == "run-finished" and e["runId"] == sent["runId"], timeout=30)
    await st.sub.close()


async def ids(c: Any, **inp: Any) -> list[str]:
    """Every session id the listing gives, following ``nextCursor`` to the end."""
    out: list[str] = []
    cursor = None
    while True:
        page = await c.query("session.list", {**inp, **({"cursor": cursor} if cursor else {})})
        out += [s["id"] for s in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            return out


async def test_search_matches_titles_and_the_texts_of_messages(org):
    async with org.client("alice") as c, org.client("bob") as bob:
        trip = await c.mutation("session.create", {"title": "Trip plans"})
        quokka = await c.mutation("session.create", {})
        await answered(c, quokka["id"], "The Quokka lives on Rottnest Island")
        sure = await c.mutation("session.create", {"title": "certainty"})
        await c.mutation("message.send", {"sessionId": sure["id"], "content": "I am 100% sure of it"})
        other = await c.mutation("session.create", {"title": "nothing here"})
        await bob.mutation("session.create", {"title": "bob's quokka"})  # never in alice's results
        assert await ids(c, search="quokka") == [quokka["id"]]  # the user's text and the answer, any case
        assert await ids(c, search="ROTTNEST island") == [quokka["id"]]
        assert await ids(c, search="trip") == [trip["id"]]
        # LIKE's wildcards are plain characters in a search
        assert await ids(c, search="%") == [sure["id"]]
        assert await ids(c, search="0_ s") == []
        assert await ids(c, search="0% s") == [sure["id"]]
        assert await ids(c, search="  plans ") == [trip["id"]]  # surrounding blanks are not part of it
        assert set(await ids(c)) == {trip["id"], quokka["id"], sure["id"], other["id"]}
        # a new message makes a session match at once, and a rename changes what its title matches
        await c.mutation("message.send", {"sessionId": other["id"], "content": "a quokka after all"})
        assert await ids(c, search="quokka") == [other["id"], quokka["id"]]
        await c.mutation("session.setTitle", {"sessionId": trip["id"], "title": "Holiday"})
        assert await ids(c, search="trip") == []


async def test_a_search_examines_a_bounded_window_and_continues_from_its_cursor(db_url, server_factory):
    live = await server_factory(db_url, users=("alice",), search_scan_sessions=2, **FAST)
    async with live.client("alice") as c:
        oldest = await c.mutation("session.create", {})
        await c.mutation("message.send", {"sessionId": oldest["id"], "content": "the needle"})
        for i in range(4):
            await c.mutation("session.create", {"title": f"hay {i}"})
        first = await c.query("session.list", {"search": "needle", "limit": 10})
        assert first["items"] == [] and first["nextCursor"] is not None  # two examined, three to go
        pages = 1
        cursor = first["nextCursor"]
        found: list[str] = []
        while cursor is not None:
            page = await c.query("session.list", {"search": "needle", "limit": 10, "cursor": cursor})
            found += [s["id"] for s in page["items"]]
            cursor = page["nextCursor"]
            pages += 1
        assert found == [oldest["id"]] and pages == 3


async def test_pinned_sessions_come_first_and_pages_neither_skip_nor_repeat(org):
    async with org.client("alice") as c:
        made = [await c.mutation("session.create", {"title": f"s{i}"}) for i in range(6)]
        newest_first = [s["id"] for s in reversed(made)]
        for s in (made[1], made[3]):
            updated = await c.mutation("session.update", {"sessionId": s["id"], "pinned": True})
            assert updated["pinned"] is True and updated["archived"] is False
        expected = [made[3]["id"], made[1]["id"]] + [i for i in newest_first if i not in (made[1]["id"], made[3]["id"])]
        for limit in (1, 2, 4, 50):
            assert await ids(c, limit=limit) == expected
        assert await ids(c, limit=1, search="s") == expected  # a search keeps the same order


async def test_pin_and_archive_reach_the_other_device_through_the_feed(org):
    async with org.client("alice") as laptop, org.client("alice") as phone, org.client("bob") as bob:
        keep = await laptop.mutation("session.create", {"title": "keep"})
        old = await laptop.mutation("session.create", {"title": "old"})
        listed = await phone.query("session.list", {})
        feed = Stream(await phone.subscribe("session.feed", {"lastEventId": listed["feedEventId"]}))
        await laptop.mutation("session.update", {"sessionId": keep["id"], "pinned": True})
        e = await feed.until(lambda e: e["type"] == "session-updated" and e["session"]["id"] == keep["id"])
        assert e["session"]["pinned"] is True and e["session"]["archived"] is False
        await laptop.mutation("session.update", {"sessionId": old["id"], "archived": True})
        e = await feed.until(lambda e: e["type"] == "session-updated" and e["session"]["archived"])
        assert e["session"]["id"] == old["id"] and e["session"]["pinned"] is False
        assert await ids(phone) == [keep["id"]]  # archived sessions leave the main list
        assert await ids(phone, archived=True) == [old["id"]]
        assert await ids(phone, archived=None) == [keep["id"], old["id"]]
        snap = await phone.query("session.get", {"sessionId": old["id"]})
        assert snap["session"]["archived"] is True
        await laptop.mutation("session.update", {"sessionId": old["id"], "archived": False})
        await laptop.mutation("session.update", {"sessionId": keep["id"], "pinned": False})
        e = await feed.until(lambda e: e["session"]["id"] == keep["id"] and not e["session"]["pinned"])
        assert await ids(phone) == [old["id"], keep["id"]]
        # someone else's session: not found, and nothing changes
        with pytest.raises(TrpcError) as err:
            await bob.mutation("session.update", {"sessionId": keep["id"], "archived": True})
        assert err.value.code == "NOT_FOUND"
        with pytest.raises(TrpcError) as err:
            await laptop.mutation("session.update", {"sessionId": keep["id"], "pinned": "sometimes"})
        assert err.value.code == "BAD_REQUEST"
        assert (await laptop.query("session.get", {"sessionId": keep["id"]}))["session"]["archived"] is False
        await feed.sub.close()


async def test_a_cursor_from_before_pinning_still_pages(org):
    """Cursors made before the list put pinned sessions first carry no pinned flag; they page the unpinned."""
    import base64

    async with org.client("alice") as c:
        made = [await c.mutation("session.create", {"title": f"s{i}"}) for i in range(3)]
        page = await c.query("session.list", {"limit": 1})
        pinned, created, sid = base64.urlsafe_b64decode(page["nextCursor"]).decode().split("|")
        assert pinned == "0" and sid == made[2]["id"]
        old_style = base64.urlsafe_b64encode(f"{created}|{sid}".encode()).decode()
        rest = await c.query("session.list", {"cursor": old_style})
        assert [s["id"] for s in rest["items"]] == [made[1]["id"], made[0]["id"]]
        with pytest.raises(TrpcError) as err:
            await c.query("session.list", {"cursor": base64.urlsafe_b64encode(f"7|{created}|{sid}".encode()).decode()})
        assert err.value.code == "BAD_REQUEST"
