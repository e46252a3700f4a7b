// The library against a real chatsync server (started by tests/test_client_stores_js.py): a store follows a
// session while the echo model answers, its socket is killed mid-answer, and after the resume its messages and
// queue equal session.get's. Also: a write whose socket dies right after sending it, a rejected token, SSE.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import net from 'node:net';
import WebSocketImpl from 'ws';
import { EventSource } from 'eventsource';
import { serverView, storeView, until } from '../testing/fake-server.js';
import { gatedWebSocket } from '../testing/gated-websocket.js';
import * as lib from '../index.js';

const URL_ = process.env.CHATSYNC_URL;
const TOKEN = process.env.CHATSYNC_TOKEN;
const T = { timeout: 60_000 };
const LONG = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' ');

if (!URL_ || !TOKEN) throw new Error('CHATSYNC_URL / CHATSYNC_TOKEN are not set');

/** A TCP proxy in front of the server whose `cut()` drops every connection, as a flaky network would. */
async function proxy() {
  const target = new URL(URL_);
  const sockets = new Set();
  const server = net.createServer((inbound) => {
    const outbound = net.connect(Number(target.port), target.hostname);
    for (const [a, b] of [[inbound, outbound], [outbound, inbound]]) {
      sockets.add(a);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        sockets.delete(a);
        b.destroy();
      });
      a.pipe(b);
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    cut: () => sockets.forEach((s) => s.destroy()),
    close: () => {
      sockets.forEach((s) => s.destroy());
      return new Promise((r) => server.close(r));
    },
  };
}

const clients = [];
function client(extra = {}) {
  const c = lib.createChatsyncClient({ url: URL_, token: TOKEN, retry: { attempts: 10, baseDelayMs: 50, maxDelayMs: 500 }, ...extra });
  clients.push(c);
  return c;
}
after(async () => {
  for (const c of clients) await c.close();
});

const sameAsServer = async (c, open) => {
  const snap = await c.trpc.session.get.query({ sessionId: open.id });
  return JSON.stringify(storeView(open)) === JSON.stringify(serverView(snap));
};

describe('against a real server', () => {
  test('socket killed mid-answer: after the resume, messages and queue equal session.get', T, async () => {
    const rec = gatedWebSocket();
    const c = client({ WebSocket: rec.WebSocket, reconnectDelayMs: (n) => (n === 0 ? 0 : 50) });
    const other = client({ WebSocket: WebSocketImpl });
    const states = [];
    c.connection.subscribe((s) => states.push(s));
    const s = await c.createSession({ title: 'live-kill' });
    const open = c.openSession(s.id);
    await open.ready;

    const sent = await open.send(LONG);
    assert.equal(sent.status, 'started');
    const q1 = await open.enqueue('queued one');
    await open.enqueue('queued two');
    await other.trpc.message.pauseQueue.mutate({ sessionId: s.id }); // hold the queue so it is there to compare
    await until(() => open.messages.get().some((m) => m.role === 'assistant' && m.status === 'streaming' && m.content.length > 20),
      'the answer to be streaming');
    await until(() => open.queue.get().length === 2 && open.session.get().queuePaused, 'the queue to be held');

    // Kill the socket and keep the client away while the answer goes on and another client changes the queue.
    const seen = open.messages.get().find((m) => m.status === 'streaming');
    rec.gate.open = false;
    for (const ws of rec.live()) ws.terminate();
    await until(() => c.connection.get() === 'reconnecting', 'the client to notice the drop');
    const q3 = await other.trpc.message.enqueueMessage.mutate({ sessionId: s.id, content: 'queued while away' });
    await other.trpc.message.moveQueuedMessage.mutate({ sessionId: s.id, messageId: q3.id, toIndex: 0 });
    await other.trpc.message.updateQueuedMessage.mutate({ sessionId: s.id, messageId: q1.id, content: 'edited while away' });
    await until(async () => {
      const snap = await other.trpc.session.get.query({ sessionId: s.id });
      return (snap.run?.streaming?.offset ?? Infinity) > seen.content.length + 40 || snap.run === null;
    }, 'the answer to move on while the client is away');

    rec.gate.open = true;
    await until(() => c.connection.get() === 'resumed', 'the client to resume');
    await until(() => open.run.get() === null && open.session.get().status === 'idle', 'the answer to finish', 30_000);
    await until(() => sameAsServer(c, open), 'the stores to equal session.get');

    const snap = await c.trpc.session.get.query({ sessionId: s.id });
    assert.deepEqual(storeView(open), serverView(snap));
    assert.deepEqual(open.queue.get().map((q) => q.content), ['queued while away', 'edited while away', 'queued two']);
    assert.equal(open.messages.get().at(-1).content, LONG);
    assert.equal(open.resyncs(), 0, 'resumed from the last event id, without refetching');
    // @trpc/client itself re-sent the subscription on the new socket with the last tracked id it had seen.
    const resub = rec.frames().filter(({ ws, msg }) => ws > 0 && msg.method === 'subscription' && msg.params?.path === 'session.events');
    assert.ok(resub.length >= 1 && resub.at(-1).msg.params.lastEventId, JSON.stringify(resub));
    assert.deepEqual(states.slice(0, 2), ['connecting', 'connected']);
    assert.ok(states.includes('reconnecting') && states.at(-1) === 'resumed', states.join(' '));
    open.close();
  });

  test('a long history loads from its end; loadEarlier reads older pages to the start; a resync keeps them', T, async () => {
    const c = client({ WebSocket: WebSocketImpl });
    const s = await c.createSession({ title: 'long history' });
    const notes = Array.from({ length: 450 }, (_, i) => `note ${i}`);
    for (let i = 0; i < notes.length; i += 64) {
      await c.trpc.message.addInstructions.mutate({ sessionId: s.id, instructions: notes.slice(i, i + 64), respond: false });
    }
    const open = c.openSession(s.id);
    await open.ready;
    const contents = () => open.messages.get().map((m) => m.content);
    assert.deepEqual(contents(), notes.slice(250));
    assert.equal(open.hasEarlier.get(), true);

    const twice = [open.loadEarlier(), open.loadEarlier()]; // one read at a time: the second call shares it
    assert.deepEqual(await Promise.all(twice), [true, true]);
    assert.deepEqual(contents(), notes.slice(50));
    assert.equal(await open.loadEarlier(), true);
    assert.deepEqual(contents(), notes);
    assert.equal(open.hasEarlier.get(), false);
    assert.equal(await open.loadEarlier(), false);

    await open.resync(); // the newest page again; the pages read before it stay in front
    assert.deepEqual(contents(), notes);
    await c.trpc.message.addInstructions.mutate({ sessionId: s.id, instructions: 'one more', respond: false });
    await until(() => contents().length === 451, 'the new message');
    assert.equal(contents().at(-1), 'one more');
    open.close();
  });

  test('a write whose socket dies right after it was sent is retried with the same clientRequestId, once applied', T, async () => {
    const rec = gatedWebSocket();
    const c = client({ WebSocket: rec.WebSocket, reconnectDelayMs: () => 0 });
    const s = await c.createSession({ title: 'live-retry', queuePaused: true });
    const open = c.openSession(s.id);
    await open.ready;
    let killed = 0;
    rec.onSend = (ws, data) => {
      if (killed === 0 && data.includes('message.enqueueMessage') && data.includes('exactly once')) {
        killed += 1;
        ws.terminate(); // the answer can no longer arrive on this socket
      }
    };
    const item = await open.enqueue('exactly once');
    const sends = rec.frames().filter(({ msg }) => msg.params?.path === 'message.enqueueMessage');
    assert.equal(killed, 1);
    assert.equal(sends.length, 2, JSON.stringify(sends));
    assert.equal(sends[0].msg.params.input.clientRequestId, sends[1].msg.params.input.clientRequestId);
    assert.notEqual(sends[0].ws, sends[1].ws);
    await until(() => sameAsServer(c, open), 'the stores to equal session.get');
    const snap = await c.trpc.session.get.query({ sessionId: s.id });
    assert.deepEqual(snap.queue.map((q) => q.content), ['exactly once']);
    assert.equal(snap.queue[0].id, item.id);
    assert.deepEqual(open.queue.get(), snap.queue);
    open.close();
  });

  test('an approval answered here shows as this client\'s, and as another\'s elsewhere, after the run too', T, async () => {
    const c = client({ WebSocket: WebSocketImpl });
    const other = client({ WebSocket: WebSocketImpl });
    const s = await c.createSession({
      title: 'live-approval',
      tools: [{ name: 'current_time', description: 'the time', executor: 'server', requiresApproval: true }],
    });
    const here = c.openSession(s.id);
    const there = other.openSession(s.id);
    await Promise.all([here.ready, there.ready]);
    const events = [];
    there.onEvent((e) => events.push(e.type));
    await here.send('/tool current_time {}');
    await until(() => here.run.get()?.pendingApprovals.length === 1, 'the approval request');
    const callId = here.run.get().pendingApprovals[0].callId;
    await until(() => there.run.get()?.status === 'requires-action', 'the other client to see the run wait');
    await here.approve(callId, true);
    await until(() => here.run.get() === null && there.run.get() === null, 'the run to end on both');
    const me = await c.trpc.auth.me.query();
    assert.deepEqual(here.decisions.get()[callId], { approved: true, by: 'self', decidedBy: here.decisions.get()[callId].decidedBy });
    assert.equal(here.decisions.get()[callId].decidedBy.userName, me.user.name);
    assert.equal(there.decisions.get()[callId].by, 'other');
    assert.equal(there.decisions.get()[callId].approved, true);
    for (const open of [here, there]) await until(() => sameAsServer(c, open), 'the stores to equal session.get');
    assert.ok(events.includes('tool-approval-requested') && events.includes('tool-approval-resolved') && events.includes('run-finished'),
      events.join(' '));
    here.close();
    there.close();
  });

  test('a rejected token: signed-out, and no reconnecting', T, async () => {
    const rec = gatedWebSocket();
    const c = client({ token: 'not-a-token', WebSocket: rec.WebSocket, reconnectDelayMs: () => 0 });
    await until(() => c.connection.get() === 'signed-out', 'signed-out');
    assert.equal(c.closeCode.get(), lib.UNAUTHORIZED);
    const sockets = rec.instances.length;
    await assert.rejects(c.requests.query('session.list', {}));
    assert.equal(rec.instances.length, sockets, 'no new socket after a final close code');
  });

  test('the session list follows sessions created, renamed and deleted by another client', T, async () => {
    const c = client({ WebSocket: WebSocketImpl });
    const other = client({ WebSocket: WebSocketImpl });
    const list = c.watchSessions();
    await list.ready;
    await until(() => list.status.get() === 'live', 'the feed to start');
    const a = await other.createSession({ title: 'list-a' });
    const b = await other.createSession({ title: 'list-b' });
    await until(() => list.items.get().some((x) => x.id === b.id), 'the new sessions in the list');
    await other.trpc.session.setTitle.mutate({ sessionId: a.id, title: 'list-a renamed' });
    await other.trpc.session.delete.mutate({ sessionId: b.id });
    await until(() => !list.items.get().some((x) => x.id === b.id), 'the deleted session to go');
    await until(() => list.items.get().find((x) => x.id === a.id)?.title === 'list-a renamed', 'the new title');
    const page = await c.trpc.session.list.query({ limit: 50 });
    assert.deepEqual(list.items.get().map((x) => [x.id, x.title]), page.items.map((x) => [x.id, x.title]));
    list.close();
  });

  /** Signs a new device in with a link the owner made: its token and device id. */
  async function linkDevice(owner, deviceName) {
    const link = await owner.trpc.auth.createLink.mutate({ deviceName });
    const res = await fetch(`${URL_}/auth/link`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code: link.code, deviceName }),
    });
    assert.equal(res.status, 200);
    return res.json();
  }

  test('a device whose token is revoked is signed out (4503) and its open session stops', T, async () => {
    const owner = client({ WebSocket: WebSocketImpl });
    const { token, deviceId } = await linkDevice(owner, 'laptop');
    const rec = gatedWebSocket();
    const device = client({ token, WebSocket: rec.WebSocket, reconnectDelayMs: () => 0 });
    const me = await device.trpc.auth.me.query();
    assert.equal(me.deviceId, deviceId);
    const s = await owner.createSession({ title: 'revoked' });
    const open = device.openSession(s.id);
    await open.ready;
    await owner.trpc.auth.revokeDevice.mutate({ deviceId });
    await until(() => device.connection.get() === 'signed-out', 'the device to be signed out');
    assert.equal(device.closeCode.get(), lib.TOKEN_REVOKED);
    await until(() => open.status.get() === 'closed', 'the open session to stop');
    const sockets = rec.instances.length;
    await assert.rejects(open.enqueue('after revocation'), (err) => err.name === 'ConnectionClosedError');
    assert.deepEqual(open.queue.get(), [], 'the pending item was taken away again');
    assert.equal(rec.instances.length, sockets, 'no reconnecting after 4503');
  });

  test('a device revoked while it was offline is told so when it comes back, over WebSocket and SSE', T, async () => {
    const owner = client({ WebSocket: WebSocketImpl });
    for (const transport of ['ws', 'sse']) {
      const { token, deviceId } = await linkDevice(owner, `offline ${transport}`);
      await owner.trpc.auth.revokeDevice.mutate({ deviceId });
      const rec = gatedWebSocket();
      const device = client({ token, transport, EventSource, WebSocket: rec.WebSocket, reconnectDelayMs: () => 0 });
      if (transport === 'sse') await assert.rejects(device.requests.query('session.list', {}));
      await until(() => device.connection.get() === 'signed-out', `signed-out (${transport})`);
      assert.equal(device.closeCode.get(), lib.TOKEN_REVOKED, transport);
    }
  });

  test('over SSE: the session list and a session follow an answer to the end', T, async () => {
    const c = client({ transport: 'sse', EventSource });
    const list = c.watchSessions();
    await list.ready;
    const s = await c.createSession({ title: 'live-sse' });
    await until(() => list.items.get().some((x) => x.id === s.id), 'the new session in the list');
    const open = c.openSession(s.id);
    await open.ready;
    await open.send('over server-sent events we stream this answer');
    await until(() => open.run.get() === null && open.messages.get().length === 2 && open.session.get().status === 'idle',
      'the answer to finish');
    await until(() => sameAsServer(c, open), 'the stores to equal session.get');
    assert.equal(open.messages.get()[1].content, 'over server-sent events we stream this answer');
    assert.equal(c.connection.get(), 'connected');
    open.close();
    list.close();
  });

  test('over SSE, the stream cut mid-answer: the store resumes and ends equal to session.get', T, async () => {
    const p = await proxy();
    try {
      const c = client({ url: p.url, transport: 'sse', EventSource });
      const s = await c.createSession({ title: 'live-sse-cut' });
      const open = c.openSession(s.id);
      await open.ready;
      await open.send(LONG);
      await open.enqueue('queued over sse');
      await c.trpc.message.pauseQueue.mutate({ sessionId: s.id });
      await until(() => open.messages.get().some((m) => m.status === 'streaming' && m.content.length > 20), 'the answer to stream');
      p.cut();
      await until(() => open.run.get() === null && open.session.get().status === 'idle', 'the answer to finish', 30_000);
      await until(() => sameAsServer(c, open), 'the stores to equal session.get');
      assert.equal(open.messages.get().at(-1).content, LONG);
      assert.deepEqual(open.queue.get().map((q) => q.content), ['queued over sse']);
      assert.equal(open.resyncs(), 0, 'resumed with Last-Event-ID, without refetching');
      assert.equal(c.connection.get(), 'resumed');
      open.close();
    } finally {
      await p.close();
    }
  });
});
