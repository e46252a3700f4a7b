from .conftest import idle, subscribe


async def test_send_streams_and_completes(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        res = await c.mutation("message.send", {"sessionId": s["id"], "content": "hello there world"})
        assert res["status"] == "started"
        done = await st.until(lambda e: e["type"] == "run-finished")
        print([e["type"] for e in st.events])
        snap = await idle(c, s["id"])
        print(snap["messages"])
        assert snap["messages"][-1]["content"] == "hello there world"
