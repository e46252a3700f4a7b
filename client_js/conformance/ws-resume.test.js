// The client's socket is killed; @trpc/client reconnects by itself, re-sends
// connectionParams and the subscription with params.lastEventId, and the server replays exactly what was missed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { collect, createSession, mutate, range, until, wsClientFor } from '../lib/harness.js';

test('resume after the client socket is terminated: ids exactly 1..N, no gap, no duplicate', { timeout: 20_000 }, async () => {
  const { id: sessionId } = await createSession(undefined, 'resume');
  // Attempt 0 reconnects at once (the default); later attempts every 100 ms instead of 2 s, 4 s, ...
  const c = wsClientFor(undefined, { retryDelayMs: (attempt) => (attempt === 0 ? 0 : 100) });
  try {
    const s = collect(c.client, 'session.events', { sessionId });
    await until(() => s.started === 1, 'onStarted');
    const subFrame = c.rec.sentJson().find(({ msg }) => msg.method === 'subscription');
    const subId = subFrame.msg.id;
    assert.equal(subFrame.msg.params.lastEventId, undefined, 'the first subscribe carries no lastEventId');

    const enqueued = [];
    for (const content of ['1', '2', '3']) enqueued.push(await mutate('message.enqueueMessage', { sessionId, content }));
    await until(() => s.events.length >= 3, 'events 1..3');
    assert.deepEqual(s.ids(), range(1, 3));

    // Kill the socket and keep the client off the server while more changes happen.
    c.rec.gate.open = false;
    const killed = c.rec.instances[0];
    killed.terminate();
    await until(() => c.rec.instances.length >= 2, 'a reconnect attempt');
    await mutate('message.updateQueuedMessage', { sessionId, messageId: enqueued[0].id, content: 'one' }); // 4
    await mutate('message.moveQueuedMessage', { sessionId, messageId: enqueued[2].id, toIndex: 0 }); // 5
    await mutate('message.dequeueMessage', { sessionId }); // 6
    assert.deepEqual(s.ids(), range(1, 3), 'nothing can arrive while disconnected');
    assert.deepEqual(s.errors, []);

    c.rec.gate.open = true;
    await until(() => s.events.length >= 6, 'replayed events 4..6 after the reconnect');
    await mutate('message.clearQueue', { sessionId }); // 7, live on the new socket
    await until(() => s.events.length >= 7, 'live event 7');
    assert.deepEqual(s.ids(), range(1, 7));
    assert.deepEqual(
      s.events.map((e) => e.data.type),
      [
        'queue-message-added',
        'queue-message-added',
        'queue-message-added',
        'queue-message-updated',
        'queue-reordered',
        'queue-message-removed',
        'queue-cleared',
      ],
    );
    assert.equal(s.events[5].data.messageId, enqueued[2].id, 'dequeue took the moved message');
    assert.equal(s.started, 2, 'onStarted again after the resubscribe');
    assert.deepEqual(s.errors, []);

    // The wire: on the socket that got through, connectionParams first, then the same id with lastEventId "3".
    const live = c.rec.instances.findLast((w) => w.readyState === w.OPEN);
    const sent = c.rec.sentJson().filter(({ ws }) => ws === live.index).map(({ msg }) => msg);
    assert.equal(sent[0].method, 'connectionParams');
    assert.deepEqual(sent[1], {
      id: subId,
      method: 'subscription',
      params: { input: { sessionId }, path: 'session.events', lastEventId: '3' },
    });

    // A second kill, this time racing live changes against the immediate reconnect.
    live.terminate();
    const racing = [mutate('message.enqueueMessage', { sessionId, content: 'r1' }), mutate('message.enqueueMessage', { sessionId, content: 'r2' })];
    await Promise.all(racing); // 8, 9
    await mutate('message.clearQueue', { sessionId }); // 10
    await until(() => s.events.length >= 10, 'events 8..10 after the second reconnect');
    await mutate('message.enqueueMessage', { sessionId, content: 'last' }); // 11
    await until(() => s.events.length >= 11, 'event 11');
    assert.deepEqual(s.ids(), range(1, 11));
    assert.equal(s.started, 3);
    assert.deepEqual(s.errors, []);

    // The snapshot matches the stream's end.
    const snap = await c.client.query('session.get', { sessionId });
    assert.equal(snap.lastEventId, '11');
    assert.deepEqual(snap.queue.map((m) => m.content), ['last']);
    s.unsubscribe();
  } finally {
    c.close();
  }
});
