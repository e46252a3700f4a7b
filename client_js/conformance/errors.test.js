// Error mapping as seen through @trpc/client, over wsLink and httpLink.
// The server runs with CHATSYNC_MAX_QUEUE_LENGTH=5 (set by tests/test_conformance_js.py).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  T,
  TOKEN,
  TOKEN2,
  assertTrpcError,
  createSession,
  httpClientFor,
  rawFetch,
  rejection,
  wsClientFor,
} from '../lib/harness.js';

const MAX_QUEUE = 5;

const transports = {
  wsLink: (token) => {
    const c = wsClientFor(token);
    return { client: c.client, close: c.close };
  },
  httpLink: (token) => ({ client: httpClientFor('httpLink', token).client, close: () => {} }),
};

for (const [name, make] of Object.entries(transports)) {
  describe(`error mapping over ${name}`, () => {
    let me;
    let anon;
    let mine;
    let foreign;
    before(async () => {
      me = make(TOKEN);
      anon = make(null);
      mine = await createSession(TOKEN, `errors-${name}`);
      foreign = await createSession(TOKEN2, `foreign-${name}`);
    });
    after(() => {
      me.close();
      anon.close();
    });

    test('unknown path -> NOT_FOUND -32004/404', T, async () => {
      const q = await rejection(me.client.query('no.such.procedure', {}));
      assertTrpcError(q, 'NOT_FOUND', -32004, 404);
      assert.equal(q.data.path, 'no.such.procedure');
      const m = await rejection(me.client.mutation('session.nothing', { sessionId: mine.id }));
      assertTrpcError(m, 'NOT_FOUND', -32004, 404);
    });

    test('invalid input -> BAD_REQUEST -32600/400, and nothing changes', T, async () => {
      const e1 = await rejection(me.client.query('session.get', {}));
      assertTrpcError(e1, 'BAD_REQUEST', -32600, 400);
      assert.equal(e1.data.path, 'session.get');
      const e2 = await rejection(me.client.mutation('message.enqueueMessage', { sessionId: mine.id, content: 42 }));
      assertTrpcError(e2, 'BAD_REQUEST', -32600, 400);
      const e3 = await rejection(me.client.mutation('message.moveQueuedMessage', { sessionId: mine.id, messageId: 'x', toIndex: -1 }));
      assertTrpcError(e3, 'BAD_REQUEST', -32600, 400);
      const e4 = await rejection(me.client.query('session.get', 'not-an-object'));
      assertTrpcError(e4, 'BAD_REQUEST', -32600, 400);
      assert.deepEqual(await me.client.query('message.getQueuedMessages', { sessionId: mine.id }), []);
    });

    test('missing token -> UNAUTHORIZED -32001/401', T, async () => {
      const e1 = await rejection(anon.client.query('session.get', { sessionId: mine.id }));
      assertTrpcError(e1, 'UNAUTHORIZED', -32001, 401);
      const e2 = await rejection(anon.client.mutation('message.enqueueMessage', { sessionId: mine.id, content: 'x' }));
      assertTrpcError(e2, 'UNAUTHORIZED', -32001, 401);
      const e3 = await rejection(anon.client.mutation('session.create', {}));
      assertTrpcError(e3, 'UNAUTHORIZED', -32001, 401);
      assert.deepEqual(await me.client.query('message.getQueuedMessages', { sessionId: mine.id }), []);
    });

    test("another user's session -> NOT_FOUND -32004/404 on every procedure", T, async () => {
      const sessionId = foreign.id;
      const calls = [
        ['query', 'session.get', { sessionId }],
        ['query', 'message.getQueuedMessages', { sessionId }],
        ['mutation', 'message.enqueueMessage', { sessionId, content: 'x' }],
        ['mutation', 'message.dequeueMessage', { sessionId }],
        ['mutation', 'message.clearQueue', { sessionId }],
        ['mutation', 'message.removeQueuedMessage', { sessionId, messageId: 'queue-x' }],
        ['mutation', 'message.updateQueuedMessage', { sessionId, messageId: 'queue-x', content: 'y' }],
        ['mutation', 'message.moveQueuedMessage', { sessionId, messageId: 'queue-x', toIndex: 0 }],
        ['mutation', 'session.setTitle', { sessionId, title: 'mine now' }],
      ];
      for (const [kind, path, input] of calls) {
        const err = await rejection(me.client[kind](path, input));
        assertTrpcError(err, 'NOT_FOUND', -32004, 404);
        assert.equal(err.data.path, path);
      }
      // The owner still sees an untouched session.
      const res = await rawFetch('GET', 'session.get', {
        query: `input=${encodeURIComponent(JSON.stringify({ sessionId }))}`,
        token: TOKEN2,
      });
      assert.equal(res.status, 200);
      assert.equal(res.json.result.data.session.title, `foreign-${name}`);
      assert.deepEqual(res.json.result.data.queue, []);
    });

    test('a full queue -> PRECONDITION_FAILED -32012/412, queue unchanged', T, async () => {
      const session = await me.client.mutation('session.create', { queuePaused: true, title: 'full' });
      const sessionId = session.id;
      for (let i = 0; i < MAX_QUEUE; i += 1) {
        await me.client.mutation('message.enqueueMessage', { sessionId, content: `m${i}` });
      }
      const err = await rejection(me.client.mutation('message.enqueueMessage', { sessionId, content: 'overflow' }));
      assertTrpcError(err, 'PRECONDITION_FAILED', -32012, 412);
      const queue = await me.client.query('message.getQueuedMessages', { sessionId });
      assert.deepEqual(queue.map((m) => m.content), ['m0', 'm1', 'm2', 'm3', 'm4']);
    });

    test('unknown queued message -> NOT_FOUND; the connection keeps working', T, async () => {
      const err = await rejection(me.client.mutation('message.removeQueuedMessage', { sessionId: mine.id, messageId: 'queue-nope' }));
      assertTrpcError(err, 'NOT_FOUND', -32004, 404);
      const snap = await me.client.query('session.get', { sessionId: mine.id });
      assert.equal(snap.session.id, mine.id);
    });
  });
}

// When the context cannot be created (here: an invalid token in connectionParams), the
// reference server sends the id:null error *and* answers every request already sent on that socket with the
// error under its own id, then closes. @trpc/client ignores id:null frames, so without the per-id answer the
// user's call rejects with an opaque "Unknown error" instead of UNAUTHORIZED.
describe('wsLink with an invalid token', () => {
  test('a call rejects with UNAUTHORIZED -32001/401', T, async () => {
    const c = wsClientFor('cs_not-a-valid-token', { retryDelayMs: () => 100 });
    try {
      const err = await rejection(c.client.query('session.list', {}));
      assertTrpcError(err, 'UNAUTHORIZED', -32001, 401);
      const frames = c.rec.receivedJson().map(({ msg }) => msg);
      assert.ok(frames.some((f) => f.id === null && f.error?.data?.code === 'UNAUTHORIZED'), 'the id:null error frame');
    } finally {
      c.close();
    }
  });
});
