/**
 * One open session: stores kept in sync from `session.get` and the tracked `session.events` stream, plus the
 * actions a UI calls.
 *
 * Following: read `session.get`, subscribe from its `lastEventId`, apply every tracked item with the pure
 * reducers (`reducers/session.ts`). After a dropped connection `@trpc/client` subscribes again by itself with
 * the id of the last tracked item it delivered, so nothing is missed or repeated; a repeat that slips through
 * is ignored by seq. The copy is thrown away and read again (a *resync*) when the server says
 * `resync-required`, when a durable event skips a seq, or when the subscription fails.
 */
import { atom, type ReadableAtom } from "nanostores";
import type { Unsubscribable } from "@trpc/server/observable";
import type { Connection, LinkState } from "../connection.js";
import { errorCode, newClientRequestId, type Requests, type WriteInput } from "../requests.js";
import type {
  Message,
  ProcedurePath,
  Procedures,
  Session,
  SessionEventItem,
  SessionState,
  SessionUpdateInput,
} from "../router.gen.js";
import { ackOptimistic, addOptimistic, dropOptimistic, queueItems, type QueueItem } from "../reducers/queue.js";
import { applyTracked, fromSnapshot, noteOwnDecision, type SessionSyncState } from "../reducers/session.js";
import type { RunView } from "../reducers/run.js";

/** Where following stands: `live` once the copy is in sync; `deleted` / `closed` / `error` are final. */
export type FollowStatus = "loading" | "live" | "resyncing" | "deleted" | "closed" | "error";

type Out<P extends ProcedurePath> = Procedures[P]["output"];

/** How `sendQueuedNow` delivers a queued message while a run is in progress. */
export type SendNowMode = "interrupt" | "steer" | "next";

export interface SendOptions {
  attachments?: WriteInput<"message.send">["attachments"];
  instructions?: string | string[];
  busyPolicy?: WriteInput<"message.send">["busyPolicy"];
}

/** The provider/model and other settings `session.update` changes. */
export type SessionSettings = Omit<SessionUpdateInput, "sessionId">;

export interface OpenSession {
  readonly id: string;
  /** The session (title, status, provider, model, queuePaused, usage...); `null` until loaded. */
  readonly session: ReadableAtom<Session | null>;
  /** The history, streaming answers included (their text grows as it arrives). */
  readonly messages: ReadableAtom<Message[]>;
  /** The queue in server order, then this client's `pending` items. */
  readonly queue: ReadableAtom<QueueItem[]>;
  /** The run in progress: status, pending tool calls and approvals, decisions and who made them. */
  readonly run: ReadableAtom<RunView | null>;
  readonly status: ReadableAtom<FollowStatus>;
  /** The last error that stopped following or a reload, if any. */
  readonly error: ReadableAtom<unknown>;
  /** The whole local state, for tests and tools. */
  readonly state: ReadableAtom<SessionSyncState | null>;
  /** Resolves once the first `session.get` is applied (rejects if it fails for good). */
  readonly ready: Promise<void>;
  /** How many times the local copy was thrown away and read again. */
  resyncs(): number;

  /** Send now, or per the busy policy (queue, steer, interrupt, reject) while the model answers. */
  send(content: string, options?: SendOptions): Promise<Out<"message.send">>;
  /** Put a message at the end of the queue; it shows at once as a `pending` item. */
  enqueue(content: string, attachments?: WriteInput<"message.enqueueMessage">["attachments"]): Promise<Out<"message.enqueueMessage">>;
  /** System instructions for the session (`respond: false` only stores them). */
  addInstructions(instructions: string | string[], respond?: boolean): Promise<Out<"message.addInstructions">>;
  updateQueued(messageId: string, change: { content?: string; attachments?: WriteInput<"message.enqueueMessage">["attachments"] }): Promise<Out<"message.updateQueuedMessage">>;
  removeQueued(messageId: string): Promise<null>;
  moveQueued(messageId: string, toIndex: number): Promise<Out<"message.moveQueuedMessage">>;
  /** Send a queued message now: `interrupt` the run (default), `steer` it into the run, or make it `next`. */
  sendQueuedNow(messageId: string, mode?: SendNowMode): Promise<Out<"message.sendQueuedNow"> | null>;
  clearQueue(): Promise<null>;
  pauseQueue(): Promise<null>;
  resumeQueue(): Promise<Out<"message.resumeQueue">>;
  abort(): Promise<Out<"run.abort">>;
  approve(callId: string, approved: boolean, reason?: string): Promise<Out<"tool.approve">>;
  submitOutputs(outputs: WriteInput<"tool.submitOutputs">["toolOutputs"]): Promise<Out<"tool.submitOutputs">>;
  setTitle(title: string): Promise<Session>;
  clearTitle(): Promise<Session>;
  regenerateTitle(method?: "truncate" | "model"): Promise<Session>;
  /** Change provider, model, system prompt, tools, busy policy... */
  update(settings: SessionSettings): Promise<Session>;
  setModel(provider: string, model: string): Promise<Session>;
  delete(): Promise<null>;
  /** Read `session.get` again and resubscribe from its `lastEventId`. */
  resync(): Promise<void>;
  /** Stop following (the stores keep their last values). */
  close(): void;
}

export interface FollowOptions {
  /** Delay before reading again after a failed read or subscription (n from 1). @default 250 ms doubling to 5 s */
  reloadDelayMs?: (attempt: number) => number;
}

const defaultReloadDelay = (n: number) => Math.min(250 * 2 ** (n - 1), 5000);

export function openSession(
  connection: Connection,
  requests: Requests,
  sessionId: string,
  options: FollowOptions = {},
): OpenSession {
  const reloadDelay = options.reloadDelayMs ?? defaultReloadDelay;
  const $state = atom<SessionSyncState | null>(null);
  const $session = atom<Session | null>(null);
  const $messages = atom<Message[]>([]);
  const $queue = atom<QueueItem[]>([]);
  const $run = atom<RunView | null>(null);
  const $status = atom<FollowStatus>("loading");
  const $error = atom<unknown>(null);
  let generation = 0;
  let sub: Unsubscribable | null = null;
  let closed = false;
  let resyncs = 0;
  let failures = 0;
  let retryTimer: ReturnType<typeof setTimeout> | null = null;
  let resolveReady!: () => void;
  let rejectReady!: (err: unknown) => void;
  const ready = new Promise<void>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  ready.catch(() => undefined); // a caller that never awaits it must not see an unhandled rejection

  /** Publish a new state: each store changes only when its part did. */
  function commit(next: SessionSyncState) {
    const prev = $state.get();
    $state.set(next);
    if (next.session !== prev?.session) $session.set(next.session);
    if (next.messages.list !== prev?.messages.list) $messages.set(next.messages.list);
    if (next.queue !== prev?.queue) $queue.set(queueItems(next.queue));
    if (next.run !== prev?.run) $run.set(next.run);
  }

  function update(fn: (s: SessionSyncState) => SessionSyncState) {
    const s = $state.get();
    if (s) commit(fn(s));
  }

  function stop(status: FollowStatus, err?: unknown) {
    generation++;
    sub?.unsubscribe();
    sub = null;
    if (retryTimer) clearTimeout(retryTimer);
    retryTimer = null;
    if (err !== undefined) $error.set(err);
    $status.set(status);
    if (status !== "live") rejectReady(err ?? new Error(`session ${sessionId} ${status}`));
  }

  function finalStatusOf(err: unknown): FollowStatus | null {
    if (connection.isFinal()) return "closed";
    const code = errorCode(err);
    if (code === "NOT_FOUND") return "deleted";
    if (code === "UNAUTHORIZED") {
      connection.signOut();
      return "closed";
    }
    if (code === "BAD_REQUEST" || code === "FORBIDDEN") return "error";
    return null;
  }

  function retryLater(err: unknown) {
    const final = finalStatusOf(err);
    if (final) return stop(final, err);
    $error.set(err);
    failures++;
    const gen = generation;
    retryTimer = setTimeout(() => {
      retryTimer = null;
      if (gen === generation && !closed) void load();
    }, reloadDelay(failures));
  }

  async function load(): Promise<void> {
    const gen = ++generation;
    sub?.unsubscribe();
    sub = null;
    if ($state.get()) $status.set("resyncing");
    let snap: SessionState;
    try {
      snap = await requests.query("session.get", { sessionId });
    } catch (err) {
      if (gen === generation && !closed) retryLater(err);
      return;
    }
    if (gen !== generation || closed) return;
    commit(fromSnapshot(snap, $state.get() ?? undefined));
    subscribe(gen);
  }

  function resyncNow() {
    resyncs++;
    void load();
  }

  function subscribe(gen: number) {
    const from = String($state.get()!.lastSeq);
    sub = connection.untyped.subscription(
      "session.events",
      { sessionId, lastEventId: from },
      {
        onStarted() {
          if (gen !== generation) return;
          failures = 0;
          $status.set("live");
          resolveReady();
        },
        onData(raw: unknown) {
          if (gen !== generation) return;
          const item = raw as SessionEventItem;
          if (!("id" in item)) {
            if (item.type === "resync-required") resyncNow();
            return;
          }
          const state = $state.get()!;
          const { state: next, outcome } = applyTracked(state, item.id, item.data);
          if (outcome === "resync") return resyncNow();
          if (next !== state) commit(next);
          if (next.deleted) stop("deleted");
        },
        onError(err: unknown) {
          if (gen === generation && !closed) retryLater(err);
        },
        onComplete() {
          // The server ended the stream (after `resync-required`, or on shutdown without a reconnect), or
          // the client was closed: read again unless nothing may reconnect.
          if (gen !== generation || closed) return;
          if (connection.isFinal()) return stop("closed");
          resyncNow();
        },
        onConnectionStateChange(s: LinkState) {
          connection.reportLinkState(s);
        },
      },
    );
  }

  // --- actions ---------------------------------------------------------------------------------------------

  const ref = { sessionId };

  async function enqueue(content: string, attachments: WriteInput<"message.enqueueMessage">["attachments"] = []) {
    const clientRequestId = newClientRequestId();
    update((s) => ({
      ...s,
      queue: addOptimistic(s.queue, { clientRequestId, content, attachments: attachments as never, enqueuedAt: Date.now() }),
    }));
    try {
      const item = await requests.write("message.enqueueMessage", { ...ref, content, attachments }, clientRequestId);
      update((s) => ({ ...s, queue: ackOptimistic(s.queue, clientRequestId, item.id) }));
      return item;
    } catch (err) {
      update((s) => ({ ...s, queue: dropOptimistic(s.queue, clientRequestId) }));
      throw err;
    }
  }

  const handle: OpenSession = {
    id: sessionId,
    session: $session,
    messages: $messages,
    queue: $queue,
    run: $run,
    status: $status,
    error: $error,
    state: $state,
    ready,
    resyncs: () => resyncs,
    send: (content, o = {}) => requests.write("message.send", { ...ref, content, ...o }),
    enqueue,
    addInstructions: (instructions, respond = true) =>
      requests.write("message.addInstructions", { ...ref, instructions, respond }),
    updateQueued: (messageId, change) => requests.mutate("message.updateQueuedMessage", { ...ref, messageId, ...change }),
    removeQueued: (messageId) => requests.mutate("message.removeQueuedMessage", { ...ref, messageId }),
    moveQueued: (messageId, toIndex) => requests.mutate("message.moveQueuedMessage", { ...ref, messageId, toIndex }),
    sendQueuedNow: (messageId, mode = "interrupt") => requests.mutate("message.sendQueuedNow", { ...ref, messageId, mode }),
    clearQueue: () => requests.mutate("message.clearQueue", ref),
    pauseQueue: () => requests.mutate("message.pauseQueue", ref),
    resumeQueue: () => requests.mutate("message.resumeQueue", ref),
    abort: () => requests.mutate("run.abort", ref),
    approve(callId, approved, reason) {
      update((s) => noteOwnDecision(s, callId));
      return requests.write("tool.approve", { ...ref, callId, approved, ...(reason !== undefined ? { reason } : {}) });
    },
    submitOutputs: (toolOutputs) => requests.write("tool.submitOutputs", { ...ref, toolOutputs }),
    setTitle: (title) => requests.mutate("session.setTitle", { ...ref, title }),
    clearTitle: () => requests.mutate("session.clearTitle", ref),
    regenerateTitle: (method) => requests.mutate("session.regenerateTitle", { ...ref, ...(method ? { method } : {}) }),
    update: (settings) => requests.mutate("session.update", { ...ref, ...settings }),
    setModel: (provider, model) => requests.mutate("session.update", { ...ref, provider, model }),
    delete: () => requests.mutate("session.delete", ref),
    async resync() {
      resyncs++;
      await load();
    },
    close() {
      closed = true;
      stop("closed");
    },
  };

  void load();
  return handle;
}
