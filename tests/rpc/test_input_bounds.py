"""Every bound on input: just under is accepted, just over gets the documented typed error and changes
nothing, on SQLite and PostgreSQL; and no input at all produces INTERNAL_SERVER_ERROR (a fuzz test over
every procedure)."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect

from chatsync_client import TrpcClient, TrpcError
from server.api import build_router
from server.api.inputs import MAX_INSTRUCTIONS
from server.protocol.inputs import MAX_JSON_DEPTH

PROCEDURES = build_router().procedures


def nested(depth: int) -> dict:
    """A JSON object nested exactly ``depth`` levels deep."""
    value: dict = {"type": "string"}
    for _ in range(depth - 1):
        value = {"x": value}
    return value


@pytest.fixture
async def bounded(db_url, server_factory):
    live = await server_factory(db_url, users=("alice",), max_frame_bytes=65_536)
    c = TrpcClient(live.url, live.tokens["alice"])
    await c.connect()
    sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
    yield live, c, sid
    await c.close()


async def refused(c: TrpcClient, sid: str, path: str, inp, code: str = "BAD_REQUEST") -> None:
    before = await c.query("session.get", {"sessionId": sid})
    kind = PROCEDURES[path].kind
    with pytest.raises(TrpcError) as err:
        if kind == "subscription":
            sub = await c.subscribe(path, inp)
            await sub.next(5)
        elif kind == "query":
            await c.query(path, inp)
        else:
            await c.mutation(path, inp)
    assert err.value.code == code, err.value
    assert await c.query("session.get", {"sessionId": sid}) == before


async def test_bounds_just_under_and_just_over(bounded):
    _live, c, sid = bounded
    # instructions: at most 64 per call
    ok = await c.mutation(
        "message.addInstructions", {"sessionId": sid, "instructions": ["a"] * MAX_INSTRUCTIONS, "respond": False}
    )
    assert len(ok["messages"]) == MAX_INSTRUCTIONS
    await refused(
        c,
        sid,
        "message.addInstructions",
        {"sessionId": sid, "instructions": ["a"] * (MAX_INSTRUCTIONS + 1), "respond": False},
    )
    await refused(
        c, sid, "message.send", {"sessionId": sid, "content": "x", "instructions": ["a"] * (MAX_INSTRUCTIONS + 1)}
    )
    # nesting depth (tool parameters are stored, then sent back in every session listing): the input object,
    # the tools list and the tool take three levels
    tools = [{"name": "deep", "parameters": nested(MAX_JSON_DEPTH - 3)}]
    await c.mutation("session.update", {"sessionId": sid, "tools": tools})
    await refused(
        c,
        sid,
        "session.update",
        {"sessionId": sid, "tools": [{"name": "deep", "parameters": nested(MAX_JSON_DEPTH - 2)}]},
    )
    # NUL characters (PostgreSQL text cannot hold them)
    await refused(c, sid, "message.enqueueMessage", {"sessionId": sid, "content": "a\x00b"})
    # integers beyond a BIGINT / the column
    await refused(c, sid, "message.list", {"sessionId": sid, "before": 2**63})
    await refused(c, sid, "message.list", {"sessionId": sid, "before": 2**31})
    assert (await c.query("message.list", {"sessionId": sid, "before": 2**31 - 1}))["items"]
    await refused(c, sid, "session.events", {"sessionId": sid, "lastEventId": "9" * 19})
    sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "9" * 18})
    _id, event = await sub.next(5)
    assert event["type"] == "resync-required"  # a position beyond the log, not a failure
    await refused(c, sid, "session.update", {"sessionId": sid, "defaults": {"maxTokens": 2**31}})
    # a cursor without its UTC offset (never one we made)
    naive = base64.urlsafe_b64encode(b"2026-01-01T00:00:00|abc").decode()
    await refused(c, sid, "session.list", {"cursor": naive})


async def test_bytes_not_characters_and_utf8(bounded):
    live, c, sid = bounded
    ws = await connect(live.url.replace("http", "ws") + "/trpc?connectionParams=1", max_size=None)
    try:
        await ws.send(orjson.dumps({"method": "connectionParams", "data": {"token": live.tokens["alice"]}}).decode())
        # 30,000 characters of 3 bytes each: under the limit in characters, over it in bytes
        frame = orjson.dumps(
            {
                "id": 1,
                "method": "mutation",
                "params": {"path": "message.enqueueMessage", "input": {"sessionId": sid, "content": "€" * 30_000}},
            }
        ).decode()
        assert len(frame) < 65_536 < len(frame.encode())
        await ws.send(frame)
        reply = orjson.loads(await asyncio.wait_for(ws.recv(), 5))
        assert reply["error"]["data"]["code"] == "PAYLOAD_TOO_LARGE"
        await ws.send(b"\xff\xfe not utf-8")
        reply = orjson.loads(await asyncio.wait_for(ws.recv(), 5))
        assert reply["id"] is None and reply["error"]["data"]["code"] == "PARSE_ERROR"
        await ws.send("PING")
        assert await asyncio.wait_for(ws.recv(), 5) == "PONG"  # still open
    finally:
        await ws.close()
    async with httpx.AsyncClient(base_url=live.url) as http:
        r = await http.post(
            "/trpc/message.enqueueMessage",
            content=b'{"sessionId":"' + sid.encode() + b'","content":"\xff"}',
            headers={"authorization": f"Bearer {live.tokens['alice']}"},
        )
        assert r.status_code == 400 and "UTF-8" in r.json()["error"]["message"]
    assert await c.query("message.getQueuedMessages", {"sessionId": sid}) == []


# --- fuzz: no input produces INTERNAL_SERVER_ERROR ------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
FIELD_NAMES = [
    "sessionId",
    "messageId",
    "content",
    "instructions",
    "toIndex",
    "before",
    "limit",
    "cursor",
    "lastEventId",
    "tools",
    "defaults",
    "provider",
    "model",
    "toolOutputs",
    "callId",
    "approved",
    "clientRequestId",
    "mode",
    "deviceId",
    "name",
    "title",
    "metadata",
    "busyPolicy",
    "attachments",
]


async def test_fuzz_every_procedure_never_internal_error(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",), echo_delay=0.001)
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        qid = (await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "q"}))["id"]
        paths = sorted(p for p, proc in PROCEDURES.items() if proc.kind != "subscription")
        failures: list[str] = []

        http = httpx.AsyncClient(base_url=live.url, headers={"authorization": f"Bearer {live.tokens['alice']}"})

        async def one(path: str, inp) -> list[str]:
            # Python's json writes any integer (orjson stops at 64 bits): the server must refuse them itself
            body = json.dumps(inp)
            if PROCEDURES[path].kind == "query":
                r = await http.get(f"/trpc/{path}", params={"input": body})
            else:
                r = await http.post(f"/trpc/{path}", content=body)
            if r.status_code >= 500:
                return [f"{path} {body[:300]}: {r.status_code} {r.text[:300]}"]
            return []

        # hypothesis drives a synchronous function; run each example on this loop from a worker thread
        loop = asyncio.get_running_loop()

        def run_one(path, inp):
            return asyncio.run_coroutine_threadsafe(one(path, inp), loop).result(30)

        @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        @given(
            path=st.sampled_from(paths),
            base_sid=st.booleans(),
            extra=st.dictionaries(st.sampled_from(FIELD_NAMES), json_values, max_size=3),
            whole=st.none() | json_values,
        )
        def fuzz_threaded(path, base_sid, extra, whole):
            inp = (
                whole
                if whole is not None and not isinstance(whole, dict)
                else {**({"sessionId": sid, "messageId": qid} if base_sid else {}), **extra}
            )
            failures.extend(run_one(path, inp))

        try:
            await loop.run_in_executor(None, fuzz_threaded)
            assert failures == []
            assert (await http.get("/readyz")).status_code == 200  # the server is still well
            assert (await c.query("session.list", {}))["items"]  # and every listing can still be sent back
        finally:
            await http.aclose()
