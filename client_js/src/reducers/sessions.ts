/**
 * The caller's list of sessions: read from `session.list` (with its `feedEventId`), kept by `session.feed`.
 * Order is `session.list`'s: newest first by creation time, then id.
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

function newerFirst(a: SessionListItem, b: SessionListItem): number {
  if (a.createdAt !== b.createdAt) return b.createdAt - a.createdAt;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
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
function inLoadedRange(state: SessionsState, item: SessionListItem): boolean {
  const last = state.items[state.items.length - 1];
  return state.nextCursor === null || last === undefined || newerFirst(item, last) <= 0;
}

function put(state: SessionsState, summary: SessionSummary): SessionListItem[] {
  const i = state.items.findIndex((s) => s.id === summary.id);
  if (i >= 0) {
    const items = state.items.slice();
    items[i] = { ...items[i]!, ...summary };
    return items;
  }
  if (!inLoadedRange(state, summary)) return state.items;
  return [...state.items, summary].sort(newerFirst);
}

/**
 * Apply one tracked feed item. The feed, like a session's log, numbers its events 1, 2, 3, ... per user: a
 * repeat (seq at or below the last applied) is ignored, and a skipped seq means the list must be read again.
 */
export function applyFeed(
  state: SessionsState,
  id: string,
  e: FeedEvent,
): { state: SessionsState; duplicate: boolean; resync?: true } {
  const seq = Number(id);
  if (Number.isFinite(seq) && seq <= state.feedSeq) return { state, duplicate: true };
  if (Number.isFinite(seq) && seq > state.feedSeq + 1) return { state, duplicate: false, resync: true };
  const feedSeq = Number.isFinite(seq) ? seq : state.feedSeq;
  switch (e.type) {
    case "session-created":
    case "session-updated":
      return { state: { ...state, items: put(state, e.session), feedSeq }, duplicate: false };
    case "session-deleted":
      return { state: { ...state, items: state.items.filter((s) => s.id !== e.sessionId), feedSeq }, duplicate: false };
    default:
      return { state: { ...state, feedSeq }, duplicate: false };
  }
}
