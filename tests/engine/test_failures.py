"""An answer that did not finish keeps why on the message itself (read back by ``session.get`` at any time):
the failure's reason, or who stopped it; a failure before any text is an empty answer holding the reason.
An empty ``message.addInstructions`` with ``respond`` answers the same history again (a retry)."""

from __future__ import annotations

from engine_helpers import idle, subscribe


async def test_a_failure_before_any_text_leaves_an_answer_saying_why(engine):
    async with engine.client() as a:
        s = await a.mutation("session.create", {})
        st = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": "/fail the model is unwell"})
        failed = await st.until(lambda e: e["type"] == "run-failed")
        snap = await idle(a, s["id"])
        _user, answer = snap["messages"]
        assert (answer["role"], answer["status"], answer["content"]) == ("assistant", "error", "")
        assert answer["error"] == failed["error"] and "the model is unwell" in answer["error"]["message"]
        assert answer["error"]["code"] == "echo_failure" and answer["stoppedBy"] is None
        assert answer["runId"] == failed["runId"]
        completed = [e["message"] for e in st.of("message-completed") if e["message"]["id"] == answer["id"]]
        assert completed and completed[-1]["error"] == failed["error"]
        # the empty answer is not sent to the model: the next message is answered as usual
        await a.mutation("message.send", {"sessionId": s["id"], "content": "and now"})
        await st.until(lambda e: e["type"] == "run-finished")
        assert (await idle(a, s["id"]))["messages"][-1]["content"] == "and now"


async def test_a_failure_mid_answer_keeps_the_text_and_the_reason(engine):
    async with engine.client() as a:
        s = await a.mutation("session.create", {})
        st = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": "one two three four\n/fail after=2 cut off"})
        failed = await st.until(lambda e: e["type"] == "run-failed")
        answer = (await idle(a, s["id"]))["messages"][-1]
        assert answer["status"] == "error" and answer["content"].split() == ["one", "two"]
        assert answer["error"] == failed["error"] and "cut off" in answer["error"]["message"]


async def test_a_stopped_answer_says_who_stopped_it(engine):
    async with engine.client() as a, engine.client() as b:
        s = await a.mutation("session.create", {})
        st = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": " ".join(f"w{i}" for i in range(3000))})
        await st.until_type("text-delta", 3)
        await b.mutation("run.abort", {"sessionId": s["id"]})
        await st.until(lambda e: e["type"] == "run-aborted")
        answer = (await idle(a, s["id"]))["messages"][-1]
        assert answer["status"] == "interrupted" and answer["error"] is None
        me = await b.query("auth.me")
        assert answer["stoppedBy"] == {
            "userId": me["user"]["id"],
            "userName": me["user"]["name"],
            "deviceId": me["deviceId"],
            "deviceName": me["deviceName"],
        }


async def test_retry_answers_the_same_history_again(engine):
    async with engine.client() as a:
        s = await a.mutation("session.create", {})
        st = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": "try again please\n/fail times=1 flaky"})
        await st.until(lambda e: e["type"] == "run-failed")
        await idle(a, s["id"])
        retry = await a.mutation("message.addInstructions", {"sessionId": s["id"], "instructions": [], "respond": True})
        assert retry["messages"] == [] and retry["runId"]
        await st.until(lambda e: e["type"] == "run-finished" and e["runId"] == retry["runId"])
        messages = (await idle(a, s["id"]))["messages"]
        assert [(m["role"], m["status"]) for m in messages] == [
            ("user", "complete"),
            ("assistant", "error"),
            ("assistant", "complete"),
        ]
        assert messages[-1]["content"] == "try again please" and messages[-1]["error"] is None
