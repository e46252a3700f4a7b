"""CHATSYNC_MAX_CONNECTIONS: WebSockets and SSE streams share one bound per process; just under it everything
works, just over it a WebSocket is closed with 4003 and an SSE stream is answered 503 with Retry-After, and a
slot given back is usable again."""

from __future__ import annotations

import contextlib
import urllib.parse

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from server.domain import close_codes


def subscribe_frame(sid: str) -> str:
    return orjson.dumps(
        {"id": 1, "method": "subscription", "params": {"path": "session.events", "input": {"sessionId": sid}}}
    ).decode()


async def open_subscribed_ws(live, sid: str):
    ws = await connect(
        live.url.replace("http", "ws") + "/trpc", additional_headers={"Authorization": f"Bearer {live.tokens['alice']}"}
    )
    await ws.send(subscribe_frame(sid))
    assert orjson.loads(await ws.recv())["result"]["type"] == "started"
    return ws


@contextlib.asynccontextmanager
async def sse(http: httpx.AsyncClient, live, sid: str):
    inp = urllib.parse.quote(orjson.dumps({"sessionId": sid}).decode())
    async with http.stream(
        "GET",
        f"{live.url}/trpc/session.events?input={inp}",
        headers={"Authorization": f"Bearer {live.tokens['alice']}"},
    ) as response:
        yield response


async def assert_ws_refused(live) -> None:
    ws = await connect(
        live.url.replace("http", "ws") + "/trpc", additional_headers={"Authorization": f"Bearer {live.tokens['alice']}"}
    )
    with pytest.raises(ConnectionClosed):
        await ws.recv()
    assert ws.close_code == close_codes.SERVER_FULL
    assert close_codes.RECONNECT_MIN <= ws.close_code <= close_codes.RECONNECT_MAX  # a code clients reconnect after


async def test_websockets_and_streams_share_the_limit(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",), max_connections=3)
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
    # (The client above closed its socket: its slot is free again.)
    first = await open_subscribed_ws(live, sid)
    second = await open_subscribed_ws(live, sid)
    async with httpx.AsyncClient(timeout=30) as http:
        async with sse(http, live, sid) as stream:  # the third: just under the limit, it works
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            assert await anext(lines) == "event: connected"

            await assert_ws_refused(live)  # the fourth, over the limit
            async with sse(http, live, sid) as refused:
                assert refused.status_code == 503
                assert refused.headers["retry-after"] == "2"
                body = orjson.loads(await refused.aread())
                assert body["error"]["data"]["code"] == "SERVICE_UNAVAILABLE"

            # The ones that were in keep working: a change reaches the WebSockets and the stream.
            await first.close()
            # A slot given back is taken by the next one (a mutation's own socket), then freed again.
            async with live.client("alice") as c:
                await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "hello"})
            assert "hello" in await second.recv()
            async for line in lines:
                if line.startswith("data:") and "hello" in line:
                    break
    await second.close()
