"""Bad input gets the right typed error, changes nothing, and leaves the socket open."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect


@pytest.fixture
async def env(server_factory, sqlite_url):
    live = await server_factory(
        sqlite_url, max_queue_length=3, max_content_chars=1000, max_frame_bytes=16_384, max_batch_size=5
    )
    async with live.client() as c:
        s = await c.mutation("session.create", {"queuePaused": True, "title": "target"})
        await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "one"})
    return live, s["id"]


async def state(live, sid):
    async with live.client() as c:
        return await c.query("session.get", {"sessionId": sid})


async def open_ws(live):
    ws = await connect(live.url.replace("http", "ws") + "/trpc?connectionParams=1", max_size=None)
    await ws.send(orjson.dumps({"method": "connectionParams", "data": {"token": live.tokens["alice"]}}).decode())
    return ws


async def replies(ws, n):
    return [orjson.loads(await asyncio.wait_for(ws.recv(), 5)) for _ in range(n)]


async def assert_still_open(ws):
    await ws.send("PING")
    assert await asyncio.wait_for(ws.recv(), 5) == "PONG"


def req(rid, method, path, inp=None):
    params = {"path": path}
    if inp is not None:
        params["input"] = inp
    return orjson.dumps({"id": rid, "method": method, "params": params}).decode()


CASES = [
    # (name, frame builder(sid), expected code, expected id)
    ("not json", lambda sid: "{nope", "PARSE_ERROR", None),
    (
        "id null",
        lambda sid: orjson.dumps({"id": None, "method": "query", "params": {"path": "session.list"}}).decode(),
        "PARSE_ERROR",
        None,
    ),
    (
        "bad method",
        lambda sid: orjson.dumps({"id": 1, "method": "delete", "params": {"path": "x"}}).decode(),
        "PARSE_ERROR",
        None,
    ),
    ("no params", lambda sid: orjson.dumps({"id": 1, "method": "query"}).decode(), "PARSE_ERROR", None),
    (
        "bad jsonrpc",
        lambda sid: orjson.dumps(
            {"id": 1, "jsonrpc": "1.0", "method": "query", "params": {"path": "session.list"}}
        ).decode(),
        "PARSE_ERROR",
        None,
    ),
    ("unknown path", lambda sid: req(7, "query", "session.nope", {}), "NOT_FOUND", 7),
    (
        "query as mutation",
        lambda sid: req(8, "mutation", "message.getQueuedMessages", {"sessionId": sid}),
        "NOT_FOUND",
        8,
    ),
    ("mutation as query", lambda sid: req(9, "query", "message.clearQueue", {"sessionId": sid}), "NOT_FOUND", 9),
    ("missing field", lambda sid: req(10, "mutation", "message.enqueueMessage", {"sessionId": sid}), "BAD_REQUEST", 10),
    (
        "wrong type",
        lambda sid: req(11, "mutation", "message.enqueueMessage", {"sessionId": sid, "content": 5}),
        "BAD_REQUEST",
        11,
    ),
    (
        "unknown field",
        lambda sid: req(12, "mutation", "message.enqueueMessage", {"sessionId": sid, "content": "x", "priority": 1}),
        "BAD_REQUEST",
        12,
    ),
    ("input not an object", lambda sid: req(13, "mutation", "message.clearQueue", [sid]), "BAD_REQUEST", 13),
    (
        "negative index",
        lambda sid: req(
            14, "mutation", "message.moveQueuedMessage", {"sessionId": sid, "messageId": "x", "toIndex": -1}
        ),
        "BAD_REQUEST",
        14,
    ),
    (
        "content too long",
        lambda sid: req(15, "mutation", "message.enqueueMessage", {"sessionId": sid, "content": "x" * 1001}),
        "PAYLOAD_TOO_LARGE",
        15,
    ),
    (
        "frame too large",
        lambda sid: req(16, "mutation", "message.enqueueMessage", {"sessionId": sid, "content": "x" * 20_000}),
        "PAYLOAD_TOO_LARGE",
        None,
    ),
    (
        "unknown session",
        lambda sid: req(17, "mutation", "message.enqueueMessage", {"sessionId": "no-such-session", "content": "x"}),
        "NOT_FOUND",
        17,
    ),
    (
        "bad lastEventId",
        lambda sid: req(18, "subscription", "session.events", {"sessionId": sid, "lastEventId": "abc"}),
        "BAD_REQUEST",
        18,
    ),
    (
        "bad title",
        lambda sid: req(19, "mutation", "session.setTitle", {"sessionId": sid, "title": ""}),
        "BAD_REQUEST",
        19,
    ),
    (
        "bad tool mode",
        lambda sid: req(20, "mutation", "session.update", {"sessionId": sid, "toolMode": "chaos"}),
        "BAD_REQUEST",
        20,
    ),
]


@pytest.mark.parametrize("name,frame,code,rid", CASES, ids=[c[0] for c in CASES])
async def test_ws_bad_input(env, name, frame, code, rid):
    live, sid = env
    before = await state(live, sid)
    ws = await open_ws(live)
    try:
        await ws.send(frame(sid))
        [reply] = await replies(ws, 1)
        assert reply["id"] == rid
        assert reply["error"]["data"]["code"] == code, reply
        assert isinstance(reply["error"]["code"], int) and isinstance(reply["error"]["message"], str)
        await assert_still_open(ws)
        await ws.send(req(99, "query", "message.getQueuedMessages", {"sessionId": sid}))
        [ok] = await replies(ws, 1)
        assert ok["id"] == 99 and len(ok["result"]["data"]) == 1
    finally:
        await ws.close()
    assert await state(live, sid) == before


async def test_invalid_element_rejects_whole_batch(env):
    live, sid = env
    before = await state(live, sid)
    ws = await open_ws(live)
    good = {"id": 1, "method": "mutation", "params": {"path": "message.clearQueue", "input": {"sessionId": sid}}}
    await ws.send(orjson.dumps([good, {"id": None, "method": "query"}]).decode())
    [reply] = await replies(ws, 1)
    assert reply["id"] is None and reply["error"]["data"]["code"] == "PARSE_ERROR"
    await assert_still_open(ws)
    await ws.close()
    assert await state(live, sid) == before


async def test_batch_over_limit_is_rejected_per_id(env):
    live, sid = env
    before = await state(live, sid)
    ws = await open_ws(live)
    batch = [
        {
            "id": i,
            "method": "mutation",
            "params": {"path": "message.enqueueMessage", "input": {"sessionId": sid, "content": f"{i}"}},
        }
        for i in range(1, 7)
    ]
    await ws.send(orjson.dumps(batch).decode())
    got = await replies(ws, 6)
    assert sorted(r["id"] for r in got) == list(range(1, 7))
    assert {r["error"]["data"]["code"] for r in got} == {"BAD_REQUEST"}
    await ws.close()
    assert await state(live, sid) == before


async def test_batched_requests_are_answered_in_separate_frames(env):
    live, sid = env
    ws = await open_ws(live)
    batch = [
        {"id": 1, "method": "query", "params": {"path": "message.getQueuedMessages", "input": {"sessionId": sid}}},
        {"id": 2, "jsonrpc": "2.0", "method": "query", "params": {"path": "session.nope"}},
    ]
    await ws.send(orjson.dumps(batch).decode())
    got = {r["id"]: r for r in await replies(ws, 2)}
    assert got[1]["result"]["type"] == "data" and "jsonrpc" not in got[1]
    assert got[2]["jsonrpc"] == "2.0" and got[2]["error"]["data"]["path"] == "session.nope"
    await ws.close()


async def test_queue_past_its_limit(env):
    live, sid = env
    async with live.client() as c:
        await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "two"})
        await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "three"})
    before = await state(live, sid)
    ws = await open_ws(live)
    await ws.send(req(1, "mutation", "message.enqueueMessage", {"sessionId": sid, "content": "four"}))
    [reply] = await replies(ws, 1)
    assert reply["error"]["data"]["code"] == "PRECONDITION_FAILED" and reply["error"]["code"] == -32012
    await assert_still_open(ws)
    await ws.close()
    assert await state(live, sid) == before


async def test_duplicate_subscription_id(env):
    live, sid = env
    ws = await open_ws(live)
    await ws.send(req(5, "subscription", "session.events", {"sessionId": sid}))
    [started] = await replies(ws, 1)
    assert started == {"id": 5, "result": {"type": "started"}}
    await ws.send(req(5, "subscription", "session.events", {"sessionId": sid}))
    [dup] = await replies(ws, 1)
    assert dup["id"] == 5 and dup["error"]["data"]["code"] == "BAD_REQUEST"
    await ws.send(orjson.dumps({"id": 5, "method": "subscription.stop"}).decode())
    [stopped] = await replies(ws, 1)
    assert stopped == {"id": 5, "result": {"type": "stopped"}}
    await ws.close()


async def test_malformed_connection_params_closes(env):
    live, _sid = env
    async with connect(live.url.replace("http", "ws") + "/trpc?connectionParams=1") as ws:
        await ws.send(orjson.dumps({"method": "connectionParams", "data": {"token": 5}}).decode())
        [reply] = await replies(ws, 1)
        assert reply["id"] is None and reply["error"]["code"] == -32700
        await asyncio.wait_for(ws.wait_closed(), 5)
        assert ws.close_code == 4502


HTTP_CASES = [
    ("bad json input", "GET", "/trpc/message.getQueuedMessages?input=%7Bnope", None, 400, "BAD_REQUEST"),
    ("unknown path", "GET", "/trpc/nope.nope", None, 404, "NOT_FOUND"),
    ("GET a mutation", "GET", "/trpc/message.clearQueue?input=%7B%7D", None, 405, "METHOD_NOT_SUPPORTED"),
    ("POST a query", "POST", "/trpc/session.list", b"{}", 405, "METHOD_NOT_SUPPORTED"),
    ("batch input not object", "GET", "/trpc/session.list,session.list?batch=1&input=%5B%5D", None, 400, "BAD_REQUEST"),
    ("mixed batch", "POST", "/trpc/session.list,message.clearQueue?batch=1", b"{}", 400, "BAD_REQUEST"),
    ("oversized body", "POST", "/trpc/message.enqueueMessage", b"{" + b" " * 20_000 + b"}", 413, "PAYLOAD_TOO_LARGE"),
    ("invalid field", "POST", "/trpc/message.enqueueMessage", b'{"sessionId": 3}', 400, "BAD_REQUEST"),
]


@pytest.mark.parametrize("name,method,url,body,status,code", HTTP_CASES, ids=[c[0] for c in HTTP_CASES])
async def test_http_bad_input(env, name, method, url, body, status, code):
    live, sid = env
    before = await state(live, sid)
    async with httpx.AsyncClient(base_url=live.url) as http:
        r = await http.request(method, url, content=body, headers={"authorization": f"Bearer {live.tokens['alice']}"})
    assert r.status_code == status
    payload = r.json()
    err = payload["error"] if isinstance(payload, dict) else payload[0]["error"]
    assert err["data"]["code"] == code
    if status == 405:
        assert r.headers["allow"] in ("GET", "POST")
    assert await state(live, sid) == before
