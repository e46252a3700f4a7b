"""Characters no database column can hold (NUL) are refused as ``BAD_REQUEST`` wherever they can arrive — in a
tRPC input (directly or inside an opaque cursor), in the JSON of ``POST /auth/link``, in an HTTP path or query
parameter of the admin API, the file endpoints or any other route — on SQLite and on PostgreSQL, never an
``INTERNAL_SERVER_ERROR``."""

from __future__ import annotations

import base64
import urllib.parse

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from chatsync_client import TrpcError

NUL_ID = "abc\x00def"
# A cursor of the shape session.list hands out (base64 of "<created at>|<session id>"), its id holding a NUL.
NUL_CURSOR = base64.urlsafe_b64encode(b"2024-01-01T00:00:00+00:00|abc\x00def").decode()


@pytest.fixture
async def server(db_url, server_factory):
    return await server_factory(db_url, users=("alice", "admin"))


def bearer(live, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {live.tokens[user]}"}


def assert_bad_request(response: httpx.Response) -> None:
    assert response.status_code == 400, (response.status_code, response.text)
    body = response.json()
    error = body["error"]
    assert error.get("code") == "BAD_REQUEST" or error.get("data", {}).get("code") == "BAD_REQUEST", body


async def test_session_list_cursor_over_websocket(server):
    async with server.client("alice") as c:
        with pytest.raises(TrpcError) as err:
            await c.query("session.list", {"cursor": NUL_CURSOR})
        assert err.value.code == "BAD_REQUEST"
        with pytest.raises(TrpcError) as err:
            await c.query("session.list", {"cursor": "x\x00"})
        assert err.value.code == "BAD_REQUEST"
        assert (await c.query("session.list", {}))["items"] == []  # the connection goes on


async def test_session_list_cursor_over_http(server):
    async with httpx.AsyncClient(base_url=server.url, headers=bearer(server, "alice")) as http:
        for cursor in (NUL_CURSOR, "x\x00"):
            inp = urllib.parse.quote(orjson.dumps({"cursor": cursor}).decode())
            assert_bad_request(await http.get(f"/trpc/session.list?input={inp}"))


@pytest.mark.parametrize(
    "path",
    [
        "/admin/api/sessions?owner=a%00b",
        "/admin/api/sessions?cursor=" + urllib.parse.quote(NUL_CURSOR),
        "/admin/api/sessions?cursor=a%00b",
        "/admin/api/sessions/a%00b",
        "/admin/api/sessions/a%00b/events",
    ],
)
async def test_admin_api(server, path):
    async with httpx.AsyncClient(base_url=server.url, headers=bearer(server, "admin")) as http:
        assert_bad_request(await http.get(path))


async def test_file_download_and_any_url(server):
    async with httpx.AsyncClient(base_url=server.url, headers=bearer(server, "alice")) as http:
        assert_bad_request(await http.get("/files/a%00b"))
        # A NUL in the query of any route, and in the path of a route that takes none, is refused alike.
        assert_bad_request(await http.get("/files/abc?x=%00"))
        assert_bad_request(await http.get("/healthz?x=%00"))
        assert_bad_request(await http.get("/a%00b"))
        assert (await http.get("/files/abc")).status_code == 404  # without the NUL: what it always was
    with pytest.raises(InvalidStatus) as refused:  # a WebSocket upgrade too, before it is accepted
        await connect(server.url.replace("http", "ws") + "/trpc?x=%00", additional_headers=bearer(server, "alice"))
    assert refused.value.response.status_code == 403


async def test_device_link_name(server):
    async with server.client("alice") as c:
        link = await c.mutation("auth.createLink", {"deviceName": "phone"})
    code = link["code"]
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert_bad_request(await http.post("/auth/link", json={"code": code, "deviceName": "ph\x00one"}))
        spent = await http.post("/auth/link", json={"code": code, "deviceName": "phone"})  # the code is still good
        assert spent.status_code == 200 and spent.json()["user"]["name"] == "alice"
