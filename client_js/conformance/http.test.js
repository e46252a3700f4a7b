// httpLink, httpBatchLink, httpBatchStreamLink with Authorization: Bearer.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import {
  HTTP_URL,
  T,
  TOKEN2,
  assertTrpcError,
  createSession,
  httpClientFor,
  rawFetch,
  rejection,
} from '../lib/harness.js';

let sessionId;
let foreignId;
before(async () => {
  sessionId = (await createSession(undefined, 'http')).id;
  foreignId = (await createSession(TOKEN2, 'http-foreign')).id;
});

describe('httpBatchLink', () => {
  test('queries in one tick -> one GET a,b,c?batch=1, answered in order', T, async () => {
    const { client, calls } = httpClientFor('httpBatchLink');
    const [snap, queue, list] = await Promise.all([
      client.query('session.get', { sessionId }),
      client.query('message.getQueuedMessages', { sessionId }),
      client.query('session.list', {}),
    ]);
    assert.equal(snap.session.id, sessionId);
    assert.ok(Array.isArray(queue));
    assert.ok(list.items.some((s) => s.id === sessionId));
    assert.equal(calls.length, 1, JSON.stringify(calls));
    const url = new URL(calls[0].url);
    assert.equal(calls[0].method, 'GET');
    assert.equal(url.pathname, '/trpc/session.get,message.getQueuedMessages,session.list');
    assert.equal(url.searchParams.get('batch'), '1');
    assert.deepEqual(JSON.parse(url.searchParams.get('input')), { 0: { sessionId }, 1: { sessionId }, 2: {} });
    assert.equal(calls[0].status, 200);
  });

  test('mutations in one tick -> one POST, each resolves in order', T, async () => {
    const { client, calls } = httpClientFor('httpBatchLink');
    const s = await client.mutation('session.create', { queuePaused: true, title: 'batch-post' });
    calls.length = 0;
    const results = await Promise.all(
      ['x', 'y', 'z'].map((content) => client.mutation('message.enqueueMessage', { sessionId: s.id, content })),
    );
    assert.deepEqual(results.map((m) => m.content), ['x', 'y', 'z']);
    assert.equal(calls.length, 1, JSON.stringify(calls));
    assert.equal(calls[0].method, 'POST');
    assert.equal(new URL(calls[0].url).pathname, '/trpc/message.enqueueMessage,message.enqueueMessage,message.enqueueMessage');
    assert.deepEqual(Object.keys(JSON.parse(calls[0].body)), ['0', '1', '2']);
    const queue = await client.query('message.getQueuedMessages', { sessionId: s.id });
    assert.deepEqual(queue.map((m) => m.content).sort(), ['x', 'y', 'z']);
  });

  test('mixed success + error: value resolves, error rejects with its code (207 underneath)', T, async () => {
    const { client, calls } = httpClientFor('httpBatchLink');
    const [ok, notFound, bad] = await Promise.allSettled([
      client.query('session.get', { sessionId }),
      client.query('session.get', { sessionId: foreignId }),
      client.query('session.get', {}),
    ]);
    assert.equal(ok.status, 'fulfilled');
    assert.equal(ok.value.session.id, sessionId);
    assert.equal(notFound.status, 'rejected');
    assertTrpcError(notFound.reason, 'NOT_FOUND', -32004, 404);
    assert.equal(notFound.reason.data.path, 'session.get');
    assert.equal(bad.status, 'rejected');
    assertTrpcError(bad.reason, 'BAD_REQUEST', -32600, 400);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].status, 207);
  });

  test('raw fetch: mixed batch is 207 with an array in path order; same statuses keep that status', T, async () => {
    const input = encodeURIComponent(JSON.stringify({ 0: { sessionId }, 1: { sessionId: foreignId } }));
    const mixed = await rawFetch('GET', 'session.get,session.get', { query: `batch=1&input=${input}` });
    assert.equal(mixed.status, 207);
    assert.ok(Array.isArray(mixed.json) && mixed.json.length === 2);
    assert.equal(mixed.json[0].result.data.session.id, sessionId);
    assert.deepEqual(mixed.json[1].error.data, { code: 'NOT_FOUND', httpStatus: 404, path: 'session.get' });
    assert.equal(mixed.json[1].error.code, -32004);
    assert.match(mixed.headers.get('content-type'), /^application\/json/);

    const twoMissing = encodeURIComponent(JSON.stringify({ 0: { sessionId: foreignId }, 1: { sessionId: 'nope' } }));
    const both404 = await rawFetch('GET', 'session.get,session.get', { query: `batch=1&input=${twoMissing}` });
    assert.equal(both404.status, 404);

    const allOk = await rawFetch('GET', 'session.get%2Cmessage.getQueuedMessages', {
      query: `batch=1&input=${encodeURIComponent(JSON.stringify({ 0: { sessionId }, 1: { sessionId } }))}`,
    });
    assert.equal(allOk.status, 200, '%2C in the path splits a batch too');
    assert.equal(allOk.json.length, 2);

    const unauth = await rawFetch('GET', 'session.get,session.get', { query: `batch=1&input=${input}`, token: null });
    assert.equal(unauth.status, 401);
  });

  test('a bad bearer token rejects every op in the batch with UNAUTHORIZED', T, async () => {
    const { client, calls } = httpClientFor('httpBatchLink', 'cs_not-a-real-token');
    const results = await Promise.allSettled([
      client.query('session.get', { sessionId }),
      client.query('session.list', {}),
    ]);
    for (const r of results) {
      assert.equal(r.status, 'rejected');
      assertTrpcError(r.reason, 'UNAUTHORIZED', -32001, 401);
    }
    assert.equal(calls.length, 1);
    assert.equal(calls[0].status, 401);
  });
});

describe('httpLink', () => {
  test('query + mutation round-trip, one request each', T, async () => {
    const { client, calls } = httpClientFor('httpLink');
    const m = await client.mutation('message.enqueueMessage', { sessionId, content: 'via httpLink' });
    const queue = await client.query('message.getQueuedMessages', { sessionId });
    assert.ok(queue.some((q) => q.id === m.id && q.content === 'via httpLink'));
    assert.equal(await client.mutation('message.removeQueuedMessage', { sessionId, messageId: m.id }), null);
    assert.deepEqual(calls.map((c) => [c.method, new URL(c.url).pathname, c.status]), [
      ['POST', '/trpc/message.enqueueMessage', 200],
      ['GET', '/trpc/message.getQueuedMessages', 200],
      ['POST', '/trpc/message.removeQueuedMessage', 200],
    ]);
  });

  test('GET to a mutation -> 405 METHOD_NOT_SUPPORTED, nothing changes', T, async () => {
    const { client, calls } = httpClientFor('httpLink');
    const err = await rejection(client.query('message.enqueueMessage', { sessionId, content: 'by GET' }));
    assertTrpcError(err, 'METHOD_NOT_SUPPORTED', -32005, 405);
    assert.equal(calls[0].method, 'GET');
    assert.equal(calls[0].status, 405);

    const raw = await rawFetch('GET', 'message.enqueueMessage', {
      query: `input=${encodeURIComponent(JSON.stringify({ sessionId, content: 'raw GET' }))}`,
    });
    assert.equal(raw.status, 405);
    assert.equal(raw.json.error.data.code, 'METHOD_NOT_SUPPORTED');
    assert.equal(raw.headers.get('allow'), 'POST');

    const queue = await rawFetch('GET', 'message.getQueuedMessages', {
      query: `input=${encodeURIComponent(JSON.stringify({ sessionId }))}`,
    });
    assert.ok(!queue.json.result.data.some((q) => q.content === 'by GET' || q.content === 'raw GET'));
  });

  test('HEAD -> 204 with no body', T, async () => {
    const res = await fetch(`${HTTP_URL}/session.get`, { method: 'HEAD' });
    assert.equal(res.status, 204);
    assert.equal(await res.text(), '');
  });
});

describe('httpBatchStreamLink (JSONL)', () => {
  for (const streamHeader of ['trpc-accept', 'accept']) {
    test(`mixed success and error resolve and reject independently (streamHeader: ${streamHeader})`, T, async () => {
      const { client, calls } = httpClientFor('httpBatchStreamLink', undefined, { streamHeader });
      const [ok, missing, bad, list] = await Promise.allSettled([
        client.query('session.get', { sessionId }),
        client.query('session.get', { sessionId: foreignId }),
        client.query('message.getQueuedMessages', { sessionId: '' }),
        client.query('session.list', { limit: 200 }),
      ]);
      assert.equal(ok.status, 'fulfilled', String(ok.reason));
      assert.equal(ok.value.session.id, sessionId);
      assert.equal(missing.status, 'rejected');
      assertTrpcError(missing.reason, 'NOT_FOUND', -32004, 404);
      assert.equal(bad.status, 'rejected');
      assertTrpcError(bad.reason, 'BAD_REQUEST', -32600, 400);
      assert.equal(list.status, 'fulfilled', String(list.reason));
      assert.ok(list.value.items.some((s) => s.id === sessionId));
      assert.equal(calls.length, 1, 'one streamed batch request');
      assert.equal(calls[0].method, 'GET');
      assert.equal(new URL(calls[0].url).searchParams.get('batch'), '1');
    });
  }

  test('mutations stream too', T, async () => {
    const { client } = httpClientFor('httpBatchStreamLink');
    const s = await client.mutation('session.create', { queuePaused: true, title: 'jsonl' });
    const [a, err] = await Promise.allSettled([
      client.mutation('message.enqueueMessage', { sessionId: s.id, content: 'streamed' }),
      client.mutation('message.dequeueMessage', { sessionId: foreignId }),
    ]);
    assert.equal(a.status, 'fulfilled', String(a.reason));
    assert.equal(a.value.content, 'streamed');
    assertTrpcError(err.reason, 'NOT_FOUND', -32004, 404);
  });
});
