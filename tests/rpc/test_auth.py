"""No token, a bad token, someone else's session: on every procedure, over WebSocket and HTTP."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest
import pytest_asyncio
import websockets
from servers import LiveServer, start_server
from websockets.asyncio.client import connect

from chatsync_client import TrpcClient, TrpcError
from server.api import build_router
from server.settings import load_settings

PROCEDURES = build_router().procedures
# Procedures about the caller, not about a session: someone else's call succeeds on their own data.
CALLER_SCOPED = (
    "session.create",
    "session.list",
    "session.feed",
    "auth.me",
    "auth.devices",
    "auth.createLink",
    "auth.links",
    "push.publicKey",
    "push.subscriptions",
    "push.subscribe",
    "push.unsubscribe",
    "push.decide",  # its capability is the credential: a wrong one is UNAUTHORIZED for anyone
    "mcp.servers",
    "provider.list",
    "tool.builtins",
    "auth.watchDevices",
)


def valid_input(path: str, sid: str, qid: str):
    """An input each procedure would accept from the session's owner."""
    base = {"sessionId": sid}
    return {
        "session.create": {},
        "session.list": {},
        "session.get": base,
        "session.update": {**base, "model": "m2"},
        "session.delete": base,
        "session.setTitle": {**base, "title": "mine"},
        "session.clearTitle": base,
        "session.regenerateTitle": {**base, "method": "truncate"},
        "session.switchContext": {**base, "directory": "/work", "agent": "coder", "regenerateTitle": True},
        "session.events": base,
        "message.list": base,
        "message.enqueueMessage": {**base, "content": "x"},
        "message.dequeueMessage": base,
        "message.clearQueue": base,
        "message.removeQueuedMessage": {**base, "messageId": qid},
        "message.getQueuedMessages": base,
        "message.updateQueuedMessage": {**base, "messageId": qid, "content": "y"},
        "message.moveQueuedMessage": {**base, "messageId": qid, "toIndex": 0},
        "message.send": {**base, "content": "hi"},
        "message.addInstructions": {**base, "instructions": "be brief", "respond": False},
        "message.resumeQueue": base,
        "message.pauseQueue": base,
        "tool.submitOutputs": {**base, "toolOutputs": [{"callId": "c1", "output": "x"}]},
        "tool.approve": {**base, "callId": "c1", "approved": True},
        "run.abort": base,
        "run.regenerate": base,
        "run.continue": base,
        "message.edit": {**base, "messageId": qid, "content": "edited"},
        "session.switchBranch": {**base, "messageId": qid},
        "session.fork": {**base, "messageId": qid},
        "message.sendQueuedNow": {**base, "messageId": qid, "mode": "next"},
        "session.feed": {},
        "auth.me": None,
        "auth.devices": None,
        "auth.createLink": {"deviceName": "phone"},
        "auth.revokeDevice": {"deviceId": "no-such-device"},
        "auth.renameDevice": {"deviceId": "no-such-device", "name": "phone"},
        "auth.links": None,
        "mcp.servers": None,
        "provider.list": None,
        "tool.builtins": None,
        "auth.watchDevices": None,
        "auth.revokeLink": {"linkId": "no-such-link"},
        "presence.update": {**base, "visible": True, "typing": True},
        "presence.leave": base,
        "presence.watch": base,
        "draft.get": base,
        "draft.save": {**base, "text": "half typed", "baseVersion": 0},
        "draft.clear": {**base, "baseVersion": 0},
        "session.markRead": base,
        "push.publicKey": None,
        "push.subscriptions": None,
        "push.subscribe": {"endpoint": "https://push.example.com/x", "keys": {"p256dh": "BA", "auth": "AA"}},
        "push.unsubscribe": {"endpoint": "https://push.example.com/x"},
        "push.decide": {"capability": "not-a-capability", "approved": True},
    }[path]


async def call_any(client: TrpcClient, path: str, inp):
    kind = PROCEDURES[path].kind
    if kind == "query":
        return await client.query(path, inp)
    if kind == "mutation":
        return await client.mutation(path, inp)
    sub = await client.subscribe(path, inp)
    return await sub.next(5)


async def new_alice_session(live: LiveServer) -> tuple[str, str]:
    async with live.client("alice") as c:
        s = await c.mutation("session.create", {"title": "alice's", "queuePaused": True})
        q = await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "keep me"})
    return s["id"], q["id"]


@pytest.fixture
async def alice_session(live):
    return await new_alice_session(live)


# The checks of every procedure (three per procedure) share one server: each test has a session of its own that
# must come out of it unchanged, and nothing refused leaves anything behind on the server.
PER_PROCEDURE = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_live(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LiveServer]:
    """A server on SQLite with users alice, bob and admin, for the module's per-procedure tests."""
    tmp = tmp_path_factory.mktemp("auth")
    settings = load_settings(
        database_url=f"sqlite+aiosqlite:///{tmp / 'chatsync.db'}", port=0, files_url=str(tmp / "files")
    )
    live = await start_server(settings, ("alice", "bob", "admin"))
    yield live
    await live.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def shared_session(shared_live: LiveServer) -> tuple[str, str]:
    """A new session of alice's (and a queued message in it) on the shared server."""
    return await new_alice_session(shared_live)


async def snapshot(live, sid):
    async with live.client("alice") as c:
        return await c.query("session.get", {"sessionId": sid})


def test_every_procedure_is_covered():
    for path in PROCEDURES:
        valid_input(path, "s", "q")  # KeyError names a procedure this suite forgot


@pytest.mark.parametrize("path", sorted(PROCEDURES))
@PER_PROCEDURE
async def test_no_token_is_unauthorized_over_ws(shared_live, shared_session, path):
    live, (sid, qid) = shared_live, shared_session
    before = await snapshot(live, sid)
    async with TrpcClient(live.url, None) as anon:
        with pytest.raises(TrpcError) as err:
            await call_any(anon, path, valid_input(path, sid, qid))
        assert err.value.code == "UNAUTHORIZED" and err.value.http_status == 401
        # the socket stays open: the next call is answered too
        with pytest.raises(TrpcError):
            await anon.query("session.list", {})
    assert await snapshot(live, sid) == before


@pytest.mark.parametrize("path", sorted(p for p in PROCEDURES if p not in CALLER_SCOPED))
@PER_PROCEDURE
async def test_foreign_session_is_not_found(shared_live, shared_session, path):
    live, (sid, qid) = shared_live, shared_session
    before = await snapshot(live, sid)
    async with live.client("bob") as bob:
        with pytest.raises(TrpcError) as err:
            await call_any(bob, path, valid_input(path, sid, qid))
        assert err.value.code == "NOT_FOUND" and err.value.rpc_code == -32004
    assert await snapshot(live, sid) == before


@pytest.mark.parametrize("path", sorted(p for p, proc in PROCEDURES.items() if proc.kind != "subscription"))
@PER_PROCEDURE
async def test_http_bearer_token_rules(shared_live, shared_session, path):
    live, (sid, qid) = shared_live, shared_session
    before = await snapshot(live, sid)
    proc = PROCEDURES[path]
    inp = valid_input(path, sid, qid)
    async with httpx.AsyncClient(base_url=live.url) as http:

        async def send(headers):
            if proc.kind == "query":
                return await http.get(f"/trpc/{path}", params={"input": orjson.dumps(inp).decode()}, headers=headers)
            return await http.post(f"/trpc/{path}", content=orjson.dumps(inp), headers=headers)

        r = await send({})
        assert r.status_code == 401 and r.json()["error"]["data"]["code"] == "UNAUTHORIZED"
        r = await send({"authorization": "Bearer cs_not-a-real-token"})
        assert r.status_code == 401
        if path not in CALLER_SCOPED:
            r = await send({"authorization": f"Bearer {live.tokens['bob']}"})
            assert r.status_code == 404 and r.json()["error"]["data"]["path"] == path
    assert await snapshot(live, sid) == before


async def test_bad_token_in_connection_params_closes_socket(live):
    ws_url = live.url.replace("http", "ws") + "/trpc?connectionParams=1"
    async with connect(ws_url) as ws:
        await ws.send(orjson.dumps({"method": "connectionParams", "data": {"token": "cs_wrong"}}).decode())
        await ws.send(orjson.dumps({"id": 1, "method": "query", "params": {"path": "session.list"}}).decode())
        reply = orjson.loads(await ws.recv())
        assert reply["id"] is None and reply["error"]["data"]["code"] == "UNAUTHORIZED"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd.code == 4501


async def test_bearer_header_on_upgrade(live):
    ws_url = live.url.replace("http", "ws") + "/trpc"
    async with connect(ws_url, additional_headers={"Authorization": f"Bearer {live.tokens['alice']}"}) as ws:
        await ws.send(orjson.dumps({"id": 1, "method": "query", "params": {"path": "session.list"}}).decode())
        reply = orjson.loads(await ws.recv())
        assert reply["result"]["data"]["items"] == []
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with connect(ws_url, additional_headers={"Authorization": "Bearer cs_wrong"}):
            pass
    assert refused.value.response.status_code == 403


async def test_upgrade_from_a_foreign_origin_is_refused(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, allowed_origins="https://app.example")
    ws_url = live.url.replace("http", "ws") + "/trpc"
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with connect(ws_url, origin="https://evil.example"):
            pass
    assert refused.value.response.status_code == 403
    async with connect(ws_url, origin="https://app.example") as ws:
        await ws.send("PING")
        assert await ws.recv() == "PONG"
    host = live.url.removeprefix("http://")
    async with connect(ws_url, origin=f"http://{host}") as ws:  # same host as the server: allowed
        await ws.send("PING")
        assert await ws.recv() == "PONG"


async def _upgrade_status(url: str, host: str, origin: str) -> int:
    """The status of a WebSocket upgrade sent with exactly these Host and Origin headers."""
    port = int(url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        (
            f"GET /trpc HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    writer.close()
    return status


async def test_dns_rebinding_is_refused(live):
    """A page of a domain name that now resolves to this machine sends agreeing Origin and Host: refused.
    The address the browser connected to, as an IP literal or localhost, is the server's own page."""
    port = live.url.rsplit(":", 1)[1]
    assert await _upgrade_status(live.url, f"evil.example:{port}", f"http://evil.example:{port}") == 403
    for name in ("localhost", "127.0.0.1", "[::1]"):
        assert await _upgrade_status(live.url, f"{name}:{port}", f"http://{name}:{port}") == 101
    assert await _upgrade_status(live.url, f"127.0.0.1:{port}", f"http://localhost:{port}") == 403


async def test_public_url_is_an_allowed_origin(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, public_url="https://chat.example")
    ws_url = live.url.replace("http", "ws") + "/trpc"
    async with connect(ws_url, origin="https://chat.example") as ws:
        await ws.send("PING")
        assert await ws.recv() == "PONG"


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_access_log_never_records_a_token(tmp_path, log_format):
    """Every documented way of sending a token (header, connectionParams in the URL of an SSE stream or a
    WebSocket) leaves the access log without it; in the JSON format too, where every line is one JSON object
    and the lines of calls and runs carry their request, session and run ids."""
    from servers import ServerProcess

    level = "info" if log_format == "text" else "debug"
    server = ServerProcess(tmp_path, name="access", users=("dora",), LOG_LEVEL=level, LOG_FORMAT=log_format)
    token, url = server.tokens["dora"], server.url
    server.start()
    try:
        await server.ready()
        params = orjson.dumps({"token": token}).decode()
        async with httpx.AsyncClient() as http:
            r = await http.get(url + "/trpc/session.list", params={"connectionParams": params})
            assert r.status_code == 200
            r = await http.get(url + "/trpc/session.list", headers={"authorization": f"Bearer {token}"})
            assert r.status_code == 200
            r = await http.get(url + "/trpc/session.list", params={"token": token, "input": "{}"})
        async with connect(url.replace("http", "ws") + f"/trpc?connectionParams=1&token={token}") as ws:
            await ws.send(orjson.dumps({"method": "connectionParams", "data": {"token": token}}).decode())
            await ws.send("PING")
            assert await ws.recv() == "PONG"
        async with TrpcClient(url, token) as c:  # a call and a run, for lines with their ids
            sid = (await c.mutation("session.create", {}))["id"]
            sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
            await sub.wait_started()
            await c.mutation("message.send", {"sessionId": sid, "content": "hello"})
            while (await sub.next(10))[1]["type"] != "run-finished":
                pass
    finally:
        await server.terminate()
    log = server.log.read_text()
    assert "GET /trpc/session.list" in log and "[redacted]" in log
    assert token not in log and token[3:20] not in log
    if log_format == "json":
        lines = [orjson.loads(line) for line in log.splitlines() if line.strip()]  # every line is JSON
        assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
        assert any(line["logger"] == "uvicorn.access" and "session.list" in line["message"] for line in lines)
        sent = [line for line in lines if "message.send ok" in line["message"]]
        assert len(sent) == 1 and sent[0]["session_id"] == sid and len(sent[0]["request_id"]) == 16
        run = [line for line in lines if line["message"] == "run started"]
        assert len(run) == 1 and run[0]["session_id"] == sid and run[0]["run_id"]


async def test_metrics_beyond_loopback_need_a_token(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice", "admin"), host="0.0.0.0")
    async with httpx.AsyncClient(base_url=live.url) as http:
        assert (await http.get("/metrics")).status_code == 401
        r = await http.get("/metrics", headers={"authorization": f"Bearer {live.tokens['alice']}"})
        assert r.status_code == 401
        r = await http.get("/metrics", headers={"authorization": f"Bearer {live.tokens['admin']}"})
        assert r.status_code == 200 and "chatsync_build_info" in r.text


async def test_admin_reads_any_session_but_cannot_write(live, alice_session):
    sid, _qid = alice_session
    async with live.client("admin") as admin:
        snap = await admin.query("session.get", {"sessionId": sid})
        assert snap["session"]["title"] == "alice's"
        with pytest.raises(TrpcError) as err:
            await admin.mutation("message.clearQueue", {"sessionId": sid})
        assert err.value.code == "NOT_FOUND"


async def test_users_create_prints_only_the_token(tmp_path, server_factory):
    """The one token printed signs the new user in to a server on that database (the tests' servers create their
    users without the command)."""
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    env = {"CHATSYNC_DATABASE_URL": database_url, "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "server.cli", "users", "create", "carol", "--admin"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    token = out.stdout.strip()
    assert token.startswith("cs_") and "\n" not in token and len(token) > 30
    again = subprocess.run(
        [sys.executable, "-m", "server.cli", "users", "create", "carol"], env=env, capture_output=True, text=True
    )
    assert again.returncode == 1 and "already exists" in again.stderr and again.stdout == ""
    live = await server_factory(database_url, users=())
    async with TrpcClient(live.url, token) as carol:
        me = await carol.query("auth.me")
    assert me["user"]["name"] == "carol" and me["user"]["role"] == "admin"


async def test_tokens_are_stored_hashed(live):
    from sqlalchemy import select

    from server.store.models import ApiToken

    async with live.services.db.read() as s:
        hashes = (await s.execute(select(ApiToken.token_hash))).scalars().all()
    assert hashes and not any(h == t for h in hashes for t in live.tokens.values())
    assert all(len(h) == 64 for h in hashes)
