import pytest

from chatsync_client import TrpcError


async def test_create_enqueue_and_list(live):
    async with live.client() as c:
        s = await c.mutation("session.create", {"queuePaused": True, "title": "hello"})
        q = await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "hi"})
        assert q["content"] == "hi"
        items = await c.query("message.getQueuedMessages", {"sessionId": s["id"]})
        assert [i["id"] for i in items] == [q["id"]]
        with pytest.raises(TrpcError) as e:
            await c.query("nope.nope")
        assert e.value.code == "NOT_FOUND"
