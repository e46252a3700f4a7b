// A small in-memory model of one chatsync session, written the way the server changes state: each operation
// changes the session, messages, queue and run directly and appends its durable events to a log with the
// next seq; `get()` answers as `session.get` does. Tests compare the client's stores with `get()`, never with
// a copy of the reducers' output. Ephemeral stream events are returned, not logged, so a test decides how
// (and in what order, how often) they reach the client.
//
// `connection()` and `requests()` give openSession() a wire to this model: subscriptions replay the log after
// `lastEventId` and then receive live events, unless the test holds delivery back.
import { TRPCClientError } from '@trpc/client';

const clone = (v) => structuredClone(v);
let ids = 0;
const newId = (p) => `${p}-${++ids}`;

export class FakeSession {
  constructor(id = newId('s')) {
    this.id = id;
    this.seq = 0;
    this.log = [];
    this.trimmedBefore = 1; // the oldest seq still retained
    this.session = {
      id, title: '', titleSource: 'none', provider: 'echo', model: 'echo', systemPrompt: null, defaults: {},
      tools: [], toolMode: 'parallel', busyPolicy: 'enqueue', disableStreaming: false, metadata: {}, status: 'idle',
      queuePaused: true, usage: { inputTokens: 0, outputTokens: 0 }, lastSeq: 0, createdAt: 1, updatedAt: 1,
    };
    this.messages = []; // the active path
    this.all = []; // every message of every branch, in creation order
    this.lastActive = new Map(); // message id -> when it left the active path (a counter)
    this.queue = [];
    this.run = null; // {id, status, calls: [...]}
    this.writes = new Map(); // clientRequestId -> first result
    this.calls = []; // every call the wire delivered: {path, input}
    this.subscribers = new Set();
  }

  // --- durable and stream events ---

  emit(type, fields = {}) {
    this.seq += 1;
    this.session.lastSeq = this.seq;
    const item = { id: String(this.seq), data: { type, sessionId: this.id, ...clone(fields) } };
    this.log.push(item);
    for (const sub of this.subscribers) sub.offer(item);
    return item;
  }

  streamEvent(type, fields) {
    return { id: String(this.seq), data: { type, sessionId: this.id, ...clone(fields) } };
  }

  setStatus(status) {
    this.session = { ...this.session, status };
    this.emit('session-updated', { session: this.session });
  }

  // --- operations ---

  enqueue(content, clientRequestId = null) {
    if (clientRequestId && this.writes.has(clientRequestId)) return clone(this.writes.get(clientRequestId));
    const item = { id: newId('q'), content, attachments: [], enqueuedAt: 1000 + this.seq, clientRequestId };
    this.queue.push(item);
    this.emit('queue-message-added', { message: item });
    if (clientRequestId) this.writes.set(clientRequestId, clone(item));
    return clone(item);
  }

  removeQueued(id, reason = 'removed') {
    this.queue = this.queue.filter((q) => q.id !== id);
    this.emit('queue-message-removed', { messageId: id, reason });
  }

  moveQueued(id, toIndex) {
    const item = this.queue.find((q) => q.id === id);
    this.queue = this.queue.filter((q) => q.id !== id);
    this.queue.splice(toIndex, 0, item);
    this.emit('queue-reordered', { order: this.queue.map((q) => q.id) });
  }

  updateQueued(id, content) {
    this.queue = this.queue.map((q) => (q.id === id ? { ...q, content } : q));
    this.emit('queue-message-updated', { message: this.queue.find((q) => q.id === id) });
  }

  clearQueue() {
    this.queue = [];
    this.emit('queue-cleared');
  }

  addMessage(role, content, status = 'complete') {
    const parentId = this.messages.length ? this.messages[this.messages.length - 1].id : null;
    const m = {
      id: newId('m'), sessionId: this.id, role, content, attachments: [], toolCalls: null, toolCallId: null, status,
      finishReason: null, usage: null, runId: this.run?.id ?? null, createdAt: 2000 + this.seq, clientRequestId: null,
      notices: null, parentId, versions: null, siblingIds: null,
    };
    this.messages.push(m);
    this.all.push(m);
    this.emit('message-created', { message: this.withVersions(m) });
    return m;
  }

  // --- versions and branches, as the server keeps them (docs/api.md "Versions and branches") ---

  /** `m` with its place among its versions (what session.get, branch-changed and message-created carry). */
  withVersions(m) {
    const siblingIds = this.all.filter((x) => x.parentId === m.parentId).map((x) => x.id);
    return { ...m, versions: { index: siblingIds.indexOf(m.id), count: siblingIds.length }, siblingIds };
  }

  /** Make `path` (message objects from the start) the active path, with its one `branch-changed`. */
  makeActive(path) {
    let shared = 0;
    while (shared < Math.min(path.length, this.messages.length) && path[shared] === this.messages[shared]) shared++;
    for (const m of this.messages.slice(shared)) this.lastActive.set(m.id, this.seq + 1);
    this.messages = path.slice();
    const parentId = shared ? path[shared - 1].id : null;
    this.emit('branch-changed', { parentId, path: path.slice(shared).map((m) => this.withVersions(m)) });
  }

  pathTo(id) {
    const out = [];
    for (let m = this.all.find((x) => x.id === id); m; m = this.all.find((x) => x.id === m.parentId)) out.unshift(m);
    return out;
  }

  /** `message.edit`: a new version of a user message, answered (the answer left streaming). */
  edit(messageId, content) {
    const target = this.all.find((m) => m.id === messageId);
    this.makeActive(target.parentId ? this.pathTo(target.parentId) : []);
    return this.startRun(content);
  }

  /** `run.regenerate` of the answer after user message `userId` (its new version left streaming). */
  regenerate(userId) {
    this.makeActive(this.pathTo(userId));
    const runId = newId('r');
    this.run = { id: runId, status: 'running', calls: [] };
    this.emit('run-started', { runId, trigger: 'regenerate', clientRequestId: null });
    this.setStatus('running');
    return this.addMessage('assistant', '', 'streaming').id;
  }

  /** `session.switchBranch`: the path through `messageId`, down to the leaf active last below it. */
  switchBranch(messageId) {
    const path = this.pathTo(messageId);
    for (;;) {
      const last = path[path.length - 1];
      const kids = this.all.filter((m) => m.parentId === last.id);
      if (!kids.length) break;
      kids.sort((a, b) => (this.lastActive.get(b.id) ?? 1e9) - (this.lastActive.get(a.id) ?? 1e9));
      path.push(kids[0]);
    }
    this.makeActive(path);
  }

  /** `run.continue` of the last answer (stopped at the length limit): streaming again, in the same message. */
  continueLast() {
    const m = this.messages[this.messages.length - 1];
    const runId = newId('r');
    this.run = { id: runId, status: 'running', calls: [] };
    this.emit('run-started', { runId, trigger: 'continue', clientRequestId: null });
    this.setStatus('running');
    Object.assign(m, { status: 'streaming', finishReason: null });
    this.emit('message-continued', { message: { ...m, versions: null, siblingIds: null } });
    return m.id;
  }

  /** A user message and a run whose assistant message starts streaming; returns the assistant message id. */
  startRun(text) {
    const runId = newId('r');
    this.run = { id: runId, status: 'running', calls: [] };
    this.addMessage('user', text);
    this.emit('run-started', { runId, trigger: 'message', clientRequestId: null });
    this.setStatus('running');
    return this.addMessage('assistant', '', 'streaming').id;
  }

  /** Append text to the streaming answer; returns the `text-delta` the server would send. */
  delta(messageId, text) {
    const m = this.messages.find((x) => x.id === messageId);
    const offset = [...m.content].length;
    m.content += text;
    return this.streamEvent('text-delta', { messageId, offset, delta: text });
  }

  /** A tool call the model streams into message `messageId`: its start, then argument deltas. */
  toolCallStream(messageId, callId, name, args, pieces) {
    const events = [this.streamEvent('tool-call-start', { messageId, callId, name, index: 0 })];
    let offset = 0;
    for (const piece of pieces) {
      events.push(this.streamEvent('tool-call-delta', { messageId, callId, offset, delta: piece }));
      offset += [...piece].length;
    }
    return events;
  }

  snapshot(messageId) {
    const m = this.messages.find((x) => x.id === messageId);
    return this.streamEvent('stream-snapshot', { messageId, offset: [...m.content].length, text: m.content });
  }

  complete(messageId) {
    const m = this.messages.find((x) => x.id === messageId);
    Object.assign(m, { status: 'complete', finishReason: 'stop' });
    this.emit('message-completed', { message: { ...m, versions: null, siblingIds: null } });
    const runId = this.run.id;
    this.run = null;
    this.emit('run-finished', { runId, finishReason: 'stop', usage: { inputTokens: 0, outputTokens: 0 } });
    this.setStatus('idle');
  }

  toolCall(name, { requiresApproval = false, executor = 'client' } = {}) {
    const call = { callId: newId('c'), name, arguments: '{}', executor, requiresApproval,
      approval: requiresApproval ? 'pending' : 'none' };
    this.run.calls.push(call);
    this.emit('tool-call-ready', { callId: call.callId, name, arguments: '{}', executor, requiresApproval });
    if (requiresApproval) this.emit('tool-approval-requested', { callId: call.callId });
    return call.callId;
  }

  approve(callId, approved) {
    const call = this.run.calls.find((c) => c.callId === callId);
    call.approval = approved ? 'approved' : 'denied';
    this.emit('tool-approval-resolved', { callId, approved, decidedBy: { userId: 'u1', userName: 'ada', deviceName: 'laptop' } });
    return { resolved: true };
  }

  /** Forget the log up to `seq` (retention), so older positions can no longer be resumed. */
  trim(seq) {
    this.log = this.log.filter((e) => Number(e.id) > seq);
    this.trimmedBefore = seq + 1;
  }

  /** What `session.get` answers. */
  get() {
    const streaming = this.messages.find((m) => m.status === 'streaming');
    return clone({
      session: this.session,
      messages: this.messages.map((m) => this.withVersions(m)),
      queue: this.queue,
      run: this.run && {
        id: this.run.id,
        status: this.run.status,
        streaming: streaming ? { messageId: streaming.id, offset: [...streaming.content].length, text: streaming.content } : null,
        pendingToolCalls: this.run.calls,
        pendingApprovals: this.run.calls.filter((c) => c.approval === 'pending')
          .map(({ callId, name, arguments: args }) => ({ callId, name, arguments: args })),
      },
      lastEventId: String(this.seq),
    });
  }

  // --- a wire for openSession() ---

  /** A Connection whose subscriptions read this session. `hold: true` queues live events until `flush()`. */
  connection() {
    const server = this;
    return {
      transport: 'ws',
      isFinal: () => false,
      reportLinkState() {},
      signOut() {},
      state: { get: () => 'connected' },
      untyped: {
        subscription(path, input, handlers) {
          const sub = server.subscribe(input, handlers);
          return { unsubscribe: () => sub.close() };
        },
      },
    };
  }

  subscribe(input, handlers) {
    const server = this;
    const after = Number(input.lastEventId ?? this.seq);
    const deliver = (item) => {
      if ('id' in item) sub.lastId = item.id;
      handlers.onData(item);
    };
    const sub = {
      open: true,
      held: [],
      hold: false,
      lastId: null,
      successor: null,
      offer(item) {
        if (!sub.open) return;
        if (sub.hold) sub.held.push(item);
        else deliver(item);
      },
      /** Deliver an item as the wire would (stream events, repeats, anything). */
      push(item) {
        if (sub.open) deliver(item);
      },
      flush() {
        const held = sub.held;
        sub.held = [];
        for (const item of held) deliver(item);
      },
      /** The wire dropped: like @trpc/client, subscribe again with the last tracked id delivered. */
      drop() {
        sub.close();
        sub.successor = server.subscribe({ ...input, lastEventId: sub.lastId ?? input.lastEventId }, handlers);
        return sub.successor;
      },
      close() {
        sub.open = false;
        server.subscribers.delete(sub);
        sub.successor?.close();
      },
    };
    this.subscribers.add(sub);
    this.lastSubscription = { input, sub };
    queueMicrotask(() => {
      if (!sub.open) return;
      if (after + 1 < this.trimmedBefore || after > this.seq) {
        handlers.onData({ type: 'resync-required', sessionId: this.id, lastEventId: String(after) });
        sub.close();
        handlers.onComplete?.();
        return;
      }
      handlers.onStarted?.({ context: undefined });
      for (const item of this.log) if (Number(item.id) > after) deliver(item);
    });
    return sub;
  }

  /** A `call` for createRequests(). `dropAfterApply` makes the next write apply, then lose its answer. */
  call = async (kind, path, input) => {
    this.calls.push({ path, input: clone(input) });
    await Promise.resolve();
    let result;
    switch (path) {
      case 'session.get':
        return this.get();
      case 'message.enqueueMessage':
        result = this.enqueue(input.content, input.clientRequestId ?? null);
        break;
      case 'message.removeQueuedMessage':
        this.removeQueued(input.messageId);
        result = null;
        break;
      case 'tool.approve':
        result = this.approve(input.callId, input.approved);
        break;
      default:
        throw new Error(`the fake session has no ${path}`);
    }
    if (this.dropAfterApply > 0) {
      this.dropAfterApply -= 1;
      // What @trpc/client reports when the socket closed before the answer: no server error shape.
      throw TRPCClientError.from(new Error('WebSocket closed'));
    }
    return result;
  };
}

// `Session.lastSeq` and `updatedAt` are as of the event that carried the session; the client's position is
// its own `lastSeq`, so these two are left out of comparisons.
function comparable(session) {
  if (!session) return session;
  const { lastSeq, updatedAt, ...rest } = session;
  return rest;
}

/** The parts of the client's state that `session.get` describes, in session.get's shape. */
export function storeView(open) {
  const run = open.run.get();
  return {
    session: comparable(open.session.get()),
    messages: open.messages.get(),
    queue: open.queue.get(),
    run: run && { id: run.id, status: run.status, pendingToolCalls: run.pendingToolCalls, pendingApprovals: run.pendingApprovals },
  };
}

/** The same parts of `session.get`'s answer; a streaming message carries the run's text, as the server's does. */
export function serverView(snap) {
  const live = snap.run?.streaming;
  return {
    session: comparable(snap.session),
    messages: snap.messages.map((m) => (live && m.id === live.messageId ? { ...m, content: live.text } : m)),
    queue: snap.queue,
    run: snap.run && { id: snap.run.id, status: snap.run.status, pendingToolCalls: snap.run.pendingToolCalls,
      pendingApprovals: snap.run.pendingApprovals },
  };
}

/** Wait until `predicate()` holds, checking after each store change and each tick. */
export async function until(predicate, what, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
