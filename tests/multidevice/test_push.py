"""Notifications routed by presence, against a local push service (tests/devices_kit.py) that checks every
request as a browser's push service would (the VAPID JWT's signature, ``aud``, ``exp``; ``TTL``, ``Topic``,
``Urgency``) and decrypts the payload with the subscription's keys. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from devices_kit import PushService, until
from sqlalchemy import select

from chatsync_client import TrpcClient, TrpcError
from server.services import webpush
from server.services.push import Job
from server.store.models import PushSent

FAST = {"echo_delay": 0.001, "sweep_seconds": 0.2, "stream_flush_seconds": 0.2}


@pytest.fixture
async def pushy(db_url, server_factory):
    server = await server_factory(db_url, users=("alice", "bob"), push_allow_insecure_endpoints=True, **FAST)
    receiver = PushService(lambda: server.services.push.public_key)
    await receiver.start()
    yield server, receiver
    await receiver.stop()


async def _finished(client: TrpcClient, sid: str, runs: int) -> list[str]:
    """Wait until ``runs`` runs of the session have finished; their ids in order."""
    sub = await client.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
    ids: list[str] = []
    while len(ids) < runs:
        item = await until(sub, lambda e: e["type"] in ("run-finished", "run-failed"))
        ids.append(item["runId"])
    await sub.close()
    return ids


async def test_an_answer_is_pushed_signed_encrypted_and_once_per_run(pushy):
    server, receiver = pushy
    async with server.client("alice") as laptop:
        key = await laptop.query("push.publicKey")
        assert len(webpush.b64url_decode(key)) == 65
        sub = await laptop.mutation("push.subscribe", receiver.subscription("laptop"))
        assert sub["events"] == ["approval-needed", "answer-finished", "run-failed"]
        sid = (await laptop.mutation("session.create", {"title": "Trip"}))["id"]
        await laptop.mutation("message.send", {"sessionId": sid, "content": "hello there"})
        await laptop.mutation("message.send", {"sessionId": sid, "content": "/fail it broke"})
        runs = await _finished(laptop, sid, 2)
        got = await receiver.wait_for(lambda r: len(r) >= 2)
    assert receiver.problems == []
    by_type = {r.payload["type"]: r for r in got}
    answer, failure = by_type["answer-finished"], by_type["run-failed"]
    assert answer.payload["sessionId"] == sid and answer.payload["title"] == "Trip"
    assert "hello there" in answer.payload["body"] and answer.payload["runId"] == runs[0]
    assert failure.payload["runId"] == runs[1] and "it broke" in failure.payload["body"]
    assert answer.headers["Urgency"] == "normal" and answer.headers["Topic"] != failure.headers["Topic"]
    assert len(receiver.requests) == 2  # one per kind per run, nothing more


async def test_nothing_is_pushed_while_a_device_has_the_session_visible(pushy):
    server, receiver = pushy
    phone_token = await server.services.auth.create_token("alice", "phone")
    async with server.client("alice") as laptop, TrpcClient(server.url, phone_token) as phone:
        await laptop.mutation("push.subscribe", receiver.subscription("laptop"))
        sid = (await laptop.mutation("session.create", {}))["id"]
        await phone.mutation("presence.update", {"sessionId": sid, "visible": True})
        await laptop.mutation("message.send", {"sessionId": sid, "content": "seen on the phone"})
        first = (await _finished(laptop, sid, 1))[0]
        await phone.mutation("presence.update", {"sessionId": sid, "visible": False})
        await laptop.mutation("message.send", {"sessionId": sid, "content": "nobody looking"})
        second = (await _finished(laptop, sid, 2))[1]
        got = await receiver.wait_for(lambda r: len(r) >= 1)
    # The decision is taken when the answer commits, so the first run's notification was never queued: the
    # one request the push service saw is the second run's.
    assert [r.payload["runId"] for r in got] == [second] and first != second
    assert receiver.requests == ["laptop"]


async def test_a_user_with_no_subscription_costs_no_write(pushy):
    """An answer of a user who subscribed no device is decided by a read: no ``push_sent`` record (a write that
    would take its turn with the runs' writers), nothing sent."""
    server, receiver = pushy
    push = server.services.push
    async with server.client("alice") as laptop:
        sid = (await laptop.mutation("session.create", {}))["id"]
        await laptop.mutation("message.send", {"sessionId": sid, "content": "nobody subscribed"})
        run = (await _finished(laptop, sid, 1))[0]
    await _handled(push, 1)
    async with server.services.db.read() as s:
        recorded = (await s.execute(select(PushSent.run_id))).scalars().all()
    assert run not in recorded and recorded == []
    assert receiver.requests == []


async def test_jobs_taken_together_read_subscriptions_once(pushy):
    """Notifications queued together (many answers ending at once) cost one read of who is subscribed, and
    each still reaches only its own user's devices."""
    server, receiver = pushy
    push = server.services.push
    async with server.client("alice") as laptop:
        await laptop.mutation("push.subscribe", receiver.subscription("laptop"))
    users = {name: (await server.services.auth.authenticate(server.tokens[name])).id for name in ("alice", "bob")}
    db = push.db
    push.db = counting = _CountingReads(db)  # the push service's own reads, not the sweeper's or anyone's
    try:
        before = push.handled
        for n in range(4):  # put together, as a burst of commits would: the worker takes them in one go
            push.queue.put_nowait(Job(users["bob" if n else "alice"], "session-x", f"run-{n}", "answer-finished"))
        await _handled(push, before + 4)
    finally:
        push.db = db
    got = await receiver.wait_for(lambda r: len(r) >= 1)
    assert [r.payload["runId"] for r in got] == ["run-0"] and receiver.requests == ["laptop"]
    assert counting.reads == 2  # the subscriptions of both users, then alice's payload


class _CountingReads:
    """A database whose reads (``read()`` and one-statement ``read_rows``) are counted; everything else is the
    database's."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.reads = 0

    def read(self) -> Any:
        self.reads += 1
        return self.db.read()

    def read_rows(self, *args: Any) -> Any:
        self.reads += 1
        return self.db.read_rows(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


async def _handled(push: Any, count: int) -> None:
    """Wait until the push service has decided ``count`` jobs."""
    deadline = asyncio.get_running_loop().time() + 20
    while push.handled < count:
        assert asyncio.get_running_loop().time() < deadline, f"{push.handled} of {count} push jobs decided"
        await asyncio.sleep(0.01)


async def test_a_410_drops_the_subscription_and_a_503_is_retried(pushy):
    server, receiver = pushy
    receiver.answers["gone"] = [410]
    receiver.answers["busy"] = [503]
    async with server.client("alice") as laptop:
        await laptop.mutation("push.subscribe", receiver.subscription("gone"))
        await laptop.mutation("push.subscribe", receiver.subscription("busy"))
        sid = (await laptop.mutation("session.create", {}))["id"]
        await laptop.mutation("message.send", {"sessionId": sid, "content": "hi"})
        got = await receiver.wait_for(lambda r: any(x.path == "busy" for x in r))
        assert [r.path for r in got] == ["busy"]  # delivered on its second try
        for _ in range(600):
            subs = await laptop.query("push.subscriptions")
            if len(subs) == 1:
                break
            await asyncio.sleep(0.05)
        assert [s["endpoint"].rsplit("/", 1)[1] for s in subs] == ["busy"]


async def test_a_slow_push_service_never_delays_a_run(pushy):
    server, receiver = pushy
    receiver.hold["slow"] = asyncio.Event()
    async with server.client("alice") as laptop:
        await laptop.mutation("push.subscribe", receiver.subscription("slow"))
        sid = (await laptop.mutation("session.create", {}))["id"]
        await laptop.mutation("message.send", {"sessionId": sid, "content": "one"})
        await receiver.wait_requests(1)  # the first notification hangs at the push service
        await laptop.mutation("message.send", {"sessionId": sid, "content": "two"})
        await laptop.mutation("message.send", {"sessionId": sid, "content": "three"})
        runs = await _finished(laptop, sid, 3)  # every run finished while that request still hangs
        assert not receiver.hold["slow"].is_set()
        await receiver.wait_requests(3)  # and later runs' notifications did not queue behind it
        receiver.hold["slow"].set()
        got = await receiver.wait_for(lambda r: len(r) >= 3)
    assert sorted(r.payload["runId"] for r in got) == sorted(runs)


async def test_approve_from_the_notification(pushy):
    server, receiver = pushy
    phone_token = await server.services.auth.create_token("alice", "phone")
    async with server.client("alice") as laptop, TrpcClient(server.url, phone_token) as phone:
        await phone.mutation("push.subscribe", receiver.subscription("phone"))
        tool = {
            "name": "calculator",
            "description": "maths",
            "parameters": {"type": "object"},
            "requiresApproval": True,
        }
        sid = (await laptop.mutation("session.create", {"tools": [tool]}))["id"]
        events = await laptop.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        await laptop.mutation("message.send", {"sessionId": sid, "content": '/tool calculator {"expression": "6*7"}'})
        got = await receiver.wait_for(lambda r: any(x.payload["type"] == "approval-needed" for x in r))
        note = next(r.payload for r in got if r.payload["type"] == "approval-needed")
        assert note["toolName"] == "calculator" and [a["action"] for a in note["actions"]] == ["approve", "deny"]
        assert receiver.browsers["phone"] and note["sessionId"] == sid
        # The service worker decides with the capability alone, no token (a client without one).
        async with TrpcClient(server.url, None) as worker:
            forged = note["capability"][:-2] + ("AA" if not note["capability"].endswith("AA") else "BB")
            with pytest.raises(TrpcError) as err:
                await worker.mutation("push.decide", {"capability": forged, "approved": True})
            assert err.value.code == "UNAUTHORIZED"
            assert await worker.mutation("push.decide", {"capability": note["capability"], "approved": True}) == {
                "resolved": True
            }
            with pytest.raises(TrpcError) as err:  # first decision wins
                await worker.mutation("push.decide", {"capability": note["capability"], "approved": False})
            assert err.value.code == "CONFLICT"
        resolved = await until(events, lambda e: e["type"] == "tool-approval-resolved")
        assert resolved["approved"] is True and resolved["decidedBy"]["deviceName"] == "phone"
        await until(events, lambda e: e["type"] == "run-finished")
        # Who decided is kept with the call: a device that loads the session later sees it.
        loaded = await laptop.query("session.get", {"sessionId": sid})
        decided = [c["decision"] for m in loaded["messages"] for c in m["toolCalls"] or [] if c["decision"]]
        assert [(d["approved"], d["deviceName"], d["userName"]) for d in decided] == [(True, "phone", "alice")]
        assert decided[0]["decidedAt"] > 0


async def test_a_revoked_devices_capability_decides_nothing(pushy):
    server, receiver = pushy
    phone_token = await server.services.auth.create_token("alice", "phone")
    async with server.client("alice") as laptop, TrpcClient(server.url, phone_token) as phone:
        await phone.mutation("push.subscribe", receiver.subscription("phone"))
        phone_id = (await phone.query("auth.me"))["deviceId"]
        tool = {
            "name": "calculator",
            "description": "maths",
            "parameters": {"type": "object"},
            "requiresApproval": True,
        }
        sid = (await laptop.mutation("session.create", {"tools": [tool]}))["id"]
        await laptop.mutation("message.send", {"sessionId": sid, "content": '/tool calculator {"expression": "1"}'})
        got = await receiver.wait_for(lambda r: len(r) >= 1)
        await laptop.mutation("auth.revokeDevice", {"deviceId": phone_id})
        async with TrpcClient(server.url, None) as worker:
            with pytest.raises(TrpcError) as err:
                await worker.mutation("push.decide", {"capability": got[0].payload["capability"], "approved": True})
            assert err.value.code == "UNAUTHORIZED"
        snap = await laptop.query("session.get", {"sessionId": sid})
        assert snap["run"]["pendingApprovals"]


async def test_subscriptions_are_per_device_and_validated(pushy):
    server, receiver = pushy
    async with server.client("alice") as laptop, server.client("bob") as bob:
        only = await laptop.mutation("push.subscribe", {**receiver.subscription("l"), "events": ["run-failed"]})
        assert only["events"] == ["run-failed"]
        listed = await laptop.query("push.subscriptions")
        assert [(s["events"], s["current"]) for s in listed] == [(["run-failed"], True)]
        assert await bob.query("push.subscriptions") == []
        bad_keys = {"endpoint": f"{receiver.url}/push/x", "keys": {"p256dh": "AAAA", "auth": "AAAA"}}
        for inp in (
            bad_keys,
            {**receiver.subscription("y"), "events": ["everything"]},
            {**receiver.subscription("z"), "endpoint": "ftp://example.com/push"},
        ):
            with pytest.raises(TrpcError) as err:
                await laptop.mutation("push.subscribe", inp)
            assert err.value.code == "BAD_REQUEST"
        await laptop.mutation("push.unsubscribe", {"endpoint": only["endpoint"]})
        assert await laptop.query("push.subscriptions") == []


async def test_endpoints_must_be_https_on_public_addresses(server_factory, sqlite_url):
    server = await server_factory(sqlite_url)  # CHATSYNC_PUSH_ALLOW_INSECURE_ENDPOINTS unset
    keys = PushService(lambda: "").subscription("x")["keys"]
    async with server.client("alice") as laptop:
        for endpoint in (
            "http://127.0.0.1:9/push",  # not https
            "https://127.0.0.1/push",  # loopback
            "https://localhost/push",  # a name for loopback
            "https://10.1.2.3/push",  # private
            "https://169.254.169.254/latest",  # link-local (cloud metadata)
            "https://[::1]/push",
            "https://[::ffff:192.168.0.1]/push",  # private, as an IPv4-mapped IPv6 address
            "https://user:pw@push.example/push",
        ):
            with pytest.raises(TrpcError) as err:
                await laptop.mutation("push.subscribe", {"endpoint": endpoint, "keys": keys})
            assert err.value.code == "BAD_REQUEST", endpoint
        assert await laptop.query("push.subscriptions") == []
    assert webpush.public_address("8.8.8.8") and webpush.public_address("2001:4860:4860::8888")
    for address in ("100.64.0.1", "192.168.1.1", "fd00::1", "fe80::1", "0.0.0.0", "224.0.0.1", "::ffff:127.0.0.1"):
        assert not webpush.public_address(address), address


async def test_the_vapid_key_is_kept_across_restarts(server_factory, sqlite_url):
    first = await server_factory(sqlite_url)
    key = first.services.push.public_key
    await first.stop()
    second = await server_factory(sqlite_url, tokens=first.tokens)
    async with second.client("alice") as c:
        assert await c.query("push.publicKey") == key
