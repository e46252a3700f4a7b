// session.events over wsLink — started, tracked {id, data} events in seq order
// for changes made by another client, unsubscribe -> subscription.stop -> stopped, lastEventId in input.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { T, TOKEN2, assertTrpcError, collect, createSession, range, until, wsClientFor } from '../lib/harness.js';

describe('session.events over wsLink', () => {
  let sub; // the subscriber
  let other; // another client making changes
  before(() => {
    sub = wsClientFor();
    other = wsClientFor();
  });
  after(() => {
    sub.close();
    other.close();
  });

  /** Makes 5 changes from the other client; returns the expected event types in order. */
  async function makeChanges(sessionId) {
    const a = await other.client.mutation('message.enqueueMessage', { sessionId, content: 'a' });
    const b = await other.client.mutation('message.enqueueMessage', { sessionId, content: 'b' });
    await other.client.mutation('message.updateQueuedMessage', { sessionId, messageId: a.id, content: 'A' });
    await other.client.mutation('message.moveQueuedMessage', { sessionId, messageId: b.id, toIndex: 0 });
    await other.client.mutation('message.removeQueuedMessage', { sessionId, messageId: a.id });
    return {
      a,
      b,
      types: [
        'queue-message-added',
        'queue-message-added',
        'queue-message-updated',
        'queue-reordered',
        'queue-message-removed',
      ],
    };
  }

  test('onStarted, then tracked {id, data} events with id === String(seq), in order', T, async () => {
    const { id: sessionId } = await createSession();
    const s = collect(sub.client, 'session.events', { sessionId });
    await until(() => s.started === 1, 'onStarted');
    const { a, b, types } = await makeChanges(sessionId);
    await until(() => s.events.length >= 5, '5 events');

    assert.deepEqual(s.ids(), range(1, 5));
    for (const ev of s.events) {
      assert.deepEqual(Object.keys(ev).sort(), ['data', 'id']);
      assert.equal(ev.data.sessionId, sessionId);
    }
    assert.deepEqual(s.events.map((e) => e.data.type), types);
    assert.equal(s.events[0].data.message.id, a.id);
    assert.equal(s.events[0].data.message.content, 'a');
    assert.equal(s.events[1].data.message.id, b.id);
    assert.equal(s.events[2].data.message.content, 'A');
    assert.deepEqual(s.events[3].data.order, [b.id, a.id]);
    assert.equal(s.events[4].data.messageId, a.id);
    assert.equal(s.events[4].data.reason, 'removed');
    assert.deepEqual(s.errors, []);

    // On the wire: result.id duplicates the tracked id.
    const subId = sub.rec.sentJson().find(({ msg }) => msg.method === 'subscription' && msg.params.input.sessionId === sessionId).msg.id;
    const frames = sub.rec.receivedJson().filter(({ msg }) => msg.id === subId).map(({ msg }) => msg);
    assert.deepEqual(frames[0], { id: subId, result: { type: 'started' } });
    for (const f of frames.slice(1)) {
      assert.equal(f.result.type, 'data');
      assert.equal(f.result.id, f.result.data.id);
    }

    // The snapshot agrees with what the subscriber saw.
    const snap = await other.client.query('session.get', { sessionId });
    assert.equal(snap.lastEventId, '5');
    assert.deepEqual(snap.queue.map((m) => m.id), [b.id]);
    s.unsubscribe();
  });

  test('unsubscribe() sends subscription.stop; the server answers stopped and sends nothing more', T, async () => {
    const { id: sessionId } = await createSession();
    const s = collect(sub.client, 'session.events', { sessionId });
    await until(() => s.started === 1, 'onStarted');
    await other.client.mutation('message.enqueueMessage', { sessionId, content: 'x' });
    await until(() => s.events.length === 1, 'first event');
    const subId = sub.rec.sentJson().find(({ msg }) => msg.method === 'subscription' && msg.params.input.sessionId === sessionId).msg.id;

    s.unsubscribe();
    await until(
      () => sub.rec.sentJson().some(({ msg }) => msg.id === subId && msg.method === 'subscription.stop'),
      'subscription.stop on the wire',
    );
    await until(
      () => sub.rec.receivedJson().some(({ msg }) => msg.id === subId && msg.result?.type === 'stopped'),
      'the server to answer {"type":"stopped"}',
    );
    // Changes after the stop: the server must not push them to the stopped id.
    await other.client.mutation('message.enqueueMessage', { sessionId, content: 'y' });
    await other.client.mutation('message.dequeueMessage', { sessionId });
    // A later subscription on the same socket proves the socket is alive and the frames above went out.
    const probe = collect(sub.client, 'session.events', { sessionId, lastEventId: '2' });
    await until(() => probe.events.length === 1, 'probe event');
    assert.deepEqual(probe.ids(), ['3']);
    probe.unsubscribe();
    const late = sub.rec.receivedJson().filter(({ msg }) => msg.id === subId);
    const afterStop = late.slice(late.findIndex(({ msg }) => msg.result?.type === 'stopped') + 1);
    assert.deepEqual(afterStop, [], `frames for id ${subId} after stopped`);
    assert.equal(s.events.length, 1);
  });

  test('lastEventId inside input replays exactly the events after it, then goes live', T, async () => {
    const { id: sessionId } = await createSession();
    await makeChanges(sessionId); // seq 1..5 in the log
    const s = collect(sub.client, 'session.events', { sessionId, lastEventId: '2' });
    await until(() => s.events.length >= 3, 'replayed events 3..5');
    assert.deepEqual(s.ids(), range(3, 5));
    await other.client.mutation('message.clearQueue', { sessionId });
    await until(() => s.events.length >= 4, 'live event 6');
    assert.deepEqual(s.ids(), range(3, 6));
    assert.equal(s.events[3].data.type, 'queue-cleared');

    // From the start of the log.
    const all = collect(sub.client, 'session.events', { sessionId, lastEventId: '0' });
    await until(() => all.events.length >= 6, 'replayed events 1..6');
    assert.deepEqual(all.ids(), range(1, 6));
    s.unsubscribe();
    all.unsubscribe();
  });

  test("subscribing to another user's session -> onError NOT_FOUND, no onStarted", T, async () => {
    const { id: foreignId } = await createSession(TOKEN2, 'foreign-sub');
    const s = collect(sub.client, 'session.events', { sessionId: foreignId });
    await until(() => s.errors.length === 1, 'onError');
    assertTrpcError(s.errors[0], 'NOT_FOUND', -32004, 404);
    assert.equal(s.started, 0);
    assert.deepEqual(s.events, []);
  });

  test('subscribing with bad input -> onError BAD_REQUEST', T, async () => {
    const { id: sessionId } = await createSession();
    const s = collect(sub.client, 'session.events', { sessionId, lastEventId: 'not-a-number' });
    await until(() => s.errors.length === 1, 'onError');
    assertTrpcError(s.errors[0], 'BAD_REQUEST', -32600, 400);
    assert.equal(s.started, 0);
  });
});
