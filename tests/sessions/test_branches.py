"""Versions and branches over real sockets, on SQLite and PostgreSQL: edit, regenerate (with another provider),
continue after a length stop, switch branches, fork — each while two other clients follow the session (one of
them resuming after its connection died mid-way), all ending with the active path and texts of ``session.get``;
the model is asked with exactly the active path; busy policies; the queue follows the branch."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from branch_helpers import Viewer, canonical, record, snapshot_shown

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "engine"))

from engine_helpers import FAST, wait_for
from scenario_kit import lose_the_reply, session_log

from chatsync_client import TrpcError


@pytest.fixture
async def tree(db_url: str, server_factory: Any) -> Any:
    return await server_factory(db_url, users=("alice", "bob"), **FAST)


async def idle(c: Any, sid: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        snap = await c.query("session.get", {"sessionId": sid})
        return snap if snap["run"] is None and not snap["queue"] else None

    return await wait_for(done, timeout=20)  # type: ignore[no-any-return]


async def viewer(live: Any, sid: str, after: str = "0") -> tuple[Any, Viewer]:
    client = live.client("alice")
    await client.connect()
    sub = await client.subscribe("session.events", {"sessionId": sid, "lastEventId": after})
    await sub.wait_started()
    return client, Viewer(sub)


async def resume(live: Any, sid: str, v: Viewer) -> Any:
    """A new connection for ``v`` that resumes from the last event it applied."""
    client = live.client("alice")
    await client.connect()
    v.sub = await client.subscribe("session.events", {"sessionId": sid, "lastEventId": v.last_id})
    await v.sub.wait_started()
    return client


async def all_agree(c: Any, sid: str, *viewers: Viewer) -> dict[str, Any]:
    snap = await idle(c, sid)
    for v in viewers:
        await v.caught_up(snap["lastEventId"])
        assert v.shown() == snapshot_shown(snap)
    return snap


async def four_exchanges(c: Any, sid: str) -> list[dict[str, Any]]:
    for i in range(4):
        await c.mutation("message.send", {"sessionId": sid, "content": f"question {i}"})
        await idle(c, sid)
    return (await c.query("session.get", {"sessionId": sid}))["messages"]


async def test_edit_makes_a_branch_and_the_old_one_stays_reachable(tree):
    fake = record(tree)
    async with tree.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        a_client, a = await viewer(tree, sid)
        b_client, b = await viewer(tree, sid)
        old = await four_exchanges(c, sid)
        assert [m["role"] for m in old] == ["user", "assistant"] * 4
        await b.until(lambda v: len(v.path) >= 4)
        await b_client.close()  # b's connection dies mid-way

        fake.requests.clear()
        second = old[2]
        reply = await c.mutation(
            "message.edit", {"sessionId": sid, "messageId": second["id"], "content": "question 1, edited"}
        )
        assert reply["status"] == "started" and reply["message"]["parentId"] == old[1]["id"]
        b_client = await resume(tree, sid, b)
        snap = await all_agree(c, sid, a, b)
        assert [m["content"] for m in snap["messages"]] == [
            "question 0",
            "question 0",
            "question 1, edited",
            "question 1, edited",
        ]
        assert snap["messages"][2]["versions"] == {"index": 1, "count": 2}
        assert snap["messages"][2]["siblingIds"] == [second["id"], reply["message"]["id"]]
        assert snap["messages"][0]["versions"] == {"index": 0, "count": 1}
        # The model was asked with exactly the new path.
        assert canonical(fake.requests[-1]) == [
            ("user", "question 0"),
            ("assistant", "question 0"),
            ("user", "question 1, edited"),
        ]

        # The old branch: switching to the old second message goes down to its last active leaf.
        switched = await c.mutation("session.switchBranch", {"sessionId": sid, "messageId": second["id"]})
        assert switched == {"changed": True, "leafId": old[-1]["id"]}
        snap = await all_agree(c, sid, a, b)
        assert [m["id"] for m in snap["messages"]] == [m["id"] for m in old]
        # ...and back to the edited one, to its answer.
        await c.mutation("session.switchBranch", {"sessionId": sid, "messageId": reply["message"]["id"]})
        snap = await all_agree(c, sid, a, b)
        assert len(snap["messages"]) == 4 and snap["messages"][2]["id"] == reply["message"]["id"]
        # Any branch reads by its leaf.
        page = await c.query("message.list", {"sessionId": sid, "leafId": old[-1]["id"]})
        assert [m["id"] for m in page["items"]] == [m["id"] for m in old]
        # One branch-changed per change.
        changes = [e for e in a.seen if e["type"] == "branch-changed"]
        assert len(changes) == 3
        await a_client.close()
        await b_client.close()


async def test_regenerate_with_another_provider_and_continue_after_length(tree):
    record(tree)
    other = record(tree, "openai")
    async with tree.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        a_client, a = await viewer(tree, sid)
        await c.mutation("message.send", {"sessionId": sid, "content": "one two three four five six\n/length after=2"})
        snap = await idle(c, sid)
        first_answer = snap["messages"][-1]
        assert first_answer["content"] == "one two" and first_answer["finishReason"] == "length"

        b_client, b = await viewer(tree, sid)
        went_on = await c.mutation("run.continue", {"sessionId": sid})
        assert went_on["messageId"] == first_answer["id"]
        snap = await all_agree(c, sid, a, b)
        continued = snap["messages"][-1]
        assert continued["id"] == first_answer["id"] and continued["content"] == "one two three four five six"
        assert continued["finishReason"] == "stop" and len(snap["messages"]) == 2
        kinds = [e["type"] for e in b.seen]
        after = kinds[len(kinds) - 1 - kinds[::-1].index("run-started") :]  # the continue's run
        assert "message-continued" in after and "message-created" not in after
        # Continue needs a length stop.
        with pytest.raises(TrpcError) as err:
            await c.mutation("run.continue", {"sessionId": sid})
        assert err.value.code == "PRECONDITION_FAILED"

        regen = await c.mutation("run.regenerate", {"sessionId": sid, "provider": "openai", "model": "gpt-test"})
        assert (regen["provider"], regen["model"]) == ("openai", "gpt-test")
        snap = await all_agree(c, sid, a, b)
        assert other.requests[-1].options.model == "gpt-test"
        assert canonical(other.requests[-1]) == [("user", "one two three four five six\n/length after=2")]
        new_answer = snap["messages"][-1]
        assert new_answer["versions"] == {"index": 1, "count": 2}
        assert new_answer["siblingIds"] == [first_answer["id"], new_answer["id"]]
        assert snap["session"]["provider"] == "echo"  # the session's own model stays
        await a_client.close()
        await b_client.close()


async def test_fork_copies_the_path_and_shows_in_every_list(tree):
    async with tree.client("alice") as c, tree.client("alice") as other_device:
        feed = await other_device.subscribe("session.feed", {})
        await feed.wait_started()
        sid = (await c.mutation("session.create", {"title": "original"}))["id"]
        messages = await four_exchanges(c, sid)
        forked = await c.mutation(
            "session.fork", {"sessionId": sid, "messageId": messages[3]["id"], "clientRequestId": "fork-1"}
        )
        assert forked["id"] != sid and forked["title"] == "original"
        snap = await c.query("session.get", {"sessionId": forked["id"]})
        assert [m["content"] for m in snap["messages"]] == [m["content"] for m in messages[:4]]
        assert snap["messages"][0]["parentId"] is None
        assert snap["messages"][1]["parentId"] == snap["messages"][0]["id"]

        async def listed() -> bool:
            _i, e = await feed.next(10)
            return e["type"] == "session-created" and e["sessionId"] == forked["id"]

        await wait_for(listed)
        # The fork goes on on its own; the original is untouched.
        await c.mutation("message.send", {"sessionId": forked["id"], "content": "in the fork"})
        assert len((await idle(c, forked["id"]))["messages"]) == 6
        assert len((await idle(c, sid))["messages"]) == 8
        again = await c.mutation(
            "session.fork", {"sessionId": sid, "messageId": messages[3]["id"], "clientRequestId": "fork-1"}
        )
        assert again["id"] == forked["id"]
        with pytest.raises(TrpcError) as err:
            await c.mutation("session.fork", {"sessionId": sid, "messageId": "no-such-message"})
        assert err.value.code == "NOT_FOUND"


async def test_bad_input_is_refused_and_changes_nothing(tree):
    async with tree.client("alice") as c, tree.client("bob") as bob:
        sid = (await c.mutation("session.create", {}))["id"]
        messages = await four_exchanges(c, sid)
        before = await c.query("session.get", {"sessionId": sid})
        cases = [
            ("message.edit", {"messageId": messages[1]["id"], "content": "x"}, "PRECONDITION_FAILED"),
            ("message.edit", {"messageId": "nope", "content": "x"}, "NOT_FOUND"),
            ("run.regenerate", {"messageId": messages[0]["id"]}, "PRECONDITION_FAILED"),
            ("run.regenerate", {"provider": "nope"}, "BAD_REQUEST"),
            ("run.regenerate", {"provider": "openai"}, "BAD_REQUEST"),
            ("run.continue", {}, "PRECONDITION_FAILED"),
            ("session.switchBranch", {"messageId": "nope"}, "NOT_FOUND"),
        ]
        for path, inp, code in cases:
            with pytest.raises(TrpcError) as err:
                await c.mutation(path, {"sessionId": sid, **inp})
            assert err.value.code == code, path
        for path in ("message.edit", "session.switchBranch", "session.fork"):
            with pytest.raises(TrpcError) as err:
                await bob.mutation(path, {"sessionId": sid, "messageId": messages[0]["id"], "content": "x"})
            assert err.value.code in ("NOT_FOUND", "BAD_REQUEST"), path
        assert await c.query("session.get", {"sessionId": sid}) == before


async def test_busy_policy_for_edit_and_regenerate(db_url, server_factory):
    slow = await server_factory(db_url, users=("alice",), **{**FAST, "echo_delay": 0.05})
    async with slow.client("alice") as c:
        sid = (await c.mutation("session.create", {"busyPolicy": "reject"}))["id"]
        first = await c.mutation("message.send", {"sessionId": sid, "content": "word " * 200})

        async def streaming() -> bool:
            snap = await c.query("session.get", {"sessionId": sid})
            return bool(snap["run"] and snap["run"]["streaming"] and snap["run"]["streaming"]["text"])

        await wait_for(streaming)
        with pytest.raises(TrpcError) as err:
            await c.mutation("message.edit", {"sessionId": sid, "messageId": first["message"]["id"], "content": "b"})
        assert err.value.code == "CONFLICT"
        with pytest.raises(TrpcError) as err:
            await c.mutation("session.switchBranch", {"sessionId": sid, "messageId": first["message"]["id"]})
        assert err.value.code == "CONFLICT"
        # The caller's policy: interrupt. The partial answer stays on the old branch.
        edited = await c.mutation(
            "message.edit",
            {"sessionId": sid, "messageId": first["message"]["id"], "content": "short", "busyPolicy": "interrupt"},
        )
        snap = await idle(c, sid)
        assert [m["content"] for m in snap["messages"]] == ["short", "short"]
        old = await c.query("message.list", {"sessionId": sid, "leafId": first["message"]["id"]})
        assert [m["id"] for m in old["items"]] == [first["message"]["id"]]
        await c.mutation("session.switchBranch", {"sessionId": sid, "messageId": first["message"]["id"]})
        snap = await c.query("session.get", {"sessionId": sid})
        partial = snap["messages"][-1]
        assert partial["status"] == "interrupted" and partial["content"] and len(snap["messages"]) == 2
        assert snap["messages"][0]["siblingIds"] == [first["message"]["id"], edited["message"]["id"]]


async def test_a_message_queued_during_a_regenerate_goes_after_it_on_the_new_branch(db_url, server_factory):
    slow = await server_factory(db_url, users=("alice",), **{**FAST, "echo_delay": 0.02})
    async with slow.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        await c.mutation("message.send", {"sessionId": sid, "content": "first " * 5})
        before = await idle(c, sid)
        await c.mutation("run.regenerate", {"sessionId": sid})
        queued = await c.mutation("message.send", {"sessionId": sid, "content": "queued", "clientRequestId": "q-1"})
        assert queued["status"] == "queued"
        snap = await idle(c, sid)
        contents = [m["content"] for m in snap["messages"]]
        assert contents == [before["messages"][0]["content"], before["messages"][1]["content"], "queued", "queued"]
        assert snap["messages"][1]["id"] != before["messages"][1]["id"]
        assert snap["messages"][1]["versions"] == {"index": 1, "count": 2}
        assert snap["messages"][2]["parentId"] == snap["messages"][1]["id"]


async def test_each_procedure_retried_after_a_lost_reply_makes_nothing_twice(tree):
    """Each new write goes through a proxy that holds its reply back and cuts the connection once the write is
    committed; the retry with the same clientRequestId gets the first reply and the log has one of everything."""
    url, token = tree.url, tree.tokens["alice"]
    async with tree.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        await c.mutation("message.send", {"sessionId": sid, "content": "one two three\n/length after=1"})
        first = await idle(c, sid)

        async def lost_then_retried(path: str, inp: dict[str, Any], done: Any) -> dict[str, Any]:
            before = int((await c.query("session.get", {"sessionId": sid}))["lastEventId"])

            async def committed() -> bool:
                return await done(before)

            await lose_the_reply(url, token, path, inp, committed)
            retry = await c.mutation(path, inp)
            assert await c.mutation(path, inp) == retry  # and again: the same reply
            return retry

        async def log_grew(before: int) -> bool:
            return int((await c.query("session.get", {"sessionId": sid}))["lastEventId"]) > before

        went_on = await lost_then_retried("run.continue", {"sessionId": sid, "clientRequestId": "c-1"}, log_grew)
        await idle(c, sid)
        regen = await lost_then_retried("run.regenerate", {"sessionId": sid, "clientRequestId": "r-1"}, log_grew)
        await idle(c, sid)
        edit = {
            "sessionId": sid,
            "messageId": first["messages"][0]["id"],
            "content": "edited",
            "clientRequestId": "e-1",
        }
        edited = await lost_then_retried("message.edit", edit, log_grew)
        await idle(c, sid)
        switch = {"sessionId": sid, "messageId": first["messages"][0]["id"], "clientRequestId": "s-1"}
        switched = await lost_then_retried("session.switchBranch", switch, log_grew)

        async def forked(_before: int) -> bool:
            return len((await c.query("session.list", {}))["items"]) == 2

        fork = {"sessionId": sid, "messageId": first["messages"][0]["id"], "clientRequestId": "f-1"}
        fork_reply = await lost_then_retried("session.fork", fork, forked)

        log, snap = await session_log(url, token, sid)
        types = [e["type"] for _i, e in log]
        assert types.count("run-started") == 4  # the send, one continue, one regenerate, one edit
        started = [e for _i, e in log if e["type"] == "run-started"]
        assert [e["trigger"] for e in started] == ["message", "continue", "regenerate", "edit"]
        assert {went_on["runId"], regen["runId"], edited["runId"]} == {e["runId"] for e in started[1:]}
        assert types.count("branch-changed") == 3  # regenerate, edit, switch
        assert switched["changed"] is True and snap["messages"][0]["id"] == first["messages"][0]["id"]
        users = [m for m in snap["messages"] if m["role"] == "user"]
        assert len(users) == 1
        assert len((await c.query("session.list", {}))["items"]) == 2 and fork_reply["id"] != sid


async def test_titles_follow_the_first_message_of_the_active_path_unless_the_user_named_it(tree):
    async with tree.client("alice") as c:
        untitled = (await c.mutation("session.create", {}))["id"]
        first = await c.mutation("message.send", {"sessionId": untitled, "content": "Packing list for Lyon"})
        await idle(c, untitled)
        assert (await c.query("session.get", {"sessionId": untitled}))["session"]["title"] == "Packing list for Lyon"
        await c.mutation(
            "message.edit", {"sessionId": untitled, "messageId": first["message"]["id"], "content": "Trains to Lyon"}
        )
        snap = await idle(c, untitled)
        assert (snap["session"]["title"], snap["session"]["titleSource"]) == ("Trains to Lyon", "truncate")
        await c.mutation("session.switchBranch", {"sessionId": untitled, "messageId": first["message"]["id"]})
        snap = await c.query("session.get", {"sessionId": untitled})
        assert snap["session"]["title"] == "Packing list for Lyon"

        named = (await c.mutation("session.create", {"title": "My trip"}))["id"]
        sent = await c.mutation("message.send", {"sessionId": named, "content": "Packing list"})
        await idle(c, named)
        await c.mutation("message.edit", {"sessionId": named, "messageId": sent["message"]["id"], "content": "Trains"})
        snap = await idle(c, named)
        assert (snap["session"]["title"], snap["session"]["titleSource"]) == ("My trip", "user")


async def test_queued_messages_wait_through_branch_switches_and_go_onto_the_path_then_active(tree):
    async with tree.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        messages = await four_exchanges(c, sid)
        edited = await c.mutation(
            "message.edit", {"sessionId": sid, "messageId": messages[2]["id"], "content": "the other branch"}
        )
        await idle(c, sid)
        await c.mutation("message.pauseQueue", {"sessionId": sid})
        for text in ("waiting 1", "waiting 2"):
            await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": text})
        await c.mutation("session.switchBranch", {"sessionId": sid, "messageId": messages[2]["id"]})
        await c.mutation("session.switchBranch", {"sessionId": sid, "messageId": edited["message"]["id"]})
        await c.mutation("session.switchBranch", {"sessionId": sid, "messageId": messages[2]["id"]})
        snap = await c.query("session.get", {"sessionId": sid})
        assert [q["content"] for q in snap["queue"]] == ["waiting 1", "waiting 2"]  # still waiting, in order
        await c.mutation("message.resumeQueue", {"sessionId": sid})
        snap = await idle(c, sid)
        contents = [m["content"] for m in snap["messages"]]
        assert contents[:8] == [m["content"] for m in messages]  # the branch active when they were sent
        assert contents[8:] == ["waiting 1", "waiting 1", "waiting 2", "waiting 2"]
        assert snap["messages"][8]["parentId"] == messages[-1]["id"]
