// The session list's reducer: pinned sessions first, archived ones kept apart, search results only updated by the
// feed (never grown by it: the feed does not carry message texts).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as lib from '../index.js';

const summary = (id, createdAt, extra = {}) => ({ id, title: id, titleSource: 'user', status: 'idle', provider: 'echo',
  model: 'echo', queuePaused: false, createdAt, updatedAt: createdAt, queueLength: 0, pinned: false, archived: false,
  ...extra });

function list(items, scope, nextCursor = null) {
  let state = lib.sessionsFromPage({ items, nextCursor, feedEventId: '1' });
  let seq = 1;
  return {
    apply(e) {
      state = lib.applyFeed(state, String(++seq), e, scope).state;
      return state.items.map((s) => s.id);
    },
  };
}
const updated = (s) => ({ type: 'session-updated', session: s });

describe('session list order and scope', () => {
  test('a pin moves a session to the top on every device, an unpin back to its place', () => {
    const l = list([summary('c', 3), summary('b', 2), summary('a', 1)], {});
    assert.deepEqual(l.apply(updated(summary('a', 1, { pinned: true }))), ['a', 'c', 'b']);
    assert.deepEqual(l.apply(updated(summary('b', 2, { pinned: true }))), ['b', 'a', 'c']);
    assert.deepEqual(l.apply({ type: 'session-created', session: summary('d', 4) }), ['b', 'a', 'd', 'c']);
    assert.deepEqual(l.apply(updated(summary('b', 2, { pinned: false, title: 'renamed' }))), ['a', 'd', 'c', 'b']);
  });

  test('a session pinned from beyond the loaded pages joins the top; one unpinned past them leaves', () => {
    const l = list([summary('c', 3), summary('b', 2)], {}, 'more');
    assert.deepEqual(l.apply(updated(summary('old', 1, { pinned: true }))), ['old', 'c', 'b']);
    assert.deepEqual(l.apply(updated(summary('old', 1, { pinned: false }))), ['c', 'b']);
  });

  test('the main list drops an archived session; the archived list takes it in', () => {
    const main = list([summary('b', 2), summary('a', 1)], { archived: false });
    const archived = list([], { archived: true });
    const gone = updated(summary('a', 1, { archived: true }));
    assert.deepEqual(main.apply(gone), ['b']);
    assert.deepEqual(archived.apply(gone), ['a']);
    assert.deepEqual(main.apply({ type: 'session-created', session: summary('c', 3) }), ['c', 'b']);
    assert.deepEqual(archived.apply(updated(summary('a', 1, { archived: false }))), []);
  });

  test('search results are updated in place and never grown by the feed', () => {
    const results = list([summary('a', 1, { title: 'seedlings' })], { archived: false, search: true });
    assert.deepEqual(results.apply(updated(summary('a', 1, { title: 'greenhouse' }))), ['a']);
    assert.deepEqual(results.apply({ type: 'session-created', session: summary('b', 2) }), ['a']);
    assert.deepEqual(results.apply(updated(summary('a', 1, { archived: true }))), []);
  });
});
