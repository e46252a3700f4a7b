"""Device sign-in links (named before they are spent, listed while pending, dying with the device that made
them), the device list, and revocation closing what a token opened."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import timedelta

import httpx
import orjson
import pytest
import websockets
from scenario_kit import connect_ws, exchange_link, link_info, sse_lines, subscribe_ws

from chatsync_client import TrpcClient, TrpcError
from server.services.links import MAX_PENDING_LINKS


def cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CHATSYNC_DATABASE_URL": db_url}
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args], env=env, capture_output=True, text=True, timeout=60
    )


async def test_cli_link_signs_a_device_in_once(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",))
    out = cli(sqlite_url, "link", "--user", "alice", "--device", "kitchen tablet")
    assert out.returncode == 0, out.stderr
    url = out.stdout.splitlines()[0]
    assert "/link#" in url and ("▀" in out.stdout or "█" in out.stdout)  # the QR code follows the link
    code = url.split("#", 1)[1]
    first = await exchange_link(live.url, code, "kitchen tablet")
    assert first.status_code == 200, first.text
    token = first.json()["token"]
    assert first.json()["user"]["name"] == "alice"
    async with TrpcClient(live.url, token) as tablet:
        me = await tablet.query("auth.me")
        assert me["user"]["name"] == "alice" and me["deviceName"] == "kitchen tablet"
        devices = await tablet.query("auth.devices")
        assert [d["current"] for d in devices].count(True) == 1
    again = await exchange_link(live.url, code)
    assert again.status_code == 400 and "already used" in again.json()["error"]["message"]
    assert "token" not in again.json()
    wrong = await exchange_link(live.url, "not-a-code")
    assert wrong.status_code == 400 and "not valid" in wrong.json()["error"]["message"]
    listed = cli(sqlite_url, "tokens", "list", "--user", "alice", "--json")
    tokens = orjson.loads(listed.stdout)
    assert sorted(t["name"] for t in tokens) == ["first token", "kitchen tablet"]
    tablet_id = next(t["id"] for t in tokens if t["name"] == "kitchen tablet")
    assert cli(sqlite_url, "tokens", "revoke", tablet_id).returncode == 0
    with pytest.raises(TrpcError) as err:
        async with TrpcClient(live.url, token, reconnect=False) as tablet:
            await tablet.query("auth.me")
    assert err.value.code == "UNAUTHORIZED"
    again = cli(sqlite_url, "tokens", "revoke", tablet_id)
    assert again.returncode == 1 and "no live token" in again.stderr


async def test_an_expired_link_fails(live):
    async with live.client("alice") as c:
        link = await c.mutation("auth.createLink", {"deviceName": "phone"})
    assert link["url"].startswith(live.url + "/link#")
    real_clock = live.services.links.clock
    live.services.links.clock = lambda: real_clock() + timedelta(minutes=10, seconds=1)
    try:
        r = await exchange_link(live.url, link["code"])
    finally:
        live.services.links.clock = real_clock
    assert r.status_code == 400 and "expired" in r.json()["error"]["message"]


async def test_rename_and_list_devices(live):
    async with live.client("alice") as c:
        link = await c.mutation("auth.createLink", {})
        token = (await exchange_link(live.url, link["code"], "old name")).json()["token"]
        async with TrpcClient(live.url, token) as phone:
            me = await phone.query("auth.me")
            renamed = await c.mutation("auth.renameDevice", {"deviceId": me["deviceId"], "name": "Anna's phone"})
            assert renamed["name"] == "Anna's phone" and renamed["current"] is False
            names = {d["id"]: d["name"] for d in await phone.query("auth.devices")}
            assert names[me["deviceId"]] == "Anna's phone" and len(names) == 2
    async with live.client("bob") as bob:  # someone else's device: not found, nothing changes
        with pytest.raises(TrpcError) as err:
            await bob.mutation("auth.revokeDevice", {"deviceId": me["deviceId"]})
        assert err.value.code == "NOT_FOUND"


async def test_revoking_closes_websockets_and_sse_of_that_device_only(live):
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        token = (await exchange_link(live.url, (await c.mutation("auth.createLink", {}))["code"])).json()["token"]
        other = await c.subscribe("session.events", {"sessionId": sid})
        async with connect_ws(live.url, token) as ws:
            await subscribe_ws(ws, sid)
            lines: list[str] = []
            opened = asyncio.Event()
            sse = asyncio.create_task(sse_lines(live.url, token, sid, lines, opened))
            await asyncio.wait_for(opened.wait(), 10)
            device = next(d for d in await c.query("auth.devices") if not d["current"])
            await c.mutation("auth.revokeDevice", {"deviceId": device["id"]})
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 1.0)  # within a second
            assert closed.value.rcvd.code == 4503
            await asyncio.wait_for(sse, 1.0)
            assert any(line == "event: serialized-error" for line in lines)
            error = orjson.loads(next(x for x in reversed(lines) if x.startswith("data: {"))[6:])
            assert error["data"]["code"] == "UNAUTHORIZED"
        with pytest.raises(TrpcError) as err:
            async with TrpcClient(live.url, token, reconnect=False) as again:
                await again.query("session.list", {})
        assert err.value.code == "UNAUTHORIZED"
        # the device that revoked stays connected and subscribed
        await c.mutation("session.setTitle", {"sessionId": sid, "title": "still here"})
        _id, event = await other.next(5)
        assert event["type"] == "title-changed"
        await other.close()


async def params_refusal(url: str, token: str) -> tuple[dict, int]:
    """Open a WebSocket that signs in with ``connectionParams`` (as @trpc/client does), send ``token``: the
    ``id:null`` error and the close code it is refused with."""
    async with websockets.connect(url.replace("http", "ws") + "/trpc?connectionParams=1") as ws:
        await ws.send(orjson.dumps({"method": "connectionParams", "data": {"token": token}}).decode())
        error = orjson.loads(await asyncio.wait_for(ws.recv(), 10))["error"]
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(ws.recv(), 10)
    assert closed.value.rcvd is not None
    return error, closed.value.rcvd.code


async def test_a_device_revoked_while_offline_is_told_so_when_it_reconnects(live):
    """Its token is refused as revoked (4503, ``data.reason``), not as a token never issued (4501)."""
    async with live.client("alice") as c:
        token = (await exchange_link(live.url, (await c.mutation("auth.createLink", {}))["code"])).json()["token"]
        assert (await params_refusal(live.url, "cs_never-issued"))[1] == 4501
        async with TrpcClient(live.url, token) as device:
            device_id = (await device.query("auth.me"))["deviceId"]
        await c.mutation("auth.revokeDevice", {"deviceId": device_id})
    error, code = await params_refusal(live.url, token)
    assert code == 4503
    assert error["data"]["code"] == "UNAUTHORIZED" and error["data"]["reason"] == "TOKEN_REVOKED"
    http = await asyncio.to_thread(
        httpx.get, live.url + "/trpc/session.list", headers={"authorization": f"Bearer {token}"}
    )
    assert http.status_code == 401 and http.json()["error"]["data"]["reason"] == "TOKEN_REVOKED"
    unknown = await asyncio.to_thread(
        httpx.get, live.url + "/trpc/session.list", headers={"authorization": "Bearer cs_never-issued"}
    )
    assert unknown.status_code == 401 and "reason" not in unknown.json()["error"]["data"]


async def test_deleting_a_user_signs_out_every_device(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice", "carol"))
    async with connect_ws(live.url, live.tokens["carol"]) as ws:
        await ws.send("PING")
        assert await ws.recv() == "PONG"
        out = await asyncio.get_running_loop().run_in_executor(None, cli, sqlite_url, "users", "delete", "carol")
        assert out.returncode == 0, out.stderr
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd.code == 4503
    async with live.client("alice") as alice:  # everyone else carries on
        assert (await alice.query("session.list", {}))["items"] == []


async def _links(client: TrpcClient) -> list[dict]:
    return await client.query("auth.links")


async def test_link_info_names_the_account_and_spends_nothing(md):
    async with md.client("alice") as alice:
        link = await alice.mutation("auth.createLink", {"deviceName": "kitchen tablet"})
        for _ in range(2):  # asking twice changes nothing
            info = await link_info(md.url, link["code"])
            assert info.status_code == 200, info.text
            assert info.json() == {"userName": "alice", "deviceName": "kitchen tablet", "expiresAt": link["expiresAt"]}
            assert info.headers["cache-control"] == "no-store"
        assert [x["id"] for x in await _links(alice)] == [link["id"]]  # still pending
        devices_before = len(await alice.query("auth.devices"))
        signed_in = await exchange_link(md.url, link["code"], "tablet")
        assert signed_in.status_code == 200 and signed_in.json()["user"]["name"] == "alice"
        assert len(await alice.query("auth.devices")) == devices_before + 1
        assert await _links(alice) == []
    used = await link_info(md.url, link["code"])
    assert used.status_code == 400 and "already used" in used.json()["error"]["message"]
    unknown = await link_info(md.url, "not-a-code")
    assert unknown.status_code == 400 and "not valid" in unknown.json()["error"]["message"]


async def test_link_endpoints_refuse_bad_bodies_and_spend_nothing(md):
    async with md.client("alice") as alice:
        link = await alice.mutation("auth.createLink", {})
        async with httpx.AsyncClient(base_url=md.url) as http:
            bad = [
                ("/auth/link/info", b"not json"),
                ("/auth/link/info", b'{"code": 7}'),
                ("/auth/link/info", b"[]"),
                ("/auth/link", orjson.dumps({"code": link["code"], "deviceName": 5})),
                ("/auth/link", orjson.dumps({"code": link["code"], "deviceName": "nul\x00name"})),
                ("/auth/link", orjson.dumps({"code": link["code"], "deviceName": "x" * 5000})),
            ]
            for path, body in bad:
                r = await http.post(path, content=body, headers={"content-type": "application/json"})
                assert r.status_code == 400 and r.json()["error"]["code"] == "BAD_REQUEST", (path, body, r.text)
        assert [x["id"] for x in await _links(alice)] == [link["id"]]  # nothing was spent
        assert (await exchange_link(md.url, link["code"])).status_code == 200


async def test_links_list_and_revoke(md):
    async with md.client("alice") as alice, md.client("bob") as bob:
        me = await alice.query("auth.me")
        tablet = await alice.mutation("auth.createLink", {"deviceName": "tablet"})
        plain = await alice.mutation("auth.createLink", {})
        listed = await _links(alice)
        assert [x["id"] for x in listed] == [tablet["id"], plain["id"]]  # oldest first
        first = listed[0]
        assert first["deviceName"] == "tablet" and listed[1]["deviceName"] is None
        assert first["expiresAt"] == tablet["expiresAt"] and first["createdAt"] <= first["expiresAt"]
        assert first["madeBy"] == {"id": me["deviceId"], "name": me["deviceName"], "current": True}
        assert await _links(bob) == []  # someone else's links are not shown ...
        with pytest.raises(TrpcError) as err:  # ... nor revocable
            await bob.mutation("auth.revokeLink", {"linkId": tablet["id"]})
        assert err.value.code == "NOT_FOUND"

        assert await alice.mutation("auth.revokeLink", {"linkId": tablet["id"]}) is None
        assert [x["id"] for x in await _links(alice)] == [plain["id"]]
        for answer in (await link_info(md.url, tablet["code"]), await exchange_link(md.url, tablet["code"])):
            assert answer.status_code == 400 and "was revoked" in answer.json()["error"]["message"]
        with pytest.raises(TrpcError) as err:  # revoked already
            await alice.mutation("auth.revokeLink", {"linkId": tablet["id"]})
        assert err.value.code == "NOT_FOUND"

        phone = (await exchange_link(md.url, plain["code"])).json()["token"]
        with pytest.raises(TrpcError) as err:  # spent: nothing left to revoke
            await alice.mutation("auth.revokeLink", {"linkId": plain["id"]})
        assert err.value.code == "NOT_FOUND"
        async with TrpcClient(md.url, phone) as other:  # another device of alice's sees them, not as its own
            late = await other.mutation("auth.createLink", {})
            assert [x["madeBy"]["current"] for x in await _links(alice)] == [False]
            assert [x["madeBy"]["current"] for x in await _links(other)] == [True]
        real_clock = md.services.links.clock
        md.services.links.clock = lambda: real_clock() + timedelta(minutes=10, seconds=1)
        try:
            assert await _links(alice) == []  # expired: no longer pending
            with pytest.raises(TrpcError) as err:
                await alice.mutation("auth.revokeLink", {"linkId": late["id"]})
            assert err.value.code == "NOT_FOUND"
        finally:
            md.services.links.clock = real_clock


async def test_a_revoked_devices_links_do_not_sign_in(md):
    async with md.client("alice") as alice:
        phone_link = await alice.mutation("auth.createLink", {"deviceName": "phone"})
        phone_token = (await exchange_link(md.url, phone_link["code"])).json()["token"]
        async with TrpcClient(md.url, phone_token, reconnect=False) as phone:
            phone_id = (await phone.query("auth.me"))["deviceId"]
            minted = [await phone.mutation("auth.createLink", {"deviceName": f"laptop {i}"}) for i in range(2)]
        own = await alice.mutation("auth.createLink", {})
        assert {x["id"] for x in await _links(alice)} == {m["id"] for m in [*minted, own]}
        await alice.mutation("auth.revokeDevice", {"deviceId": phone_id})
        assert [x["id"] for x in await _links(alice)] == [own["id"]]  # the phone's links died with it
        devices_before = {d["id"] for d in await alice.query("auth.devices")}
        for link in minted:
            for answer in (await link_info(md.url, link["code"]), await exchange_link(md.url, link["code"])):
                assert answer.status_code == 400, answer.text
                assert "The device that made this sign-in link was signed out" in answer.json()["error"]["message"]
                assert "token" not in answer.json()
            with pytest.raises(TrpcError) as err:
                await alice.mutation("auth.revokeLink", {"linkId": link["id"]})
            assert err.value.code == "NOT_FOUND"
        assert {d["id"] for d in await alice.query("auth.devices")} == devices_before  # no device was added
        assert (await exchange_link(md.url, own["code"])).status_code == 200  # the caller's own link still works


async def test_links_die_with_their_user(md):
    async with md.client("bob") as bob:
        link = await bob.mutation("auth.createLink", {})
    await md.services.auth.delete_user("bob", md.services.files)
    for answer in (await link_info(md.url, link["code"]), await exchange_link(md.url, link["code"])):
        assert answer.status_code == 400 and "not valid" in answer.json()["error"]["message"]


async def test_a_link_spent_concurrently_signs_in_once(md):
    async with md.client("alice") as alice:
        link = await alice.mutation("auth.createLink", {})
        answers = await asyncio.gather(*(exchange_link(md.url, link["code"], f"d{i}") for i in range(12)))
        assert sorted(a.status_code for a in answers) == [200] + [400] * 11
        assert len(await alice.query("auth.devices")) == 2
        # A revocation racing the exchange: the link is either spent (and then not revocable) or revoked.
        for _ in range(5):
            link = await alice.mutation("auth.createLink", {})
            spent, revoked = await asyncio.gather(
                exchange_link(md.url, link["code"]),
                alice.mutation("auth.revokeLink", {"linkId": link["id"]}),
                return_exceptions=True,
            )
            assert isinstance(spent, httpx.Response)
            assert (spent.status_code == 200) == isinstance(revoked, TrpcError), (spent.text, revoked)


async def test_pending_links_per_user_are_bounded_under_concurrency(md):
    headers = {"authorization": f"Bearer {md.tokens['alice']}", "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=md.url, timeout=30) as http:
        answers = await asyncio.gather(
            *(http.post("/trpc/auth.createLink", content=b"{}", headers=headers) for _ in range(MAX_PENDING_LINKS + 8))
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * MAX_PENDING_LINKS + [412] * 8, statuses
    refused = next(a for a in answers if a.status_code == 412).json()["error"]
    assert refused["data"]["code"] == "PRECONDITION_FAILED" and "revoke one" in refused["message"]
    async with md.client("alice") as alice:
        listed = await _links(alice)
        assert len(listed) == MAX_PENDING_LINKS
        await alice.mutation("auth.revokeLink", {"linkId": listed[0]["id"]})
        await alice.mutation("auth.createLink", {})  # room again
    # The server's operator is not bound by it.
    out = await asyncio.get_running_loop().run_in_executor(
        None, cli, md.settings.database_url, "link", "--user", "alice", "--no-qr"
    )
    assert out.returncode == 0, out.stderr


async def test_link_attempts_are_limited_per_address(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",), link_attempts_per_minute=3)
    async with live.client("alice") as alice:
        link = await alice.mutation("auth.createLink", {})
    for _ in range(3):
        assert (await link_info(live.url, "guess")).status_code == 400
    for refused in (await link_info(live.url, link["code"]), await exchange_link(live.url, link["code"])):
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "TOO_MANY_REQUESTS" and int(refused.headers["retry-after"]) >= 1
    async with live.client("alice") as alice:
        assert len(await alice.query("auth.links")) == 1  # refused before anything was read or spent
