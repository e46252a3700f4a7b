// Shared helpers for the conformance suite. Not a test file (node --test only runs client_js/conformance/).
//
// The server under test is started by tests/test_conformance_js.py, which passes:
//   CHATSYNC_URL     http://127.0.0.1:<port>
//   CHATSYNC_TOKEN   token of user 1
//   CHATSYNC_TOKEN2  token of user 2 (owner of "foreign" sessions)
import assert from 'node:assert/strict';
import net from 'node:net';
import WebSocketImpl from 'ws';
import {
  createTRPCUntypedClient,
  createWSClient,
  httpBatchLink,
  httpBatchStreamLink,
  httpLink,
  httpSubscriptionLink,
  wsLink,
} from '@trpc/client';

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set; run the suite through tests/test_conformance_js.py`);
  return value;
}

export const BASE = required('CHATSYNC_URL').replace(/\/$/, '');
export const TOKEN = required('CHATSYNC_TOKEN');
export const TOKEN2 = required('CHATSYNC_TOKEN2');
export const HTTP_URL = `${BASE}/trpc`;
export const WS_URL = `${BASE.replace(/^http/, 'ws')}/trpc`;

/** Per-test timeout (ms) for node:test. */
export const T = { timeout: 15_000 };

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Poll `predicate` until it is truthy; fail with `what` after `ms`. Only for waiting, never for timing. */
export async function until(predicate, what, ms = 8_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/**
 * A `WebSocket` class for createWSClient that records every instance and every frame sent and received,
 * so a test can inspect the wire and `.terminate()` the client's socket. `gate.open = false` makes new
 * sockets dial a closed port instead of the server (the client then keeps retrying until it is reopened).
 */
export function recordingWebSocket() {
  const rec = { instances: [], sent: [], received: [], gate: { open: true } };
  class RecordingWebSocket extends WebSocketImpl {
    constructor(url, protocols) {
      super(rec.gate.open ? url : 'ws://127.0.0.1:9/closed', protocols);
      const index = rec.instances.push(this) - 1;
      this.index = index;
      this.addEventListener('message', (ev) => {
        rec.received.push({ ws: index, data: String(ev.data) });
      });
    }
    send(data, ...rest) {
      rec.sent.push({ ws: this.index, data: String(data) });
      return super.send(data, ...rest);
    }
  }
  rec.WebSocket = RecordingWebSocket;
  /** Received frames decoded as JSON (PONG etc. skipped). */
  rec.receivedJson = () =>
    rec.received.flatMap(({ ws, data }) => {
      try {
        return [{ ws, msg: JSON.parse(data) }];
      } catch {
        return [];
      }
    });
  rec.sentJson = () =>
    rec.sent.flatMap(({ ws, data }) => {
      try {
        return [{ ws, msg: JSON.parse(data) }];
      } catch {
        return [];
      }
    });
  return rec;
}

/** wsLink client with connectionParams {token}; returns {client, wsClient, rec, close}. */
export function wsClientFor(token = TOKEN, extra = {}) {
  const rec = recordingWebSocket();
  const wsClient = createWSClient({
    url: WS_URL,
    WebSocket: rec.WebSocket,
    ...(token === null ? {} : { connectionParams: { token } }),
    ...extra,
  });
  const client = createTRPCUntypedClient({ links: [wsLink({ client: wsClient })] });
  return { client, wsClient, rec, close: () => wsClient.close() };
}

/** A `fetch` that records every request (method, url, status) for the HTTP links. */
export function recordingFetch() {
  const calls = [];
  const fetchFn = async (url, init = {}) => {
    const entry = { url: String(url), method: init.method ?? 'GET', body: init.body };
    calls.push(entry);
    const res = await fetch(url, init);
    entry.status = res.status;
    return res;
  };
  return { calls, fetch: fetchFn };
}

const auth = (token) => (token === null ? {} : { authorization: `Bearer ${token}` });

export function httpClientFor(kind, token = TOKEN, extra = {}) {
  const rf = recordingFetch();
  const make = { httpLink, httpBatchLink, httpBatchStreamLink }[kind];
  const client = createTRPCUntypedClient({
    links: [make({ url: HTTP_URL, headers: auth(token), fetch: rf.fetch, ...extra })],
  });
  return { client, calls: rf.calls };
}

export function sseClientFor(EventSource, { token = TOKEN, url = HTTP_URL } = {}) {
  return createTRPCUntypedClient({
    links: [httpSubscriptionLink({ url, EventSource, connectionParams: { token } })],
  });
}

/** Create a session over plain HTTP (user 1 unless told otherwise); returns the Session. */
export async function createSession(token = TOKEN, title = 'conformance') {
  const res = await rawFetch('POST', 'session.create', { body: { title, queuePaused: true }, token });
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json.result.data;
}

/** Call a procedure with a hand-written HTTP request; returns {status, headers, json, text}. */
export async function rawFetch(method, path, { body, query, token = TOKEN, headers = {} } = {}) {
  const url = `${HTTP_URL}/${path}${query ? `?${query}` : ''}`;
  const init = { method, headers: { ...auth(token), ...headers } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['content-type'] = 'application/json';
  }
  const res = await fetch(url, init);
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** Mutation over HTTP as user 1; throws on a tRPC error. */
export async function mutate(path, input, token = TOKEN) {
  const res = await rawFetch('POST', path, { body: input, token });
  if (res.status !== 200) throw new Error(`${path} -> ${res.status} ${res.text}`);
  return res.json.result.data;
}

/** Assert `err` is a TRPCClientError carrying the given tRPC error key / JSON-RPC number / HTTP status. */
export function assertTrpcError(err, key, number, httpStatus) {
  assert.equal(err?.name, 'TRPCClientError', `expected TRPCClientError, got ${err?.stack ?? err}`);
  assert.equal(err.data?.code, key, `data.code (message: ${err.message})`);
  assert.equal(err.data?.httpStatus, httpStatus, 'data.httpStatus');
  assert.equal(err.shape?.code, number, 'shape.code');
  assert.equal(typeof err.message, 'string');
}

/** Await a promise that must reject; returns the rejection. */
export async function rejection(promise) {
  try {
    const value = await promise;
    assert.fail(`expected a rejection, got ${JSON.stringify(value)}`);
  } catch (err) {
    if (err?.code === 'ERR_ASSERTION') throw err;
    return err;
  }
}

/**
 * Subscribe with the untyped client and collect everything the handlers see.
 * Returns {events, errors, started, stopped, completed, unsubscribe}.
 */
export function collect(client, path, input) {
  const state = { events: [], errors: [], started: 0, stopped: 0, completed: 0 };
  const sub = client.subscription(path, input, {
    onStarted: () => {
      state.started += 1;
    },
    onData: (d) => {
      state.events.push(d);
    },
    onError: (e) => {
      state.errors.push(e);
    },
    onStopped: () => {
      state.stopped += 1;
    },
    onComplete: () => {
      state.completed += 1;
    },
  });
  state.unsubscribe = () => sub.unsubscribe();
  state.ids = () => state.events.map((e) => e.id);
  return state;
}

/** Tracked events only: assert each is `{id, data}` with id === String(data.seq-ish order). */
export function trackedIds(events) {
  return events.filter((e) => e && typeof e === 'object' && 'id' in e).map((e) => e.id);
}

export const range = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => String(from + i));

/**
 * A TCP proxy in front of the server, so a test can cut every open connection (an HTTP stream dropping
 * mid-way, as a flaky network would), or hold back what the server sends (`hold = true`: its bytes are
 * dropped, as if the network lost the replies). Returns {url, wsUrl, requests, hold, cut(), close()}.
 */
export async function tcpProxy() {
  const target = new URL(BASE);
  const sockets = new Set();
  const requests = []; // request heads seen from clients, e.g. "GET /trpc/x?... HTTP/1.1\r\nheader: v..."
  const proxy = { hold: false };
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    client.on('data', (chunk) => {
      const text = chunk.toString('latin1');
      if (/^(GET|POST|HEAD) /.test(text)) requests.push(text.split('\r\n\r\n')[0]);
    });
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ]) {
      sockets.add(a);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        sockets.delete(a);
        b.destroy();
      });
      a.on('data', (chunk) => {
        if (!(a === upstream && proxy.hold)) b.write(chunk); // held: the server's bytes never arrive
      });
      a.on('end', () => b.end());
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return Object.assign(proxy, {
    url: `http://127.0.0.1:${port}/trpc`,
    wsUrl: `ws://127.0.0.1:${port}/trpc`,
    requests,
    connections: () => sockets.size / 2,
    cut() {
      for (const s of sockets) s.destroy();
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(r));
    },
  });
}

/** A raw `ws` socket with a frame inbox, for hand-written frames. */
export async function rawSocket({ query = '', headers = {} } = {}) {
  const ws = new WebSocketImpl(`${WS_URL}${query}`, { headers });
  const inbox = [];
  let waiters = [];
  const state = { closed: false, closeCode: null };
  ws.on('message', (data) => {
    inbox.push(String(data));
    const w = waiters;
    waiters = [];
    w.forEach((f) => f());
  });
  ws.on('close', (code) => {
    state.closed = true;
    state.closeCode = code;
    const w = waiters;
    waiters = [];
    w.forEach((f) => f());
  });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const api = {
    ws,
    state,
    inbox,
    send: (frame) => ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame)),
    /** Next raw text frame matching `pred` (consumed from the inbox). */
    async next(pred = () => true, what = 'a frame', ms = 5_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const i = inbox.findIndex((f) => pred(f));
        if (i >= 0) return inbox.splice(i, 1)[0];
        if (state.closed) throw new Error(`socket closed (${state.closeCode}) while waiting for ${what}`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`timed out waiting for ${what}; inbox: ${JSON.stringify(inbox)}`);
        await new Promise((r) => {
          const timer = setTimeout(r, left);
          waiters.push(() => {
            clearTimeout(timer);
            r();
          });
        });
      }
    },
    /** Next JSON frame with the given id (use null for connection-level frames). */
    async nextJson(id, what = `a frame for id ${JSON.stringify(id)}`) {
      const raw = await api.next((f) => {
        try {
          return JSON.parse(f)?.id === id;
        } catch {
          return false;
        }
      }, what);
      return JSON.parse(raw);
    },
    async closed(ms = 5_000) {
      await until(() => state.closed, 'the server to close the socket', ms);
      return state.closeCode;
    },
    close: () => ws.terminate(),
  };
  return api;
}

/** Authenticate a raw socket the way @trpc/client does. */
export async function authedRawSocket(token = TOKEN) {
  const s = await rawSocket({ query: '?connectionParams=1' });
  s.send({ method: 'connectionParams', data: { token } });
  return s;
}
