/**
 * Following one session: `session.get`, then the tracked `session.events` stream from its `lastEventId`,
 * every item applied with the pure reducers (`reducers/session.ts`) to one state atom that the per-concern
 * stores (`messages.ts`, `queue.ts`, `run.ts`, `session.ts`) read.
 *
 * After a dropped connection `@trpc/client` subscribes again by itself with the id of the last tracked item it
 * delivered (wsLink; with SSE, the EventSource's `Last-Event-ID`), so nothing is missed or repeated; a repeat
 * that slips through is ignored by seq. The copy is thrown away and read again (a *resync*) when the server
 * says `resync-required`, when a durable event skips a seq, or when the subscription fails.
 */
import { atom, type ReadableAtom } from "nanostores";
import type { Unsubscribable } from "@trpc/server/observable";
import type { Connection, LinkState } from "../connection.js";
import { signedOutCodeOf } from "../closeCodes.js";
import { errorCode, type Requests } from "../requests.js";
import type { SessionEvent, SessionEventItem, SessionState } from "../router.gen.js";
import { withEarlier } from "../reducers/messages.js";
import { applyTracked, fromSnapshot, type SessionSyncState } from "../reducers/session.js";

/** Where following stands: `live` once the copy is in sync; `deleted` / `closed` / `error` are final. */
export type FollowStatus = "loading" | "live" | "resyncing" | "deleted" | "closed" | "error";

export interface SessionFollower {
  readonly sessionId: string;
  /** The whole local state; `null` until the first `session.get` is applied. */
  readonly state: ReadableAtom<SessionSyncState | null>;
  readonly status: ReadableAtom<FollowStatus>;
  readonly error: ReadableAtom<unknown>;
  readonly ready: Promise<void>;
  resyncs(): number;
  resync(): Promise<void>;
  /**
   * Call `listener(event, id)` after each event of the stream is applied (repeats are not passed on). A
   * resync replaces the state without events. Returns a function that removes the listener.
   */
  onEvent(listener: EventListener): () => void;
  /**
   * Read the page of messages before the oldest one loaded (`message.list`, `limit` of them) and put it in
   * front. Resolves `false` when the history was loaded from its start already; one read at a time.
   */
  loadEarlier(limit?: number): Promise<boolean>;
  /** Change the local state (optimistic items, own decisions); ignored before the first load. */
  update(fn: (s: SessionSyncState) => SessionSyncState): void;
  close(): void;
}

export type EventListener = (event: SessionEvent, id: string) => void;

export interface FollowOptions {
  /** Delay before reading again after a failed read or subscription (n from 1). @default 250 ms doubling to 5 s */
  reloadDelayMs?: (attempt: number) => number;
}

const defaultReloadDelay = (n: number) => Math.min(250 * 2 ** (n - 1), 5000);

export function followSession(
  connection: Connection,
  requests: Requests,
  sessionId: string,
  options: FollowOptions = {},
): SessionFollower {
  const reloadDelay = options.reloadDelayMs ?? defaultReloadDelay;
  const $state = atom<SessionSyncState | null>(null);
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

  const commit = (next: SessionSyncState) => $state.set(next);
  const listeners = new Set<EventListener>();

  function tell(event: SessionEvent, id: string) {
    for (const listener of [...listeners]) {
      try {
        listener(event, id);
      } catch (err) {
        // A listener's bug must not stop the session from following; report it where it shows.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
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
      connection.signOut(signedOutCodeOf(err));
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
          if (outcome === "applied") tell(item.data, item.id);
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

  let earlier: Promise<boolean> | null = null;
  function loadEarlier(limit = 200): Promise<boolean> {
    const before = $state.get()?.messages.before;
    if (earlier) return earlier;
    if (before == null) return Promise.resolve(false);
    earlier = requests
      .query("message.list", { sessionId, before, limit })
      .then((page) => {
        const now = $state.get();
        // A resync in between brought a state of its own; its `before` says where its pages start.
        if (now && now.messages.before === before) {
          commit({ ...now, messages: withEarlier(now.messages, page.items, page.nextCursor) });
        }
        return true;
      })
      .finally(() => {
        earlier = null;
      });
    return earlier;
  }

  void load();
  return {
    sessionId,
    state: $state,
    status: $status,
    error: $error,
    ready,
    resyncs: () => resyncs,
    async resync() {
      resyncs++;
      await load();
    },
    onEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    loadEarlier,
    update,
    close() {
      closed = true;
      stop("closed");
    },
  };
}
