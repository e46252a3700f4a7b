// The signed-in user's sessions for the sidebar: `session.list` once, then `session.feed` keeps titles,
// statuses and queue lengths live (created, updated and deleted anywhere, by any device).
import { atom, computed } from "nanostores";
import { $rpc } from "./auth";
import { errorMessage } from "../lib/rpc";
import { announce } from "./announcer";
import type { Session, SessionSummary } from "../lib/types";

export const $sessions = atom<Map<string, SessionSummary>>(new Map());
export const $sessionsLoaded = atom(false);
export const $sessionList = computed($sessions, (m) =>
  [...m.values()].sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1)));

let feed: { unsubscribe(): void } | null = null;

function put(s: SessionSummary): void {
  const next = new Map($sessions.get());
  const old = next.get(s.id);
  next.set(s.id, { ...old, ...s, queueLength: s.queueLength ?? old?.queueLength });
  $sessions.set(next);
}

function drop(id: string): void {
  const next = new Map($sessions.get());
  if (next.delete(id)) $sessions.set(next);
}

/** Applies what this tab learnt about a session elsewhere (its open conversation), between feed events. */
export function noteSession(s: Partial<SessionSummary> & { id: string }): void {
  const old = $sessions.get().get(s.id);
  if (old) put({ ...old, ...s } as SessionSummary);
}

export function forgetSession(id: string): void {
  drop(id);
}

async function load(): Promise<void> {
  const rpc = $rpc.get();
  if (!rpc) return;
  feed?.unsubscribe();
  feed = null;
  const items = new Map<string, SessionSummary>();
  let cursor: string | null = null;
  let feedEventId: string | undefined;
  // Enough for a sidebar; older sessions stay reachable by their address.
  for (let page = 0; page < 4; page++) {
    const res: { items: SessionSummary[]; nextCursor: string | null; feedEventId?: string } =
      await rpc.query("session.list", { limit: 100, ...(cursor ? { cursor } : {}) });
    feedEventId ??= res.feedEventId;
    for (const s of res.items) items.set(s.id, s);
    cursor = res.nextCursor;
    if (!cursor) break;
  }
  $sessions.set(items);
  $sessionsLoaded.set(true);
  feed = rpc.subscribe<{ id: string; data: any }>("session.feed", feedEventId ? { lastEventId: feedEventId } : {}, {
    onData({ data }) {
      if (data.type === "session-created" || data.type === "session-updated") put(data.session);
      else if (data.type === "session-deleted") drop(data.sessionId);
      else if (data.type === "resync-required") void load();
    },
    // Without a feed (an older server) the list is still right for this tab's own changes.
    onError: () => { feed = null; },
  });
}

export function startSessions(): void {
  load().catch((err) => announce(`Could not load your sessions: ${errorMessage(err)}`));
}

export function stopSessions(): void {
  feed?.unsubscribe();
  feed = null;
  $sessions.set(new Map());
  $sessionsLoaded.set(false);
}

export async function createSession(): Promise<Session> {
  const s: Session = await $rpc.get()!.mutate("session.create", {});
  put(s);
  return s;
}

export async function renameSession(id: string, title: string): Promise<void> {
  const s: Session = title.trim()
    ? await $rpc.get()!.mutate("session.setTitle", { sessionId: id, title: title.trim() })
    : await $rpc.get()!.mutate("session.clearTitle", { sessionId: id });
  put(s);
}

export async function deleteSession(id: string): Promise<void> {
  await $rpc.get()!.mutate("session.delete", { sessionId: id });
  drop(id);
}
