// Hand-written frames over a raw `ws` socket.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { T, TOKEN, authedRawSocket, createSession, rawSocket } from '../lib/harness.js';

/** Assert a connection-level error frame: {"id":null,"error":{message, code, data:{code, httpStatus}}}. */
function assertConnectionError(frame, key, number, httpStatus) {
  assert.equal(frame.id, null);
  assert.equal(typeof frame.error.message, 'string');
  assert.equal(frame.error.code, number);
  assert.equal(frame.error.data.code, key);
  assert.equal(frame.error.data.httpStatus, httpStatus);
  assert.ok(!('result' in frame));
}

/** A query that must still be answered: proves the socket survived. */
async function assertAlive(s, id, sessionId) {
  s.send({ id, method: 'query', params: { path: 'message.getQueuedMessages', input: { sessionId } } });
  const reply = await s.nextJson(id);
  assert.deepEqual(reply, { id, result: { type: 'data', data: [] } });
  assert.equal(s.state.closed, false);
}

describe('raw WebSocket robustness', () => {
  test('invalid JSON -> id:null PARSE_ERROR -32700, socket stays open', T, async () => {
    const { id: sessionId } = await createSession();
    const s = await authedRawSocket();
    try {
      s.send('{"id":1,"method":"query",');
      assertConnectionError(await s.nextJson(null), 'PARSE_ERROR', -32700, 400);
      s.send('not json at all');
      assertConnectionError(await s.nextJson(null), 'PARSE_ERROR', -32700, 400);
      await assertAlive(s, 2, sessionId);
    } finally {
      s.close();
    }
  });

  test('id:null -> PARSE_ERROR; an invalid element rejects the whole frame; socket stays open', T, async () => {
    const { id: sessionId } = await createSession();
    const s = await authedRawSocket();
    try {
      s.send({ id: null, method: 'query', params: { path: 'session.get', input: { sessionId } } });
      assertConnectionError(await s.nextJson(null), 'PARSE_ERROR', -32700, 400);
      // A batch with one bad element: one PARSE_ERROR for the frame, and the good element is not run.
      s.send([
        { id: 5, method: 'mutation', params: { path: 'message.enqueueMessage', input: { sessionId, content: 'no' } } },
        { id: 6, method: 'bogus', params: { path: 'session.get' } },
      ]);
      assertConnectionError(await s.nextJson(null), 'PARSE_ERROR', -32700, 400);
      await assertAlive(s, 7, sessionId); // the queue is still empty: id 5 never ran
      assert.ok(!s.inbox.some((f) => JSON.parse(f).id === 5), 'no answer for id 5');
    } finally {
      s.close();
    }
  });

  test('jsonrpc:"2.0" is echoed; string ids are echoed as strings; absent otherwise', T, async () => {
    const { id: sessionId } = await createSession();
    const s = await authedRawSocket();
    try {
      s.send({ id: 'abc', jsonrpc: '2.0', method: 'query', params: { path: 'message.getQueuedMessages', input: { sessionId } } });
      assert.deepEqual(await s.nextJson('abc'), { id: 'abc', jsonrpc: '2.0', result: { type: 'data', data: [] } });
      s.send({ id: 9, jsonrpc: '2.0', method: 'query', params: { path: 'no.such', input: {} } });
      const err = await s.nextJson(9);
      assert.equal(err.jsonrpc, '2.0');
      assert.equal(err.error.data.code, 'NOT_FOUND');
      assert.equal(err.error.data.path, 'no.such');
      s.send({ id: 10, method: 'query', params: { path: 'message.getQueuedMessages', input: { sessionId } } });
      assert.ok(!('jsonrpc' in (await s.nextJson(10))));
      // jsonrpc other than "2.0" is an invalid message.
      s.send({ id: 11, jsonrpc: '1.0', method: 'query', params: { path: 'message.getQueuedMessages', input: { sessionId } } });
      assertConnectionError(await s.nextJson(null), 'PARSE_ERROR', -32700, 400);
    } finally {
      s.close();
    }
  });

  test('PING -> PONG (raw text frames), also with a subscription running', T, async () => {
    const { id: sessionId } = await createSession();
    const s = await authedRawSocket();
    try {
      s.send('PING');
      assert.equal(await s.next((f) => f === 'PONG', 'PONG'), 'PONG');
      s.send({ id: 1, method: 'subscription', params: { path: 'session.events', input: { sessionId } } });
      assert.deepEqual(await s.nextJson(1), { id: 1, result: { type: 'started' } });
      s.send('PING');
      assert.equal(await s.next((f) => f === 'PONG', 'PONG'), 'PONG');
      s.send('PONG'); // ignored, no answer, no error
      s.send({ id: 1, method: 'subscription.stop' });
      assert.deepEqual(await s.nextJson(1), { id: 1, result: { type: 'stopped' } });
      assert.ok(!s.inbox.some((f) => f.includes('"id":null')), `unexpected: ${s.inbox}`);
    } finally {
      s.close();
    }
  });

  test('a duplicate active subscription id -> BAD_REQUEST; the first one keeps running', T, async () => {
    const { id: sessionId } = await createSession();
    const s = await authedRawSocket();
    try {
      const sub = { id: 3, method: 'subscription', params: { path: 'session.events', input: { sessionId } } };
      s.send(sub);
      assert.deepEqual(await s.nextJson(3), { id: 3, result: { type: 'started' } });
      s.send(sub);
      const dup = await s.nextJson(3);
      assert.equal(dup.error.code, -32600);
      assert.equal(dup.error.data.code, 'BAD_REQUEST');
      assert.equal(dup.error.data.httpStatus, 400);
      s.send({ id: 4, method: 'mutation', params: { path: 'message.enqueueMessage', input: { sessionId, content: 'x' } } });
      await s.nextJson(4);
      const ev = await s.nextJson(3);
      assert.equal(ev.result.type, 'data');
      assert.equal(ev.result.id, '1');
      assert.equal(ev.result.data.id, '1');
      assert.equal(ev.result.data.data.type, 'queue-message-added');
      // After a stop the id is free again.
      s.send({ id: 3, method: 'subscription.stop' });
      assert.deepEqual(await s.nextJson(3), { id: 3, result: { type: 'stopped' } });
      s.send({ ...sub, params: { ...sub.params, lastEventId: '0' } });
      assert.deepEqual(await s.nextJson(3), { id: 3, result: { type: 'started' } });
      assert.equal((await s.nextJson(3)).result.id, '1', 'params.lastEventId replays from the log');
    } finally {
      s.close();
    }
  });

  test('bad connectionParams (a non-string value) -> id:null PARSE_ERROR, then close', T, async () => {
    const s = await rawSocket({ query: '?connectionParams=1' });
    s.send({ method: 'connectionParams', data: { token: 123 } });
    assertConnectionError(await s.nextJson(null), 'PARSE_ERROR', -32700, 400);
    await s.closed();
  });

  test('a malformed connectionParams message -> id:null PARSE_ERROR, then close', T, async () => {
    const s = await rawSocket({ query: '?connectionParams=1' });
    s.send({ id: 1, method: 'query', params: { path: 'session.list', input: {} } });
    assertConnectionError(await s.nextJson(null), 'PARSE_ERROR', -32700, 400);
    await s.closed();
  });

  test('a bad token in connectionParams -> id:null UNAUTHORIZED, then close', T, async () => {
    const s = await rawSocket({ query: '?connectionParams=1' });
    s.send({ method: 'connectionParams', data: { token: 'cs_definitely-not-valid' } });
    assertConnectionError(await s.nextJson(null), 'UNAUTHORIZED', -32001, 401);
    await s.closed();
  });

  // When the context fails, requests already queued behind connectionParams also
  // receive the error under their own ids (tRPC's "createContext throws" regression test), then the close.
  test('a bad token with requests queued behind it: each queued request gets UNAUTHORIZED under its id', T, async () => {
    const s = await rawSocket({ query: '?connectionParams=1' });
    s.ws.send(JSON.stringify({ method: 'connectionParams', data: { token: 'cs_definitely-not-valid' } }));
    s.ws.send(JSON.stringify([
      { id: 1, method: 'query', params: { path: 'session.list', input: {} } },
      { id: 2, method: 'mutation', params: { path: 'session.create', input: {} } },
    ]));
    assertConnectionError(await s.nextJson(null), 'UNAUTHORIZED', -32001, 401);
    for (const id of [1, 2]) {
      const frame = await s.nextJson(id);
      assert.equal(frame.error?.data?.code, 'UNAUTHORIZED', JSON.stringify(frame));
      assert.equal(frame.error.code, -32001);
    }
    await s.closed();
  });

  test('requests sent right behind connectionParams wait for the context and are answered', T, async () => {
    const { id: sessionId } = await createSession();
    const s = await rawSocket({ query: '?connectionParams=1' });
    try {
      s.send({ method: 'connectionParams', data: { token: TOKEN } });
      s.send([
        { id: 1, method: 'query', params: { path: 'session.get', input: { sessionId } } },
        { id: 2, method: 'query', params: { path: 'message.getQueuedMessages', input: { sessionId } } },
      ]);
      assert.equal((await s.nextJson(1)).result.data.session.id, sessionId);
      assert.deepEqual((await s.nextJson(2)).result.data, []);
    } finally {
      s.close();
    }
  });

  test('a subscription error before start -> one error frame, no started/stopped', T, async () => {
    const s = await authedRawSocket();
    try {
      s.send({ id: 1, method: 'subscription', params: { path: 'session.events', input: { sessionId: 'nope' } } });
      const err = await s.nextJson(1);
      assert.equal(err.error.data.code, 'NOT_FOUND');
      assert.equal(err.error.data.path, 'session.events');
      s.send({ id: 2, method: 'query', params: { path: 'session.events', input: { sessionId: 'nope' } } });
      const wrongKind = await s.nextJson(2);
      assert.equal(wrongKind.error.data.code, 'NOT_FOUND', 'a subscription called as a query');
      s.send({ id: 3, method: 'mutation', params: { path: 'session.get', input: { sessionId: 'nope' } } });
      assert.equal((await s.nextJson(3)).error.data.code, 'NOT_FOUND', 'a query called as a mutation');
      assert.ok(!s.inbox.some((f) => JSON.parse(f).id === 1), `extra frames for id 1: ${s.inbox}`);
    } finally {
      s.close();
    }
  });
});
