// The signed-in user's sessions for the sidebar: the library's live list (session.list, then session.feed),
// so titles, statuses, pins and queue lengths change here whichever device changed them. The main list shows
// archived chats or the others ($showArchived); a search is a second live list of the server's results.
import { atom } from "nanostores";
import { $client } from "./auth";
import { saveBlob } from "./files";
import { newClientRequestId, type Session, type SessionList, type SessionListItem } from "../lib/chatsync";

export const $sessionList = atom<readonly SessionListItem[]>([]);
export const $sessionsLoaded = atom(false);
/** The list shows archived chats instead of the others. */
export const $showArchived = atom(false);
/** What the search box holds; results follow it a moment after typing stops. */
export const $searchText = atom("");
/** The server's results for the search (titles and message texts); null while there is no search. */
export const $searchResults = atom<readonly SessionListItem[] | null>(null);
/** More results may be found in older chats (`loadMoreResults`). */
export const $searchHasMore = atom(false);
export const $searchLoaded = atom(false);

const SEARCH_DELAY_MS = 250;
let list: SessionList | null = null;
let unsubscribe: (() => void)[] = [];
let search: SessionList | null = null;
let searchUnsubscribe: (() => void)[] = [];
let searchTimer: ReturnType<typeof setTimeout> | null = null;

export function startSessions(): void {
  const client = $client.get();
  if (!client) return;
  stopList();
  list = client.watchSessions({ limit: 100, archived: $showArchived.get() });
  unsubscribe = [
    list.items.subscribe((items) => $sessionList.set(items)),
    list.status.subscribe((s) => $sessionsLoaded.set(s !== "loading")),
  ];
  startSearch();
}

function stopList(): void {
  for (const u of unsubscribe) u();
  unsubscribe = [];
  list?.close();
  list = null;
}

export function stopSessions(): void {
  stopList();
  stopSearch();
  $sessionList.set([]);
  $sessionsLoaded.set(false);
}

/** Shows archived chats (or the others again), searching among them if a search is on. */
export function showArchived(on: boolean): void {
  if ($showArchived.get() === on) return;
  $showArchived.set(on);
  $sessionList.set([]);
  $sessionsLoaded.set(false);
  startSessions();
}

function stopSearch(): void {
  if (searchTimer) clearTimeout(searchTimer);
  searchTimer = null;
  for (const u of searchUnsubscribe) u();
  searchUnsubscribe = [];
  search?.close();
  search = null;
}

function startSearch(): void {
  stopSearch();
  const client = $client.get();
  const text = $searchText.get().trim();
  if (!client || !text) {
    $searchResults.set(null);
    $searchHasMore.set(false);
    return;
  }
  $searchLoaded.set(false);
  search = client.watchSessions({ limit: 50, search: text, archived: $showArchived.get() });
  searchUnsubscribe = [
    search.items.subscribe((items) => $searchResults.set(items)),
    search.hasMore.subscribe((more) => $searchHasMore.set(more)),
    search.status.subscribe((s) => $searchLoaded.set(s !== "loading")),
  ];
}

/** The search box changed: search once typing pauses (an empty box ends the search at once). */
export function setSearch(text: string): void {
  $searchText.set(text);
  if (searchTimer) clearTimeout(searchTimer);
  if (!text.trim()) return startSearch();
  searchTimer = setTimeout(startSearch, SEARCH_DELAY_MS);
}

export function loadMoreResults(): Promise<void> {
  return search?.loadMore() ?? Promise.resolve();
}

function client() {
  const c = $client.get();
  if (!c) throw new Error("Not signed in");
  return c;
}

/** The chat a "New chat" in progress opens (null: none is being made). `/` must not open another chat
 * meanwhile, and a message sent meanwhile goes there (the person asked for a new chat and wrote in it), not to
 * the chat still on screen. */
export const $chatBeingMade = atom<Promise<string> | null>(null);

export function createSession(): Promise<Session> {
  return client().createSession({});
}

const MADE_KEY = "chatsync.newChats";

function madeHere(): string[] {
  try {
    const ids: unknown = JSON.parse(localStorage.getItem(MADE_KEY) ?? "[]");
    return Array.isArray(ids) ? ids.filter((x): x is string => typeof x === "string") : [];
  } catch {
    return [];
  }
}

/** The chat "New chat" opens: one this browser made with "New chat" that is still empty (no message, nothing
 * queued), else a new one, so pressing it again and again does not pile up empty "New chat" sessions. Chats
 * made elsewhere are left alone: an empty one may be a script's, about to be written to. A chat made here a
 * moment ago counts before the live list shows it. */
export async function emptyOrNewSession(): Promise<string> {
  const made = madeHere();
  const listed = new Map($sessionList.get().map((s) => [s.id, s]));
  const candidates = made.filter((id) => {
    const s = listed.get(id);
    return s ? untouched(s) && !s.queueLength : id === made[0]; // the newest one may not be listed yet
  });
  for (const id of candidates.slice(0, 3)) {
    // The list has no message counts: one read makes sure (a cleared title may hide a conversation).
    const state = await client().requests.query("session.get", { sessionId: id, messageLimit: 1 })
      .catch(() => null); // deleted meanwhile
    if (state && untouched(state.session) && !state.messages.length && !state.queue.length) return id;
  }
  const id = (await createSession()).id;
  const live = new Set($sessionList.get().map((s) => s.id));
  localStorage.setItem(MADE_KEY, JSON.stringify([id, ...made.filter((x) => live.has(x))].slice(0, 10)));
  return id;
}

/** Nothing was done to the chat since it was made: no title, not answering, not archived. */
function untouched(s: { titleSource: string; title: string; status: string; archived: boolean }): boolean {
  return s.titleSource === "none" && !s.title && s.status === "idle" && !s.archived;
}

/** "New chat": finds or makes the chat and hands it to `open`. Pressed again while one is being made, it waits
 * for that one. */
export async function makeNewChat(open: (sessionId: string) => void): Promise<void> {
  const pending = $chatBeingMade.get();
  if (pending) {
    await pending;
    return;
  }
  const made = emptyOrNewSession().then((id) => {
    open(id);
    return id;
  });
  $chatBeingMade.set(made);
  try {
    await made;
  } finally {
    $chatBeingMade.set(null);
  }
}

export async function renameSession(sessionId: string, title: string): Promise<void> {
  if (title.trim()) await client().requests.mutate("session.setTitle", { sessionId, title: title.trim() });
  else await client().requests.mutate("session.clearTitle", { sessionId });
}

export async function deleteSession(sessionId: string): Promise<void> {
  await client().requests.mutate("session.delete", { sessionId });
}

/** Pinned chats come first in every device's list; archived ones leave it (they stay under "Archived chats"). */
export async function organise(sessionId: string, change: { pinned?: boolean; archived?: boolean }): Promise<void> {
  await client().requests.mutate("session.update", { sessionId, ...change });
}

/** Saves the chat as a file (`GET /sessions/{id}/export`), named after its title. */
export async function exportSession(s: SessionListItem, format: "json" | "markdown"): Promise<void> {
  const blob = await client().transcripts.export(s.id, format);
  const name = (s.title || "chat").replace(/[\\/:*?"<>|\u0000-\u001f]+/g, " ").trim().slice(0, 80) || "chat";
  saveBlob(blob, `${name}.${format === "json" ? "json" : "md"}`);
}

/** A JSON export as a new chat (`POST /sessions/import`): one key for the file, so a retry imports it once. */
export function importSession(file: Blob): Promise<Session> {
  return client().transcripts.import(file, { requestId: newClientRequestId() });
}
