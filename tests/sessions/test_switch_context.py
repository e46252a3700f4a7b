"""``session.switchContext`` end to end: metadata, the system message, events, titles."""

from __future__ import annotations

import pytest
from engine_helpers import FAST, idle, subscribe
from session_helpers import LONG, LONG_MODEL_TITLE, LONG_TITLE, caught_up, titles

from chatsync_client import TrpcError


async def test_switch_updates_metadata_and_records_a_system_message(db_url, server_factory):
    live = await server_factory(db_url, **FAST)
    async with live.client() as c:
        s = await c.mutation("session.create", {"metadata": {"directory": "/srv/app", "agent": "coder"}})
        st = await subscribe(c, s["id"])
        out = await c.mutation("session.switchContext", {"sessionId": s["id"], "agent": "reviewer"})
        assert out["metadata"] == {"directory": "/srv/app", "agent": "reviewer"}  # only what was given changes
        out = await c.mutation(
            "session.switchContext", {"sessionId": s["id"], "directory": "/srv/other app", "agent": "planner"}
        )
        assert out["metadata"] == {"directory": "/srv/other app", "agent": "planner"}
        snap = await c.query("session.get", {"sessionId": s["id"]})
        assert snap["session"]["metadata"] == out["metadata"]
        assert [(m["role"], m["content"]) for m in snap["messages"]] == [
            ("system", "Context changed to: agent=reviewer"),
            ("system", "Context changed to: directory=/srv/other app, agent=planner"),
        ]
        await st.until_type("message-created", 2)
        await caught_up(live, c, st, s["id"])
        # each switch: session-updated then message-created, consecutive: one transaction
        assert [e["type"] for e in st.events] == ["session-updated", "message-created"] * 2
        ids = [int(i) for i, _e in st.items]
        assert ids == list(range(ids[0], ids[0] + 4))
        updated = st.of("session-updated")
        assert updated[0]["session"]["metadata"] == {"directory": "/srv/app", "agent": "reviewer"}
        assert st.of("message-created")[1]["message"]["id"] == snap["messages"][1]["id"]
        # a switch is not a user message: the session stays untitled
        assert (snap["session"]["title"], snap["session"]["titleSource"]) == ("", "none")


async def test_the_model_reads_the_switch_in_its_history(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        await c.mutation("message.send", {"sessionId": s["id"], "content": "hello"})
        await idle(c, s["id"])
        await c.mutation("session.switchContext", {"sessionId": s["id"], "directory": "/tmp/x"})
        await c.mutation("message.send", {"sessionId": s["id"], "content": "and now?"})
        snap = await idle(c, s["id"])
        assert [(m["role"], m["content"]) for m in snap["messages"]] == [
            ("user", "hello"),
            ("assistant", "hello"),
            ("system", "Context changed to: directory=/tmp/x"),
            ("user", "and now?"),
            ("assistant", "and now?"),
        ]


async def test_switch_while_a_run_is_in_progress(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, echo_delay=0.02, sweep_seconds=0.2, stream_flush_seconds=0.2)
    async with live.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": " ".join(["word"] * 40)})
        await st.until_type("run-started")
        out = await c.mutation("session.switchContext", {"sessionId": s["id"], "agent": "reviewer"})
        assert out["status"] == "running" and out["metadata"] == {"agent": "reviewer"}
        snap = await idle(c, s["id"])
        assert ("system", "Context changed to: agent=reviewer") in [(m["role"], m["content"]) for m in snap["messages"]]


async def test_switch_can_regenerate_the_title(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        # no user message yet: the switch happens, the title stays
        out = await c.mutation(
            "session.switchContext", {"sessionId": s["id"], "directory": "/a", "regenerateTitle": True}
        )
        assert (out["title"], out["titleSource"], out["metadata"]) == ("", "none", {"directory": "/a"})
        await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await idle(c, s["id"])
        await c.mutation("session.setTitle", {"sessionId": s["id"], "title": "Mine"})
        # without regenerateTitle a user title stays
        out = await c.mutation("session.switchContext", {"sessionId": s["id"], "agent": "reviewer"})
        assert (out["title"], out["titleSource"]) == ("Mine", "user")
        # an explicit request may replace it
        out = await c.mutation(
            "session.switchContext", {"sessionId": s["id"], "agent": "planner", "regenerateTitle": True}
        )
        assert (out["title"], out["titleSource"]) == (LONG_TITLE, "truncate")
        await caught_up(engine, c, st, s["id"])
        assert titles(st) == [(LONG_TITLE, "truncate"), ("Mine", "user"), (LONG_TITLE, "truncate")]
        # in the switch's own transaction, after its message
        types = [e["type"] for e in st.events]
        assert types[-3:] == ["session-updated", "message-created", "title-changed"]
        ids = [int(i) for i, _e in st.items[-3:]]
        assert ids == list(range(ids[0], ids[0] + 3))


async def test_switch_regenerates_by_model_in_model_mode(model_engine):
    async with model_engine.client() as c:
        s = await c.mutation("session.create", {"title": "Mine"})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await idle(c, s["id"])
        out = await c.mutation(
            "session.switchContext", {"sessionId": s["id"], "directory": "/b", "regenerateTitle": True}
        )
        assert (out["title"], out["titleSource"], out["metadata"]) == (LONG_MODEL_TITLE, "model", {"directory": "/b"})
        await caught_up(model_engine, c, st, s["id"])
        assert titles(st) == [(LONG_MODEL_TITLE, "model")]


@pytest.mark.parametrize(
    "inp",
    [
        {},
        {"regenerateTitle": True},
        {"directory": None, "agent": None},
        {"directory": ""},
        {"agent": ""},
        {"agent": "x" * 201},
        {"directory": "/a", "model": "m2"},
        {"directory": "/a", "regenerateTitle": "yes please"},
    ],
)
async def test_bad_switches_are_rejected_and_change_nothing(engine, inp):
    async with engine.client() as c:
        s = await c.mutation("session.create", {"metadata": {"directory": "/keep"}})
        before = await c.query("session.get", {"sessionId": s["id"]})
        with pytest.raises(TrpcError) as err:
            await c.mutation("session.switchContext", {"sessionId": s["id"], **inp})
        assert err.value.code == "BAD_REQUEST"
        assert await c.query("session.get", {"sessionId": s["id"]}) == before


async def test_switch_on_someone_elses_session_is_not_found(engine):
    async with engine.client("alice") as a, engine.client("bob") as b:
        s = await a.mutation("session.create", {})
        for path, inp in (("session.switchContext", {"agent": "x"}), ("session.regenerateTitle", {})):
            with pytest.raises(TrpcError) as err:
                await b.mutation(path, {"sessionId": s["id"], **inp})
            assert err.value.code == "NOT_FOUND"
        with pytest.raises(TrpcError) as err:
            await b.mutation("session.regenerateTitle", {"sessionId": s["id"], "method": "model"})
        assert err.value.code == "NOT_FOUND"
        assert (await a.query("session.get", {"sessionId": s["id"]}))["messages"] == []
