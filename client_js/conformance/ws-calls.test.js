// Queries and mutations over wsLink with connectionParams; batching in one tick.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { T, until, wsClientFor } from '../lib/harness.js';

describe('wsLink: queries and mutations', () => {
  let c;
  before(() => {
    c = wsClientFor();
  });
  after(() => c.close());

  test('connectionParams go first, on a ?connectionParams=1 URL', T, async () => {
    await c.client.query('session.list', {});
    const first = c.rec.instances[0];
    assert.match(first.url, /[?&]connectionParams=1$/);
    const frames = c.rec.sent.filter((f) => f.data !== 'PING' && f.data !== 'PONG');
    assert.deepEqual(JSON.parse(frames[0].data), { method: 'connectionParams', data: { token: process.env.CHATSYNC_TOKEN } });
  });

  test('session and the whole queue API round-trip', T, async () => {
    const { client } = c;
    const session = await client.mutation('session.create', { queuePaused: true, title: 'ws-calls' });
    assert.equal(typeof session.id, 'string');
    assert.equal(session.title, 'ws-calls');
    assert.equal(session.lastSeq, 0);
    const sessionId = session.id;

    const snap = await client.query('session.get', { sessionId });
    assert.equal(snap.session.id, sessionId);
    assert.deepEqual(snap.queue, []);

    const a = await client.mutation('message.enqueueMessage', { sessionId, content: 'a' });
    const b = await client.mutation('message.enqueueMessage', { sessionId, content: 'b' });
    const d = await client.mutation('message.enqueueMessage', { sessionId, content: 'c' });
    for (const [m, content] of [
      [a, 'a'],
      [b, 'b'],
      [d, 'c'],
    ]) {
      assert.equal(m.content, content);
      assert.equal(typeof m.id, 'string');
      assert.deepEqual(m.attachments, []);
      assert.equal(typeof m.enqueuedAt, 'number');
    }
    const contents = async () => (await client.query('message.getQueuedMessages', { sessionId })).map((m) => m.content);
    assert.deepEqual(await contents(), ['a', 'b', 'c']);

    const updated = await client.mutation('message.updateQueuedMessage', { sessionId, messageId: b.id, content: 'B' });
    assert.equal(updated.id, b.id);
    assert.equal(updated.content, 'B');
    assert.deepEqual(await contents(), ['a', 'B', 'c']);

    const order = await client.mutation('message.moveQueuedMessage', { sessionId, messageId: d.id, toIndex: 0 });
    assert.deepEqual(order.map((m) => m.content), ['c', 'a', 'B']);
    assert.deepEqual(await contents(), ['c', 'a', 'B']);

    assert.equal(await client.mutation('message.removeQueuedMessage', { sessionId, messageId: a.id }), null);
    assert.deepEqual(await contents(), ['c', 'B']);

    const head = await client.mutation('message.dequeueMessage', { sessionId });
    assert.equal(head.id, d.id);
    assert.deepEqual(await contents(), ['B']);

    assert.equal(await client.mutation('message.clearQueue', { sessionId }), null);
    assert.deepEqual(await contents(), []);
    assert.equal(await client.mutation('message.dequeueMessage', { sessionId }), null);

    const after = await client.query('session.get', { sessionId });
    assert.deepEqual(after.queue, []);
    assert.equal(after.lastEventId, String(after.session.lastSeq));
    assert.ok(after.session.lastSeq >= 7, `lastSeq ${after.session.lastSeq}: every change is a logged event`);
  });

  test('calls made in one tick go out as one JSON array frame and each resolves', T, async () => {
    const { client, rec } = c;
    const session = await client.mutation('session.create', { queuePaused: true, title: 'batch' });
    const sessionId = session.id;
    const before = rec.sent.length;
    const [m1, m2, m3] = await Promise.all([
      client.mutation('message.enqueueMessage', { sessionId, content: 'one' }),
      client.mutation('message.enqueueMessage', { sessionId, content: 'two' }),
      client.mutation('message.enqueueMessage', { sessionId, content: 'three' }),
    ]);
    assert.deepEqual([m1.content, m2.content, m3.content], ['one', 'two', 'three']);
    const batches = rec.sent.slice(before).map((f) => JSON.parse(f.data));
    assert.equal(batches.length, 1, `expected one frame, got ${JSON.stringify(batches)}`);
    assert.ok(Array.isArray(batches[0]) && batches[0].length === 3);
    // Mutations from one connection apply in the order they were sent.
    const queued = await client.query('message.getQueuedMessages', { sessionId });
    assert.deepEqual(queued.map((m) => m.content), ['one', 'two', 'three']);

    // A mixed batch of queries and mutations: each answer arrives in its own (non-array) frame.
    const mark = rec.received.length;
    const sentMark = rec.sent.length;
    const [list, snap, dq] = await Promise.all([
      client.query('message.getQueuedMessages', { sessionId }),
      client.query('session.get', { sessionId }),
      client.mutation('message.dequeueMessage', { sessionId }),
    ]);
    assert.equal(list.length >= 2, true);
    assert.equal(snap.session.id, sessionId);
    assert.equal(dq.content, 'one');
    const out = rec.sent.slice(sentMark).map((f) => JSON.parse(f.data));
    assert.equal(out.length, 1);
    assert.equal(out[0].length, 3);
    const ids = out[0].map((m) => m.id);
    const replies = rec.received.slice(mark).map((f) => JSON.parse(f.data));
    for (const r of replies) assert.ok(!Array.isArray(r), 'server must answer each element in its own frame');
    assert.deepEqual(replies.map((r) => r.id).sort(), [...ids].sort());
    for (const r of replies) {
      assert.equal(r.result.type, 'data');
      assert.ok(!('jsonrpc' in r), 'jsonrpc is echoed only when sent');
    }
  });
});

// With client keepAlive on, the client PINGs when idle and drops the socket if no
// PONG comes back within pongTimeoutMs. The server must answer every PING, so the first socket survives.
test('client keepAlive: PINGs are answered with PONG and the socket is never replaced', T, async () => {
  const c = wsClientFor(undefined, { keepAlive: { enabled: true, intervalMs: 150, pongTimeoutMs: 1_000 } });
  try {
    await c.client.query('session.list', {});
    await until(() => c.rec.sent.filter((f) => f.data === 'PING').length >= 3, 'three idle PINGs');
    await until(() => c.rec.received.filter((f) => f.data === 'PONG').length >= 3, 'three PONGs');
    assert.equal(c.rec.instances.length, 1, 'no reconnect: every PING was answered in time');
    assert.ok((await c.client.query('session.list', {})).items);
  } finally {
    c.close();
  }
});
