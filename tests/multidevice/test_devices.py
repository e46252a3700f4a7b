"""Device sign-in links, the device list, and revocation closing what a token opened."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import timedelta

import orjson
import pytest
import websockets
from scenario_kit import connect_ws, exchange_link, sse_lines, subscribe_ws

from server.client import TrpcClient, TrpcError


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
    real_clock = live.services.auth.clock
    live.services.auth.clock = lambda: real_clock() + timedelta(minutes=10, seconds=1)
    try:
        r = await exchange_link(live.url, link["code"])
    finally:
        live.services.auth.clock = real_clock
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
