/**
 * The caller's sessions, live: `session.list` (pinned first, then newest first) with its `feedEventId`, then
 * `session.feed` from that id, so sessions created, renamed, pinned, archived, busy or deleted on any client
 * show here. A `resync-required`, a failed feed or a skipped seq reads the list again; a repeated feed item (seq
 * at or below the last applied) is ignored. Older pages load on demand with {@link SessionList.loadMore}.
 *
 * Search results (`search`) are the server's (titles and message texts): the feed updates the sessions they
 * hold (a rename shows at once), and every change it reports reads the results again shortly after, so a
 * session that came to match (or stopped matching) joins (or leaves) them.
 */
import { atom, type ReadableAtom } from "nanostores";
import type { Unsubscribable } from "@trpc/server/observable";
import type { Connection, LinkState } from "../connection.js";
import { errorCode, type Requests } from "../requests.js";
import type { FeedEventItem } from "../router.gen.js";
import { appendPage, applyFeed, sessionsFromPage, type SessionListItem, type SessionsState } from "../reducers/sessions.js";

export type SessionListStatus = "loading" | "live" | "resyncing" | "static" | "closed";

export interface SessionList {
  /** Newest first. */
  readonly items: ReadableAtom<SessionListItem[]>;
  /** `static`: the server has no `session.feed`; call `refresh()` to update. */
  readonly status: ReadableAtom<SessionListStatus>;
  readonly hasMore: ReadableAtom<boolean>;
  readonly ready: Promise<void>;
  /** Load the next (older) page. */
  loadMore(): Promise<void>;
  /** Read the first page again and follow the feed from there. */
  refresh(): Promise<void>;
  close(): void;
}

export interface SessionListOptions {
  /** Page size of `session.list`. @default 50 */
  limit?: number;
  /** Only sessions whose title or messages contain this (the server's search; results may come in pages). */
  search?: string;
  /** Archived sessions only (true), the others (false), or both (null). @default false */
  archived?: boolean | null;
  /** How long after a feed change search results are read again, in ms. @default 300 */
  searchRefreshMs?: number;
}

export function watchSessions(connection: Connection, requests: Requests, options: SessionListOptions = {}): SessionList {
  const limit = options.limit ?? 50;
  const archived = options.archived === undefined ? false : options.archived;
  const filters = { archived, ...(options.search ? { search: options.search } : {}) };
  const scope = { archived, search: !!options.search };
  let refreshTimer: ReturnType<typeof setTimeout> | null = null;
  let state: SessionsState | null = null;
  const $items = atom<SessionListItem[]>([]);
  const $status = atom<SessionListStatus>("loading");
  const $hasMore = atom(false);
  let generation = 0;
  let sub: Unsubscribable | null = null;
  let closed = false;
  let failures = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let resolveReady!: () => void;
  const ready = new Promise<void>((r) => (resolveReady = r));

  function commit(next: SessionsState) {
    if (next.items !== state?.items) $items.set(next.items);
    $hasMore.set(next.nextCursor !== null);
    state = next;
  }

  function later(err: unknown) {
    if (closed || connection.isFinal()) return $status.set("closed");
    if (errorCode(err) === "NOT_FOUND") return $status.set("static"); // no feed on this server
    failures++;
    const gen = generation;
    timer = setTimeout(() => gen === generation && void load(), Math.min(250 * 2 ** (failures - 1), 5000));
  }

  async function load(): Promise<void> {
    const gen = ++generation;
    sub?.unsubscribe();
    sub = null;
    if (state) $status.set("resyncing");
    let page;
    try {
      page = await requests.query("session.list", { limit, ...filters });
    } catch (err) {
      if (gen === generation) later(err);
      return;
    }
    if (gen !== generation || closed) return;
    commit(sessionsFromPage(page));
    resolveReady();
    // A server without the feed sends no position: the list is then only as fresh as the last refresh().
    if (page.feedEventId === undefined) return $status.set("static");
    follow(gen, page.feedEventId);
  }

  function follow(gen: number, from: string) {
    sub = connection.untyped.subscription("session.feed", { lastEventId: from }, {
      onStarted() {
        if (gen !== generation) return;
        failures = 0;
        $status.set("live");
      },
      onData(raw: unknown) {
        if (gen !== generation || !state) return;
        const item = raw as FeedEventItem;
        if (!("id" in item)) {
          if (item.type === "resync-required") void load();
          return;
        }
        const { state: next, resync, duplicate } = applyFeed(state, item.id, item.data, scope);
        if (resync) return void load();
        commit(next);
        if (scope.search && !duplicate) searchAgain();
      },
      onError(err: unknown) {
        if (gen === generation) later(err);
      },
      onComplete() {
        if (gen !== generation || closed) return;
        if (connection.isFinal()) return $status.set("closed");
        void load();
      },
      onConnectionStateChange(s: LinkState) {
        connection.reportLinkState(s);
      },
    });
  }

  /** Search results are read again once the feed has been quiet for a moment (a burst costs one read). */
  function searchAgain() {
    if (refreshTimer) clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      if (!closed) void load();
    }, options.searchRefreshMs ?? 300);
  }

  void load();
  return {
    items: $items,
    status: $status,
    hasMore: $hasMore,
    ready,
    async loadMore() {
      if (!state?.nextCursor) return;
      const page = await requests.query("session.list", { limit, cursor: state.nextCursor, ...filters });
      if (state) commit(appendPage(state, page));
    },
    refresh: load,
    close() {
      closed = true;
      generation++;
      sub?.unsubscribe();
      if (timer) clearTimeout(timer);
      if (refreshTimer) clearTimeout(refreshTimer);
      $status.set("closed");
    },
  };
}
