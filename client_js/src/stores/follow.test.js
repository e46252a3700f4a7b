// openSession()'s wiring, on the in-memory session model instead of a socket: resync-required, optimistic
// queue items matched by clientRequestId, and a write retried after its answer was lost.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeSession, serverView, storeView, until } from '../testing/fake-server.js';
import * as lib from '../index.js';

const T = { timeout: 10_000 };

function open(server, retry = { attempts: 4, baseDelayMs: 1, maxDelayMs: 1 }) {
  const requests = lib.createRequests({ call: server.call, retry });
  const session = lib.openSession(server.connection(), requests, server.id, { reloadDelayMs: () => 1 });
  return { session, requests };
}

const inSync = (server, session) => JSON.stringify(storeView(session)) === JSON.stringify(serverView(server.get()));

describe('openSession on a session model', () => {
  test('follows live events and stays equal to session.get', T, async () => {
    const server = new FakeSession();
    server.enqueue('before');
    const { session } = open(server);
    await session.ready;
    const mid = server.startRun('hello');
    server.lastSubscription.sub.push(server.delta(mid, 'hi '));
    server.lastSubscription.sub.push(server.delta(mid, 'there'));
    server.enqueue('while answering');
    await until(() => inSync(server, session), 'the stores to match session.get');
    assert.deepEqual(storeView(session), serverView(server.get()));
    assert.equal(session.status.get(), 'live');
    session.close();
  });

  test('onEvent: each applied event once, in order; repeats are not passed on', T, async () => {
    const server = new FakeSession();
    const { session } = open(server);
    await session.ready;
    const seen = [];
    const stop = session.onEvent((e, id) => seen.push([id, e.type]));
    const a = server.enqueue('a');
    server.lastSubscription.sub.push(server.log.at(-1)); // a repeat
    const mid = server.startRun('go');
    server.lastSubscription.sub.push(server.delta(mid, 'x'));
    stop();
    server.removeQueued(a.id);
    await until(() => inSync(server, session), 'the stores to match session.get');
    assert.deepEqual(seen, [['1', 'queue-message-added'], ['2', 'message-created'], ['3', 'run-started'],
      ['4', 'session-updated'], ['5', 'message-created'], ['5', 'text-delta']]);
    session.close();
  });

  test('resync-required: the copy is read again and followed from the new lastEventId', T, async () => {
    const server = new FakeSession();
    const { session } = open(server);
    await session.ready;
    const first = server.lastSubscription.sub;
    first.hold = true; // this subscriber falls behind...
    server.enqueue('a');
    const b = server.enqueue('b');
    server.moveQueued(b.id, 0);
    server.trim(server.seq); // ...and the log no longer holds where it is
    // The wire drops; the resubscription from the last id seen finds that position gone from the log.
    first.drop();
    await until(() => inSync(server, session), 'the resynced copy to match session.get');
    assert.equal(session.resyncs(), 1);
    assert.equal(server.lastSubscription.input.lastEventId, server.get().lastEventId);
    assert.deepEqual(storeView(session), serverView(server.get()));
    session.close();
  });

  test('an optimistic queue item shows at once and gives way to the server item with its clientRequestId', T, async () => {
    const server = new FakeSession();
    const { session } = open(server);
    await session.ready;
    const sub = server.lastSubscription.sub;
    sub.hold = true; // the event arrives after the call's answer
    const done = session.enqueue('typed fast');
    const pending = session.queue.get();
    assert.equal(pending.length, 1);
    assert.equal(pending[0].pending, true);
    assert.equal(pending[0].content, 'typed fast');
    const item = await done;
    assert.deepEqual(session.queue.get().map((q) => q.content), ['typed fast'], 'still shown once, still pending');
    sub.hold = false;
    sub.flush();
    assert.deepEqual(session.queue.get(), server.get().queue);
    assert.equal(session.queue.get()[0].id, item.id);
    assert.equal(session.queue.get()[0].clientRequestId, server.calls.at(-1).input.clientRequestId);
    session.close();
  });

  test('a write whose answer was lost is sent again with the same clientRequestId and applied once', T, async () => {
    const server = new FakeSession();
    const { session } = open(server);
    await session.ready;
    server.dropAfterApply = 1;
    const item = await session.enqueue('exactly once');
    const sends = server.calls.filter((c) => c.path === 'message.enqueueMessage');
    assert.equal(sends.length, 2, 'retried after the lost answer');
    assert.equal(sends[0].input.clientRequestId, sends[1].input.clientRequestId);
    assert.equal(server.get().queue.length, 1);
    assert.equal(item.id, server.get().queue[0].id);
    await until(() => inSync(server, session), 'the stores to match session.get');
    assert.deepEqual(session.queue.get(), server.get().queue);
    session.close();
  });

  test('a write that never gets an answer fails after the bounded attempts and takes its pending item away', T, async () => {
    const server = new FakeSession();
    const { session } = open(server, { attempts: 3, baseDelayMs: 1, maxDelayMs: 1 });
    await session.ready;
    server.dropAfterApply = 3;
    await assert.rejects(session.enqueue('lost'), (err) => lib.isNoAnswer(err));
    assert.equal(server.calls.filter((c) => c.path === 'message.enqueueMessage').length, 3);
    // The server did apply it: the event shows it, and no pending copy is left beside it.
    await until(() => inSync(server, session), 'the stores to match session.get');
    assert.deepEqual(session.queue.get(), server.get().queue);
    session.close();
  });

  test('approve: the decision is recorded as this client\'s', T, async () => {
    const server = new FakeSession();
    server.startRun('go');
    const callId = server.toolCall('deploy', { requiresApproval: true });
    const { session } = open(server);
    await session.ready;
    assert.deepEqual(session.run.get().pendingApprovals.map((a) => a.callId), [callId]);
    await session.approve(callId, true);
    await until(() => session.run.get().pendingApprovals.length === 0, 'the approval to resolve');
    assert.deepEqual(session.run.get().decisions[callId], { approved: true, by: 'self', decidedBy: { userId: 'u1', userName: 'ada', deviceName: 'laptop' } });
    assert.deepEqual(session.decisions.get()[callId], session.run.get().decisions[callId]);
    assert.deepEqual(storeView(session), serverView(server.get()));
    session.close();
  });
});

describe('watchSessions on a list model', () => {
  const summary = (id, createdAt) => ({ id, title: id, titleSource: 'user', status: 'idle', provider: 'echo', model: 'echo',
    queuePaused: false, createdAt, updatedAt: createdAt, queueLength: 0 });

  /** The server's side: the caller's sessions, a feed numbered per user, and subscriptions to it. */
  function listModel() {
    const model = { sessions: [summary('a', 1)], feedSeq: 3, subs: [], lists: 0 };
    model.call = async (kind, path) => {
      assert.equal(path, 'session.list');
      model.lists += 1;
      return { items: [...model.sessions].sort((x, y) => y.createdAt - x.createdAt), nextCursor: null,
        feedEventId: String(model.feedSeq) };
    };
    model.create = (id, createdAt) => {
      model.sessions.push(summary(id, createdAt));
      model.feedSeq += 1;
      return { id: String(model.feedSeq), data: { type: 'session-created', session: summary(id, createdAt) } };
    };
    model.connection = {
      isFinal: () => false,
      reportLinkState() {},
      untyped: {
        subscription(path, input, handlers) {
          assert.equal(path, 'session.feed');
          const sub = { input, handlers, open: true };
          model.subs.push(sub);
          queueMicrotask(() => handlers.onStarted?.({}));
          return { unsubscribe: () => { sub.open = false; } };
        },
      },
    };
    return model;
  }

  test('follows the feed from feedEventId; resync-required reads the list again', T, async () => {
    const model = listModel();
    const requests = lib.createRequests({ call: model.call });
    const list = lib.watchSessions(model.connection, requests);
    await list.ready;
    await until(() => list.status.get() === 'live', 'the feed to start');
    assert.equal(model.subs[0].input.lastEventId, '3');
    const b = model.create('b', 2);
    model.subs[0].handlers.onData(b);
    model.subs[0].handlers.onData(b); // a repeat
    assert.deepEqual(list.items.get().map((s) => s.id), ['b', 'a']);
    // Missed while the feed was away and trimmed: the server says so and ends the stream.
    model.create('c', 3);
    model.subs[0].handlers.onData({ type: 'resync-required', lastEventId: '4' });
    await until(() => list.items.get().length === 3, 'the list to be read again');
    assert.equal(model.lists, 2);
    assert.deepEqual(list.items.get().map((s) => s.id), ['c', 'b', 'a']);
    await until(() => model.subs.length === 2, 'a new feed subscription');
    assert.equal(model.subs[1].input.lastEventId, String(model.feedSeq));
    assert.equal(model.subs[0].open, false);
    list.close();
  });
});
