/**
 * The caller's list of sessions: read from `session.list` (with its `feedEventId`), kept by `session.feed`.
 * Order is `session.list`'s: pinned sessions first, then newest first by creation time, then id.
 */
import type { FeedEvent, Session, SessionPage, SessionSummary } from "../router.gen.js";

/** A list entry: a full `Session` from `session.list`, or a summary from the feed. */
export type SessionListItem = SessionSummary & Partial<Session>;

export interface SessionsState {
  items: SessionListItem[];
  /** The last feed event applied. */
  feedSeq: number;
  /** More (older) sessions can be loaded with this cursor. */
  nextCursor: string | null;
}

export const emptySessions: SessionsState = Object.freeze({ items: [], feedSeq: 0, nextCursor: null }) as SessionsState;

/** `session.list`'s order: pinned first, then newer first (creation time, then id). */
export function listOrder(a: SessionListItem, b: SessionListItem): number {
  if (!!a.pinned !== !!b.pinned) return a.pinned ? -1 : 1;
  if (a.createdAt !== b.createdAt) return b.createdAt - a.createdAt;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/**
 * Which sessions a list holds, as `session.list` was asked: `archived` (true: archived only; false: the
 * others; null: both), and `search` — whether it holds search results, which the feed cannot tell (it does not
 * carry message texts): sessions it already holds are updated (or leave when `archived` says so), new ones
 * are never added; read the results again to see them.
 */
export interface ListScope {
  archived?: boolean | null;
  search?: boolean;
}

export function sessionsFromPage(page: SessionPage): SessionsState {
  return { items: page.items, feedSeq: Number(page.feedEventId ?? 0), nextCursor: page.nextCursor };
}

/** Add an older page (`nextCursor`), keeping what the feed already told us. */
export function appendPage(state: SessionsState, page: SessionPage): SessionsState {
  const known = new Set(state.items.map((s) => s.id));
  return { ...state, items: [...state.items, ...page.items.filter((s) => !known.has(s.id))], nextCursor: page.nextCursor };
}

/** Whether `item` falls inside the part of the list that is loaded. */
function inLoadedRange(items: SessionListItem[], nextCursor: string | null, item: SessionListItem): boolean {
  const last = items[items.length - 1];
  return nextCursor === null || last === undefined || listOrder(item, last) <= 0;
}

function put(state: SessionsState, summary: SessionSummary, scope: ListScope): SessionListItem[] {
  const i = state.items.findIndex((s) => s.id === summary.id);
  const item: SessionListItem = i >= 0 ? { ...state.items[i]!, ...summary } : summary;
  const belongs = scope.archived == null || !!item.archived === scope.archived;
  const rest = i >= 0 ? state.items.filter((_s, j) => j !== i) : state.items;
  if (!belongs) return i >= 0 ? rest : state.items;
  if (i < 0 && scope.search) return state.items;
  if (i >= 0 && !!item.pinned === !!state.items[i]!.pinned) {
    const items = state.items.slice();
    items[i] = item;
    return items;
  }
  // New, or moved (pinned or unpinned): in its place, if that place is within what is loaded.
  if (!inLoadedRange(rest, state.nextCursor, item)) return rest;
  return [...rest, item].sort(listOrder);
}

/**
 * Apply one tracked feed item. The feed, like a session's log, numbers its events 1, 2, 3, ... per user: a
 * repeat (seq at or below the last applied) is ignored, and a skipped seq means the list must be read again.
 */
export function applyFeed(
  state: SessionsState,
  id: string,
  e: FeedEvent,
  scope: ListScope = {},
): { state: SessionsState; duplicate: boolean; resync?: true } {
  const seq = Number(id);
  if (Number.isFinite(seq) && seq <= state.feedSeq) return { state, duplicate: true };
  if (Number.isFinite(seq) && seq > state.feedSeq + 1) return { state, duplicate: false, resync: true };
  const feedSeq = Number.isFinite(seq) ? seq : state.feedSeq;
  switch (e.type) {
    case "session-created":
    case "session-updated":
      return { state: { ...state, items: put(state, e.session, scope), feedSeq }, duplicate: false };
    case "session-deleted":
      return { state: { ...state, items: state.items.filter((s) => s.id !== e.sessionId), feedSeq }, duplicate: false };
    default:
      return { state: { ...state, feedSeq }, duplicate: false };
  }
}
