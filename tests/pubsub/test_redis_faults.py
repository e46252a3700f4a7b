"""Redis goes away and comes back: the bus reconnects, re-subscribes, retries what it could not publish,
and tells subscribers to catch up from the log."""

from __future__ import annotations

import asyncio

import pytest
from test_bus_contract import Recorder, ev
from testkit import PrivateRedis

from server.pubsub import create_bus


@pytest.fixture
def private_redis():
    r = PrivateRedis()
    r.start()
    yield r
    if r.proc and r.proc.poll() is None:
        r.kill()


async def test_bus_survives_a_redis_restart(private_redis):
    bus = create_bus(private_redis.url)
    rec = Recorder()
    bus.set_handlers(rec.on_message, rec.on_reconnect)
    await bus.connect()
    try:
        await bus.subscribe("s")
        await bus.publish("s", [ev("s", 1)])
        await rec.wait_for(1)

        private_redis.kill()
        await bus.publish("s", [ev("s", 2)])  # Redis is down: must not raise, must not be forgotten
        assert bus._unsent
        private_redis.start()

        async def reconnected():
            while rec.reconnects == 0:
                rec.changed.clear()
                await rec.changed.wait()

        await asyncio.wait_for(reconnected(), 15)
        # The publish made during the outage is retried until Redis takes it. (Whether this process
        # hears it depends on whether its listener re-subscribed first: pub/sub keeps nothing, which is
        # why subscribers are told to catch up from the event log on reconnect.)
        deadline = asyncio.get_running_loop().time() + 15
        while bus._unsent and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert not bus._unsent
        await bus.publish("s", [ev("s", 3)])
        await rec.wait_for(2, timeout=10)
        seqs = [seq for _s, seq, _j in rec.got]
        assert seqs[0] == 1 and seqs[-1] == 3 and set(seqs) <= {1, 2, 3}
        assert bus.reconnects >= 1 and rec.reconnects >= 1
    finally:
        await bus.disconnect()


async def test_a_subscribe_cancelled_as_redis_confirms_it_stays_cancelled(redis_url):
    """A subscriber that goes away (its task cancelled) in the same turn of the loop as Redis confirms its
    subscription: the cancellation reaches the subscriber. Swallowed, the subscription's task would carry on
    as if its client were still there, attached to the hub, and hold the server's shutdown."""
    bus = create_bus(redis_url)
    rec = Recorder()
    bus.set_handlers(rec.on_message, rec.on_reconnect)
    await bus.connect()
    held: list[tuple[dict, int, dict]] = []
    handle = bus.handle_message

    def hold_confirmations(msg, prefix_len, confirm):  # the listener's confirmations, kept back
        channel = msg["channel"].decode() if isinstance(msg["channel"], bytes) else msg["channel"]
        if msg["type"] == "subscribe" and channel.endswith("{gone}"):
            held.append((msg, prefix_len, confirm))
        else:
            handle(msg, prefix_len, confirm)

    bus.handle_message = hold_confirmations
    try:
        task = asyncio.create_task(bus.subscribe("gone"))
        deadline = asyncio.get_running_loop().time() + 10
        while not held and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert held, "Redis never confirmed the subscription"
        handle(*held[0])  # the confirmation arrives...
        task.cancel()  # ...and the client goes, before the subscriber's task runs again
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await bus.disconnect()
