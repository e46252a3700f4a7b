// session.events over httpSubscriptionLink (server-sent events), authenticated
// with connectionParams, once with `eventsource` (resumes with a Last-Event-ID header) and once with
// `event-source-polyfill` (resumes with a ?lastEventId= query parameter).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { EventSource as EventSourceLib } from 'eventsource';
import { EventSourcePolyfill } from 'event-source-polyfill';
import { createTRPCUntypedClient, httpSubscriptionLink } from '@trpc/client';
import {
  HTTP_URL,
  T,
  TOKEN,
  TOKEN2,
  assertTrpcError,
  collect,
  createSession,
  mutate,
  range,
  sseClientFor,
  tcpProxy,
  until,
} from '../lib/harness.js';

const impls = {
  eventsource: { EventSource: EventSourceLib, resumeMarker: /^last-event-id: *(\S+)$/im },
  'event-source-polyfill': { EventSource: EventSourcePolyfill, resumeMarker: /[?&]lastEventId=([^&\s]+)/ },
};

for (const [name, { EventSource, resumeMarker }] of Object.entries(impls)) {
  describe(`httpSubscriptionLink with ${name}`, () => {
    let proxy;
    before(async () => {
      proxy = await tcpProxy();
    });
    after(() => proxy.close());

    test('connected -> onStarted; tracked events reach onData as {id, data} in order', T, async () => {
      const { id: sessionId } = await createSession(undefined, `sse-${name}`);
      const client = sseClientFor(EventSource, { url: proxy.url });
      const s = collect(client, 'session.events', { sessionId });
      try {
        await until(() => s.started === 1, 'onStarted');
        const m = await mutate('message.enqueueMessage', { sessionId, content: 'hello' });
        await mutate('message.updateQueuedMessage', { sessionId, messageId: m.id, content: 'hello!' });
        await mutate('session.setTitle', { sessionId, title: 'renamed' });
        await until(() => s.events.length >= 3, '3 events');
        assert.deepEqual(s.ids(), range(1, s.events.length));
        for (const ev of s.events) {
          assert.deepEqual(Object.keys(ev).sort(), ['data', 'id']);
          assert.equal(ev.data.sessionId, sessionId);
        }
        assert.equal(s.events[0].data.type, 'queue-message-added');
        assert.equal(s.events[0].data.message.id, m.id);
        assert.equal(s.events[1].data.type, 'queue-message-updated');
        assert.equal(s.events[1].data.message.content, 'hello!');
        assert.ok(s.events.slice(2).some((e) => e.data.type === 'title-changed' && e.data.title === 'renamed'));
        assert.deepEqual(s.errors, []);

        // connectionParams travel in the query string, not in a header.
        const head = proxy.requests.find((r) => r.includes('/trpc/session.events'));
        const target = new URL(head.split(' ')[1], 'http://x');
        assert.deepEqual(JSON.parse(target.searchParams.get('connectionParams')), { token: TOKEN });
        assert.deepEqual(JSON.parse(target.searchParams.get('input')), { sessionId });
        assert.doesNotMatch(head, /^authorization:/im);
      } finally {
        s.unsubscribe();
      }
    });

    test('the stream drops mid-way: the EventSource resumes natively with the last id, no gap, no duplicate', { timeout: 20_000 }, async () => {
      const { id: sessionId } = await createSession(undefined, `sse-resume-${name}`);
      const client = sseClientFor(EventSource, { url: proxy.url });
      const s = collect(client, 'session.events', { sessionId });
      try {
        await until(() => s.started === 1, 'onStarted');
        const a = await mutate('message.enqueueMessage', { sessionId, content: 'a' }); // 1
        await mutate('message.enqueueMessage', { sessionId, content: 'b' }); // 2
        await until(() => s.events.length >= 2, 'events 1..2');
        assert.deepEqual(s.ids(), range(1, 2));

        const before = proxy.requests.length;
        proxy.cut(); // the network drops the SSE response mid-stream
        // Changes while the EventSource waits to reconnect (1 s polyfill, 3 s eventsource).
        await mutate('message.updateQueuedMessage', { sessionId, messageId: a.id, content: 'A' }); // 3
        await mutate('message.dequeueMessage', { sessionId }); // 4
        await until(() => s.events.length >= 4, 'events 3..4 after the reconnect', 12_000);
        await mutate('message.clearQueue', { sessionId }); // 5, live after the resume
        await until(() => s.events.length >= 5, 'event 5');
        assert.deepEqual(s.ids(), range(1, 5));
        assert.deepEqual(
          s.events.map((e) => e.data.type),
          ['queue-message-added', 'queue-message-added', 'queue-message-updated', 'queue-message-removed', 'queue-cleared'],
        );
        assert.deepEqual(s.errors, []);

        const resumed = proxy.requests.slice(before).find((r) => r.includes('/trpc/session.events'));
        assert.ok(resumed, 'the EventSource reconnected');
        assert.equal(resumed.match(resumeMarker)?.[1], '2', `resume marker in:\n${resumed}`);
      } finally {
        s.unsubscribe();
      }
    });

    test('a new subscription with lastEventId in input gets exactly the events after it', T, async () => {
      const { id: sessionId } = await createSession(undefined, `sse-input-${name}`);
      const client = sseClientFor(EventSource);
      const first = collect(client, 'session.events', { sessionId });
      let second;
      try {
        await until(() => first.started === 1, 'onStarted');
        await mutate('message.enqueueMessage', { sessionId, content: 'x' }); // 1
        await mutate('message.enqueueMessage', { sessionId, content: 'y' }); // 2
        await until(() => first.events.length >= 2, 'events 1..2');
        first.unsubscribe();
        const last = first.events.at(-1).id;
        await mutate('message.dequeueMessage', { sessionId }); // 3
        await mutate('message.dequeueMessage', { sessionId }); // 4
        second = collect(client, 'session.events', { sessionId, lastEventId: last });
        await until(() => second.events.length >= 2, 'replayed 3..4');
        await mutate('message.enqueueMessage', { sessionId, content: 'z' }); // 5
        await until(() => second.events.length >= 3, 'live 5');
        assert.deepEqual([...first.ids(), ...second.ids()], range(1, 5));
        assert.deepEqual(first.ids(), range(1, 2), 'nothing after unsubscribe');
      } finally {
        first.unsubscribe();
        second?.unsubscribe();
      }
    });

    test("another user's session -> onError NOT_FOUND (terminal, no reconnect)", T, async () => {
      const { id: foreignId } = await createSession(TOKEN2, `sse-foreign-${name}`);
      const client = sseClientFor(EventSource, { url: proxy.url });
      const before = proxy.requests.length;
      const s = collect(client, 'session.events', { sessionId: foreignId });
      try {
        await until(() => s.errors.length === 1, 'onError');
        assertTrpcError(s.errors[0], 'NOT_FOUND', -32004, 404);
        assert.deepEqual(s.events, []);
        const tries = proxy.requests.slice(before).filter((r) => r.includes('/trpc/session.events'));
        assert.equal(tries.length, 1, 'a non-retryable error must not reconnect');
      } finally {
        s.unsubscribe();
      }
    });

    test('no token -> onError UNAUTHORIZED with its code', T, async () => {
      const { id: sessionId } = await createSession(undefined, `sse-notoken-${name}`);
      const client = createTRPCUntypedClient({ links: [httpSubscriptionLink({ url: HTTP_URL, EventSource })] });
      const s = collect(client, 'session.events', { sessionId });
      try {
        await until(() => s.errors.length === 1, 'onError');
        assertTrpcError(s.errors[0], 'UNAUTHORIZED', -32001, 401);
        assert.deepEqual(s.events, []);
      } finally {
        s.unsubscribe();
      }
    });

    // An invalid token must reach the client as a tRPC error it can read (err.data.code), as the reference
    // server does when createContext throws: 200 + `connected` + `serialized-error`.
    // A bare HTTP 401 is opaque to an EventSource: the client only sees "Non-200 status code (401)".
    test('a bad token -> onError UNAUTHORIZED with its code', T, async () => {
      const { id: sessionId } = await createSession(undefined, `sse-badtoken-${name}`);
      const client = sseClientFor(EventSource, { token: 'cs_wrong' });
      const s = collect(client, 'session.events', { sessionId });
      try {
        await until(() => s.errors.length === 1, 'onError');
        assertTrpcError(s.errors[0], 'UNAUTHORIZED', -32001, 401);
        assert.deepEqual(s.events, []);
      } finally {
        s.unsubscribe();
      }
    });
  });
}
