// A reply lost with its socket, and the write sent again with the same clientRequestId: applied once.
// The official @trpc/client fails calls whose socket closed before the answer came (it cannot know
// whether the server applied them), so the application repeats the call with the same id.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createTRPCUntypedClient, createWSClient, wsLink } from '@trpc/client';
import WebSocket from 'ws';
import { T, TOKEN, createSession, mutate, rawFetch, tcpProxy, until } from '../lib/harness.js';

async function query(path, input) {
  const res = await rawFetch('GET', path, { query: `input=${encodeURIComponent(JSON.stringify(input))}` });
  return res.json.result.data;
}

const queue = (sessionId) => query('message.getQueuedMessages', { sessionId });

test('a write whose reply was lost is repeated with its clientRequestId and applied once', T, async () => {
  const proxy = await tcpProxy();
  const wsClient = createWSClient({ url: proxy.wsUrl, WebSocket, connectionParams: { token: TOKEN }, retryDelayMs: () => 10 });
  const client = createTRPCUntypedClient({ links: [wsLink({ client: wsClient })] });
  try {
    const session = await createSession(TOKEN, 'exactly-once');
    await mutate('message.pauseQueue', { sessionId: session.id });
    await client.query('session.list', {}); // the socket is open and signed in
    const before = Number((await query('session.get', { sessionId: session.id })).lastEventId);
    const input = { sessionId: session.id, content: 'typed once', clientRequestId: randomUUID() };
    proxy.hold = true;
    const first = client.mutation('message.enqueueMessage', input);
    await until(async () => (await queue(session.id)).length === 1, 'the server to commit the enqueue');
    proxy.cut();
    await assert.rejects(first); // the answer was lost with the socket
    proxy.hold = false;
    const again = await client.mutation('message.enqueueMessage', input); // the client reconnects by itself
    const items = await queue(session.id);
    assert.deepEqual(items.map((q) => q.id), [again.id]);
    assert.equal(items[0].clientRequestId, input.clientRequestId);
    const { lastEventId } = await query('session.get', { sessionId: session.id });
    assert.equal(Number(lastEventId), before + 1, 'one queue-message-added: nothing else was written');
    await assert.rejects(client.mutation('message.enqueueMessage', { ...input, content: 'something else' }),
      (err) => err.data?.code === 'CONFLICT');
  } finally {
    await wsClient.close();
    await proxy.close();
  }
});
