// The pure reducers: a session's events, delivered out of order, repeated or overtaken by a snapshot, leave the
// client's state equal to what the server's session.get describes.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeSession } from '../testing/fake-server.js';
import * as lib from '../index.js';

/** The client's state after `session.get` at `from`, then `items` applied in the order given. */
function follow(server, snap, items) {
  let state = lib.fromSnapshot(snap);
  const outcomes = [];
  for (const item of items) {
    const r = lib.applyTracked(state, item.id, item.data);
    state = r.state;
    outcomes.push(r.outcome);
  }
  return { state, outcomes };
}

/** session.get's messages with a streaming message's text from run.streaming, as a client must show them. */
function expectedMessages(snap) {
  const live = snap.run?.streaming;
  return snap.messages.map((m) => (live && m.id === live.messageId ? { ...m, content: live.text } : m));
}

const textOf = (state, id) => state.messages.list.find((m) => m.id === id).content;

describe('streaming text', () => {
  test('deltas out of order: one past the end is held until the gap is filled', () => {
    const server = new FakeSession();
    const start = server.get();
    const mid = server.startRun('hi');
    const durable = server.log.slice();
    const [d0, d1, d2, d3] = ['one ', 'two ', 'three ', 'four'].map((w) => server.delta(mid, w));

    let { state } = follow(server, start, [...durable, d0, d2, d3]);
    assert.equal(textOf(state, mid), 'one ', 'd2 and d3 wait for d1');
    state = lib.applyTracked(state, d1.id, d1.data).state;
    assert.deepEqual(state.messages.list, expectedMessages(server.get()));
    assert.equal(textOf(state, mid), 'one two three four');
  });

  test('a delta whose range is already there is dropped', () => {
    const server = new FakeSession();
    const start = server.get();
    const mid = server.startRun('hi');
    const durable = server.log.slice();
    const d0 = server.delta(mid, 'héllo ');
    const d1 = server.delta(mid, '👋🏽 wörld');
    const { state, outcomes } = follow(server, start, [...durable, d0, d1, d0, d1, d0]);
    assert.ok(outcomes.every((o) => o === 'applied'));
    assert.deepEqual(state.messages.list, expectedMessages(server.get()));
  });

  test('a snapshot after deltas replaces the text; later deltas continue from it, covered ones are dropped', () => {
    const server = new FakeSession();
    const start = server.get();
    const mid = server.startRun('hi');
    const durable = server.log.slice();
    const d0 = server.delta(mid, 'alpha ');
    const d1 = server.delta(mid, 'beta ');
    const d2 = server.delta(mid, 'gamma ');
    const snap = server.snapshot(mid); // covers d0..d2
    const d3 = server.delta(mid, 'delta ');
    const d4 = server.delta(mid, 'epsilon');

    // d0 arrives, d1 is lost, d3 arrives early (held), then the snapshot, then stale d1/d2 and the rest.
    let { state } = follow(server, start, [...durable, d0, d3]);
    assert.equal(textOf(state, mid), 'alpha ');
    ({ state } = follow(server, start, [...durable, d0, d3, snap]));
    assert.equal(textOf(state, mid), 'alpha beta gamma delta ', 'the snapshot filled the gap before the held delta');
    ({ state } = follow(server, start, [...durable, d0, d3, snap, d1, d2, d4]));
    assert.deepEqual(state.messages.list, expectedMessages(server.get()));
  });

  test('message-completed settles the text; stream events for it afterwards change nothing', () => {
    const server = new FakeSession();
    const start = server.get();
    const mid = server.startRun('hi');
    const d0 = server.delta(mid, 'partial');
    const late = server.delta(mid, ' answer');
    server.complete(mid);
    const { state } = follow(server, start, [...server.log.slice(0, 4), d0, ...server.log.slice(4), late, d0]);
    assert.deepEqual(state.messages.list, expectedMessages(server.get()));
    assert.equal(state.run, null);
    assert.deepEqual(state.messages.streams, {});
  });

  test('joining mid-stream: session.get carries the partial text, deltas continue it', () => {
    const server = new FakeSession();
    const mid = server.startRun('hi');
    server.delta(mid, 'already ');
    const snap = server.get();
    const d1 = server.delta(mid, 'streamed');
    const { state } = follow(server, snap, [d1]);
    assert.deepEqual(state.messages.list, expectedMessages(server.get()));
  });
});

describe('durable events', () => {
  test('a duplicate delivery (seq at or below the last applied) is ignored', () => {
    const server = new FakeSession();
    const start = server.get();
    const a = server.enqueue('a');
    server.enqueue('b');
    server.moveQueued(a.id, 1);
    server.updateQueued(a.id, 'a2');
    const log = server.log;
    const items = [log[0], log[1], log[0], log[2], log[1], log[3], log[3], log[2]];
    const { state, outcomes } = follow(server, start, items);
    assert.deepEqual(outcomes, ['applied', 'applied', 'duplicate', 'applied', 'duplicate', 'applied', 'duplicate', 'duplicate']);
    assert.deepEqual(lib.queueItems(state.queue), server.get().queue);
    assert.equal(state.lastSeq, 4);
  });

  test('a skipped seq asks for a resync instead of guessing', () => {
    const server = new FakeSession();
    const start = server.get();
    server.enqueue('a');
    server.enqueue('b');
    const { outcomes } = follow(server, start, [server.log[1]]);
    assert.deepEqual(outcomes, ['resync']);
  });

  test('queue, session and run follow the server through a run with a tool approval', () => {
    const server = new FakeSession();
    const start = server.get();
    const q1 = server.enqueue('first');
    server.enqueue('second');
    server.clearQueue();
    server.enqueue('third');
    server.removeQueued(q1.id); // already gone: nothing to remove on either side
    const mid = server.startRun('go');
    const callId = server.toolCall('deploy', { requiresApproval: true });
    server.run.status = 'requires-action';
    server.setStatus('requires-action');
    const mid2Snap = server.get();
    let { state } = follow(server, start, server.log);
    assert.deepEqual(state.run.pendingApprovals, mid2Snap.run.pendingApprovals);
    assert.deepEqual(state.run.pendingToolCalls, mid2Snap.run.pendingToolCalls);
    assert.equal(state.run.status, 'requires-action');
    const before = server.log.length;
    server.approve(callId, false);
    state = lib.noteOwnDecision(state, callId);
    ({ state } = { state: lib.applyAll(state, server.log.slice(before)).state });
    const snap = server.get();
    assert.deepEqual(state.run.pendingToolCalls, snap.run.pendingToolCalls);
    assert.deepEqual(state.run.pendingApprovals, []);
    assert.deepEqual(state.run.decisions[callId], { approved: false, by: 'self', decidedBy: { userId: 'u1', userName: 'ada', deviceName: 'laptop' } });
    assert.deepEqual(lib.queueItems(state.queue), snap.queue);
    assert.equal(state.session.status, snap.session.status);
    assert.equal(state.messages.list.find((m) => m.id === mid).status, 'streaming');
  });
});

describe('versions and branches', () => {
  /** Two exchanges, then the second user message edited: the log holds a branch change and a new version. */
  function edited() {
    const server = new FakeSession();
    const start = server.get();
    const exchanges = [];
    for (const text of ['one', 'two']) {
      const answer = server.startRun(text);
      server.delta(answer, `echo ${text}`);
      server.complete(answer);
      exchanges.push(server.messages[server.messages.length - 2].id, answer);
    }
    const answer = server.edit(exchanges[2], 'two, edited');
    const deltas = [server.delta(answer, 'echo two, '), server.delta(answer, 'edited')];
    server.complete(answer);
    return { server, start, exchanges, deltas };
  }

  test('an edit, a switch back and a regenerate: the active path and versions from the events alone', () => {
    const { server, start, exchanges, deltas } = edited();
    let { state, outcomes } = follow(server, start, [...server.log.slice(0, -3), ...deltas, ...server.log.slice(-3)]);
    assert.ok(outcomes.every((o) => o === 'applied'));
    assert.deepEqual(state.messages.list, expectedMessages(server.get()));
    assert.deepEqual(state.messages.list[2].versions, { index: 1, count: 2 });
    const seen = server.log.length;
    server.switchBranch(exchanges[2]); // "Previous version"
    ({ state } = { state: lib.applyAll(state, server.log.slice(seen)).state });
    assert.deepEqual(state.messages.list, expectedMessages(server.get()));
    assert.deepEqual(state.messages.list.map((m) => m.id), exchanges);
    const again = server.log.length;
    const fresh = server.regenerate(exchanges[2]);
    server.delta(fresh, 'another');
    server.complete(fresh);
    ({ state } = { state: lib.applyAll(state, server.log.slice(again)).state });
    assert.deepEqual(state.messages.list, expectedMessages(server.get()));
    assert.deepEqual(state.messages.list[3].versions, { index: 1, count: 2 });
  });

  test('out of order: a branch change ahead of its seq asks for a resync, a repeat of one is ignored', () => {
    const { server, start } = edited();
    const change = server.log.findIndex((i) => i.data.type === 'branch-changed');
    const ahead = follow(server, start, [...server.log.slice(0, change - 1), server.log[change], server.log[change - 1]]);
    assert.equal(ahead.outcomes[change - 1], 'resync', 'the change came before the event it follows');
    const repeated = follow(server, start, [...server.log.slice(0, change + 2), server.log[change], ...server.log.slice(change + 2)]);
    assert.equal(repeated.outcomes[change + 2], 'duplicate');
    assert.deepEqual(repeated.state.messages.list, expectedMessages(server.get()));
  });

  test('resumed: a copy from before the edit, resumed with its lastEventId, replays the change without a refetch', () => {
    const server = new FakeSession();
    const first = server.startRun('one');
    server.delta(first, 'echo one');
    server.complete(first);
    const user = server.messages[0].id;
    const before = server.get(); // the copy a client had when its socket died
    const fresh = server.edit(user, 'one, edited');
    const partial = server.delta(fresh, 'echo one, ');
    const resumed = lib.applyAll(lib.fromSnapshot(before), server.log.slice(Number(before.lastEventId)));
    assert.equal(resumed.outcome, 'applied');
    // The stream after a resume: a snapshot of the streaming answer, then a delta it already covers, then more.
    let state = lib.applyTracked(resumed.state, partial.id, server.snapshot(fresh).data).state;
    state = lib.applyTracked(state, partial.id, partial.data).state;
    state = lib.applyTracked(state, partial.id, server.delta(fresh, 'edited').data).state;
    assert.deepEqual(state.messages.list, expectedMessages(server.get()));
    assert.deepEqual(state.messages.list.map((m) => m.content), ['one, edited', 'echo one, edited']);
    assert.deepEqual(state.messages.list[0].siblingIds, [user, state.messages.list[0].id]);
  });

  test('a branch change whose start this copy does not hold asks for a resync', () => {
    const { server, start } = edited();
    const change = server.log.findIndex((i) => i.data.type === 'branch-changed');
    let state = lib.fromSnapshot(start);
    state = lib.applyAll(state, server.log.slice(0, change)).state;
    state = { ...state, messages: { ...state.messages, list: state.messages.list.slice(2), before: 2 } }; // older pages not loaded
    const r = lib.applyTracked(state, server.log[change].id, server.log[change].data);
    assert.equal(r.outcome, 'resync');
  });

  test('continue: the same message streams on from the text it has', () => {
    const server = new FakeSession();
    const start = server.get();
    const answer = server.startRun('long');
    const d0 = server.delta(answer, 'cut ');
    server.complete(answer);
    const mid = server.continueLast();
    const d1 = server.delta(mid, 'off');
    server.complete(mid);
    const { state, outcomes } = follow(server, start, [...server.log.slice(0, 4), d0, ...server.log.slice(4, -3), d1, ...server.log.slice(-3)]);
    assert.ok(outcomes.every((o) => o === 'applied'));
    assert.deepEqual(state.messages.list, expectedMessages(server.get()));
    assert.equal(state.messages.list.length, 2);
    assert.equal(state.messages.list[1].content, 'cut off');
  });
});

describe('run', () => {
  test('joining after an approval was answered elsewhere: the decision shows, as another client\'s', () => {
    const server = new FakeSession();
    server.startRun('go');
    const first = server.toolCall('deploy', { requiresApproval: true });
    const second = server.toolCall('notify', { requiresApproval: true });
    server.approve(first, true);
    const snap = server.get();
    const state = lib.fromSnapshot(snap);
    assert.deepEqual(state.run.decisions, { [first]: { approved: true, by: 'other', decidedBy: null } });
    assert.deepEqual(state.decisions, state.run.decisions);
    assert.deepEqual(state.run.pendingApprovals.map((a) => a.callId), [second]);
    assert.deepEqual(state.run.pendingToolCalls, snap.run.pendingToolCalls);
  });
});

describe('tool calls and decisions', () => {
  test('tool-call arguments stream as previews, placed by offset, and end with the message', () => {
    const server = new FakeSession();
    const start = server.get();
    const mid = server.startRun('use a tool');
    const [begin, a, b, c] = server.toolCallStream(mid, 'call-1', 'lookup', '{"q":"ü"}', ['{"q"', ':"ü', '"}']);
    let { state } = follow(server, start, [...server.log, begin, a, c]);
    assert.deepEqual(lib.previewsOf(state.previews), { 'call-1': { messageId: mid, callId: 'call-1', name: 'lookup', index: 0, arguments: '{"q"' } });
    state = lib.applyAll(state, [b, a]).state;
    assert.equal(lib.previewsOf(state.previews)['call-1'].arguments, '{"q":"ü"}');
    const before = server.log.length;
    server.complete(mid);
    state = lib.applyAll(state, server.log.slice(before)).state;
    assert.deepEqual(state.previews, {});
  });

  test('decisions carry who decided and stay after the run ends', () => {
    const server = new FakeSession();
    const start = server.get();
    const mid = server.startRun('go');
    const mine = server.toolCall('deploy', { requiresApproval: true });
    const theirs = server.toolCall('notify', { requiresApproval: true });
    let state = lib.fromSnapshot(start);
    state = lib.applyAll(state, server.log).state;
    state = lib.noteOwnDecision(state, mine);
    const before = server.log.length;
    server.approve(mine, true);
    server.approve(theirs, false);
    server.complete(mid);
    state = lib.applyAll(state, server.log.slice(before)).state;
    assert.equal(state.run, null);
    const decidedBy = { userId: 'u1', userName: 'ada', deviceName: 'laptop' };
    assert.deepEqual(state.decisions, {
      [mine]: { approved: true, by: 'self', decidedBy },
      [theirs]: { approved: false, by: 'other', decidedBy },
    });
  });
});

describe('session list', () => {
  const summary = (id, createdAt, title = id) => ({ id, title, titleSource: 'user', status: 'idle', provider: 'echo',
    model: 'echo', queuePaused: false, createdAt, updatedAt: createdAt, queueLength: 0 });

  test('feed events keep the list in session.list order; repeats are ignored', () => {
    let state = lib.sessionsFromPage({ items: [summary('b', 2), summary('a', 1)], nextCursor: null, feedEventId: '7' });
    const apply = (id, e) => {
      const r = lib.applyFeed(state, id, e);
      state = r.state;
      return r.duplicate;
    };
    assert.equal(apply('7', { type: 'session-created', session: summary('x', 9) }), true);
    assert.equal(apply('8', { type: 'session-created', session: summary('c', 3) }), false);
    assert.equal(apply('9', { type: 'session-updated', session: { ...summary('a', 1), title: 'renamed', status: 'running' } }), false);
    assert.equal(apply('10', { type: 'session-deleted', sessionId: 'b' }), false);
    assert.equal(apply('9', { type: 'session-deleted', sessionId: 'c' }), true);
    assert.deepEqual(state.items.map((s) => [s.id, s.title, s.status]), [['c', 'c', 'idle'], ['a', 'renamed', 'running']]);
    const skipped = lib.applyFeed(state, '12', { type: 'session-deleted', sessionId: 'a' });
    assert.equal(skipped.resync, true, 'seq 11 is missing: read the list again');
    assert.equal(skipped.state, state);
  });
});
