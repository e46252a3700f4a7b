// The signed-in user's sessions for the sidebar: the library's live list (session.list, then session.feed),
// so titles, statuses and queue lengths change here whichever device changed them.
import { atom } from "nanostores";
import { $client } from "./auth";
import type { Session, SessionList, SessionListItem } from "../lib/chatsync";

export const $sessionList = atom<readonly SessionListItem[]>([]);
export const $sessionsLoaded = atom(false);

let list: SessionList | null = null;
let unsubscribe: (() => void)[] = [];

export function startSessions(): void {
  const client = $client.get();
  if (!client) return;
  stopSessions();
  list = client.watchSessions({ limit: 100 });
  unsubscribe = [
    list.items.subscribe((items) => $sessionList.set(items)),
    list.status.subscribe((s) => $sessionsLoaded.set(s !== "loading")),
  ];
}

export function stopSessions(): void {
  for (const u of unsubscribe) u();
  unsubscribe = [];
  list?.close();
  list = null;
  $sessionList.set([]);
  $sessionsLoaded.set(false);
}

function client() {
  const c = $client.get();
  if (!c) throw new Error("Not signed in");
  return c;
}

export function createSession(): Promise<Session> {
  return client().createSession({});
}

export async function renameSession(sessionId: string, title: string): Promise<void> {
  if (title.trim()) await client().requests.mutate("session.setTitle", { sessionId, title: title.trim() });
  else await client().requests.mutate("session.clearTitle", { sessionId });
}

export async function deleteSession(sessionId: string): Promise<void> {
  await client().requests.mutate("session.delete", { sessionId });
}
