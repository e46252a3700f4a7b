// Attachments through the library against a real chatsync server (started by tests/test_client_stores_js.py):
// upload and fetch back a file, the typed errors of a refused upload, and {fileId} attachments on send,
// enqueue (shown at once on the pending item; retried after a dropped socket with the same clientRequestId,
// applied once) and updateQueued.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { after, describe, test } from 'node:test';
import WebSocketImpl from 'ws';
import { until } from './testing/fake-server.js';
import { gatedWebSocket } from './testing/gated-websocket.js';
import * as lib from './index.js';
import { png } from './testing/png.js';

const URL_ = process.env.CHATSYNC_URL;
const TOKEN = process.env.CHATSYNC_TOKEN;
const MAX_FILE_BYTES = Number(process.env.CHATSYNC_MAX_FILE_BYTES);
const T = { timeout: 60_000 };

if (!URL_ || !TOKEN || !MAX_FILE_BYTES) {
  throw new Error('CHATSYNC_URL / CHATSYNC_TOKEN / CHATSYNC_MAX_FILE_BYTES are not set');
}

const clients = [];
function client(extra = {}) {
  const c = lib.createChatsyncClient({
    url: URL_, token: TOKEN, WebSocket: WebSocketImpl, retry: { attempts: 10, baseDelayMs: 50, maxDelayMs: 500 }, ...extra,
  });
  clients.push(c);
  return c;
}
after(async () => {
  for (const c of clients) await c.close();
});

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

/** A TCP proxy to the server that drops its first connection once `cutAfter` bytes of it went upstream. */
async function cuttingProxy(cutAfter) {
  const target = new URL(URL_);
  const stats = { connections: 0, cut: 0 };
  const sockets = new Set();
  const server = net.createServer((inbound) => {
    const first = stats.connections++ === 0;
    const outbound = net.connect(Number(target.port), target.hostname);
    sockets.add(inbound).add(outbound);
    let sent = 0;
    inbound.on('data', (chunk) => {
      sent += chunk.length;
      if (first && sent > cutAfter && !inbound.destroyed) {
        stats.cut += 1;
        inbound.destroy();
        outbound.destroy();
        return;
      }
      outbound.write(chunk);
    });
    outbound.pipe(inbound);
    for (const [a, b] of [[inbound, outbound], [outbound, inbound]]) {
      a.on('error', () => b.destroy());
      a.on('close', () => { sockets.delete(a); b.destroy(); });
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    stats,
    close: () => {
      sockets.forEach((s) => s.destroy());
      return new Promise((r) => server.close(r));
    },
  };
}
const shown = (f) => ({ fileId: f.id, name: f.name, mediaType: f.mediaType, size: f.size });

describe('files against a real server', () => {
  test('upload a File and a Blob, fetch them back byte for byte; the media type comes from the bytes', T, async () => {
    const c = client();
    const image = png(16, 9);
    const up = await c.files.upload(new File([image], 'screenshot.png', { type: 'application/octet-stream' }));
    assert.equal(up.name, 'screenshot.png');
    assert.equal(up.mediaType, 'image/png', 'sniffed from the bytes, not the label the client gave');
    assert.equal(up.size, image.length);
    assert.equal(up.sha256, sha256(image));
    const back = Buffer.from(await (await c.files.download(up.id)).arrayBuffer());
    assert.ok(back.equals(image));

    const text = Buffer.from('notes from the meeting\n'.repeat(50));
    const blob = await c.files.upload(new Blob([text]), { name: 'notes.txt' });
    assert.equal(blob.name, 'notes.txt');
    assert.equal(blob.sha256, sha256(text));
    assert.ok(Buffer.from(await (await c.files.download(blob.id)).arrayBuffer()).equals(text));
  });

  test('refused uploads and downloads are typed errors with the server\'s message', T, async () => {
    const c = client();
    const tooBig = new Blob([new Uint8Array(MAX_FILE_BYTES + 1)]);
    const err = await c.files.upload(tooBig, { name: 'big.bin' }).then(() => null, (e) => e);
    assert.ok(err instanceof lib.FileRequestError, String(err));
    assert.equal(err.status, 413);
    assert.equal(err.code, 'PAYLOAD_TOO_LARGE');
    assert.ok(err.message.length > 0 && !/^413\b/.test(err.message), `the server's own words: ${err.message}`);

    const stranger = client({ token: 'not-a-token' });
    const denied = await stranger.files.upload(new Blob(['x']), { name: 'x.txt' }).then(() => null, (e) => e);
    assert.ok(denied instanceof lib.FileRequestError);
    assert.equal(denied.status, 401);
    assert.equal(denied.code, 'UNAUTHORIZED');

    const missing = await c.files.download('no-such-file').then(() => null, (e) => e);
    assert.ok(missing instanceof lib.FileRequestError);
    assert.equal(missing.code, 'NOT_FOUND');
  });

  test('more files at once than the server lets upload together: each waits its turn and all arrive', T, async () => {
    const c = client();
    const sent = Array.from({ length: 10 }, (_, i) => Buffer.alloc(300_000, i + 1));
    const ups = await Promise.all(sent.map((bytes, i) => c.files.upload(new Blob([bytes]), { name: `part-${i}.bin` })));
    assert.deepEqual(ups.map((u) => u.sha256), sent.map(sha256));
  });

  test('a 429 is waited out as Retry-After says, then sent again; past the budget it is the error', async () => {
    const busy = () => new Response(JSON.stringify({ error: { code: 'TOO_MANY_REQUESTS', message: 'too many uploads' } }),
      { status: 429, headers: { 'retry-after': '2' } });
    const done = { id: 'f1', name: 'a.txt', mediaType: 'text/plain', size: 1, sha256: 'x' };
    let calls = 0;
    const slept = [];
    const files = lib.createFiles({
      url: 'http://server.invalid', token: 't', sleep: async (ms) => { slept.push(ms); },
      fetch: async () => (++calls <= 2 ? busy() : new Response(JSON.stringify(done), { status: 200 })),
    });
    assert.deepEqual(await files.upload(new Blob(['x']), { name: 'a.txt' }), done);
    assert.equal(calls, 3);
    assert.deepEqual(slept, [2000, 2000]);

    let waited = 0;
    const never = lib.createFiles({
      url: 'http://server.invalid', token: 't', sleep: async (ms) => { waited += ms; }, fetch: async () => busy(),
    });
    const err = await never.upload(new Blob(['x']), { name: 'a.txt' }).then(() => null, (e) => e);
    assert.ok(err instanceof lib.FileRequestError);
    assert.equal(err.status, 429);
    assert.equal(err.code, 'TOO_MANY_REQUESTS');
    assert.equal(waited, 5 * 60_000);
  });

  test('an upload cut off midway is sent again and arrives whole', T, async () => {
    const p = await cuttingProxy(64 * 1024);
    try {
      const c = client({ url: p.url });
      const bytes = Buffer.alloc(400_000, 7);
      const up = await c.files.upload(new Blob([bytes]), { name: 'sevens.bin' });
      assert.equal(p.stats.cut, 1, 'the first attempt was cut');
      assert.ok(p.stats.connections >= 2);
      assert.equal(up.size, bytes.length);
      assert.equal(up.sha256, sha256(bytes));
      assert.ok(Buffer.from(await (await client().files.download(up.id)).arrayBuffer()).equals(bytes));
    } finally {
      await p.close();
    }
  });

  test('send with an uploaded file: the user message carries it as name, type and size', T, async () => {
    const c = client();
    const s = await c.createSession({ title: 'files-send' });
    const open = c.openSession(s.id);
    await open.ready;
    const up = await c.files.upload(new File([png(4, 4)], 'dot.png'));
    const res = await open.send('look at this', { attachments: [up] });
    assert.equal(res.status, 'started');
    await until(() => open.messages.get().some((m) => m.role === 'user'), 'the user message');
    const user = open.messages.get().find((m) => m.role === 'user');
    assert.deepEqual(lib.fileAttachments(user.attachments), [shown(up)]);
    const snap = await c.trpc.session.get.query({ sessionId: s.id });
    assert.deepEqual(snap.messages.find((m) => m.role === 'user').attachments, user.attachments);
    open.close();
  });

  test('enqueue with a file: pending at once with its name; a dropped socket retries once, one item', T, async () => {
    const rec = gatedWebSocket();
    const c = client({ WebSocket: rec.WebSocket, reconnectDelayMs: () => 0 });
    const s = await c.createSession({ title: 'files-enqueue', queuePaused: true });
    const open = c.openSession(s.id);
    await open.ready;
    const up = await c.files.upload(new File([png(6, 6)], 'chart.png'));
    let killed = 0;
    rec.onSend = (ws, data) => {
      if (killed === 0 && data.includes('message.enqueueMessage')) {
        killed += 1;
        ws.terminate();
      }
    };
    const call = open.enqueue('with a chart', [up]);
    const pending = open.queue.get();
    assert.equal(pending.length, 1);
    assert.ok(pending[0].pending);
    assert.deepEqual(lib.fileAttachments(pending[0].attachments), [shown(up)]);
    const item = await call;

    const sends = rec.frames().filter(({ msg }) => msg.params?.path === 'message.enqueueMessage');
    assert.equal(killed, 1);
    assert.equal(sends.length, 2);
    assert.equal(sends[0].msg.params.input.clientRequestId, sends[1].msg.params.input.clientRequestId);
    // Only the id goes over the wire; the name and size are the server's to say.
    assert.deepEqual(sends[1].msg.params.input.attachments, [{ fileId: up.id }]);
    const snap = await c.trpc.session.get.query({ sessionId: s.id });
    assert.equal(snap.queue.length, 1);
    assert.equal(snap.queue[0].id, item.id);
    assert.deepEqual(lib.fileAttachments(snap.queue[0].attachments), [shown(up)]);
    await until(() => JSON.stringify(open.queue.get()) === JSON.stringify(snap.queue), 'the store to equal the server');

    // updateQueued replaces the attachments; the other client sees the new list through the events.
    const other = client().openSession(s.id);
    await other.ready;
    const second = await c.files.upload(new Blob(['plain words']), { name: 'words.txt' });
    await open.updateQueued(item.id, { attachments: [up, { fileId: second.id }] });
    for (const o of [open, other]) {
      await until(() => lib.fileAttachments(o.queue.get()[0]?.attachments).length === 2, 'two attachments');
      assert.deepEqual(lib.fileAttachments(o.queue.get()[0].attachments), [shown(up), shown(second)]);
    }
    open.close();
    other.close();
  });

  test('attachments: only {fileId} goes over the wire; messages show the uploaded files, typed', () => {
    const up = { id: 'f1', name: 'a.png', mediaType: 'image/png', size: 3, sha256: 'x' };
    assert.deepEqual(lib.wireAttachments([up, { fileId: 'f2', name: 'b.txt' }, { path: '/tmp/c.txt' }]),
      [{ fileId: 'f1' }, { fileId: 'f2' }, { path: '/tmp/c.txt' }]);
    assert.deepEqual(lib.shownAttachments([up]), [{ fileId: 'f1', name: 'a.png', mediaType: 'image/png', size: 3 }]);
    assert.deepEqual(lib.fileAttachments([{ path: '/tmp/c.txt' }, { fileId: 'f1', name: 'a.png', mediaType: 'image/png', size: 3 },
                                          { fileId: 'f3' }, { fileId: 7 }]),
      [{ fileId: 'f1', name: 'a.png', mediaType: 'image/png', size: 3 },
       { fileId: 'f3', name: 'file', mediaType: 'application/octet-stream', size: 0 }]);
  });

  test('sizes read as people read them', () => {
    assert.deepEqual([0, 812, 9400, 14_200, 3_100_000, 2e9].map(lib.formatSize), ['0 B', '812 B', '9.4 KB', '14 KB', '3.1 MB', '2.0 GB']);
  });
});
