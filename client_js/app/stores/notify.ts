// Notifications shown by this tab itself (docs/devices.md): while the tab is hidden and this device has no Web
// Push subscription (the server's pushes then reach nobody here), a chat of the user that wants attention — an
// answer ready, a failure, an approval waiting, as the live list's `unread`/`attention` say — is shown with the
// Notification API (through the service worker when there is one, so a click opens the chat). Reading the chat
// anywhere withdraws it. With a push subscription the server's push does this, and the tab stays quiet.
import { $sessionList, $sessionsLoaded } from "./sessions";
import type { SessionListItem } from "../lib/chatsync";

const BODY: Record<string, string> = {
  answer: "An answer is ready",
  failure: "An answer failed",
  approval: "A tool call needs your approval",
};

/** What each chat wanted when last seen, to notify on a change only (never for what was there at load). */
let seen = new Map<string, string | null>();
let primed = false;

function wants(s: SessionListItem): string | null {
  return s.unread && s.attention ? s.attention : null;
}

async function registration(): Promise<ServiceWorkerRegistration | null> {
  if (!("serviceWorker" in navigator)) return null;
  return (await navigator.serviceWorker.getRegistration()) ?? null;
}

async function pushSubscribed(reg: ServiceWorkerRegistration | null): Promise<boolean> {
  try {
    return !!(await reg?.pushManager?.getSubscription());
  } catch {
    return false;
  }
}

/** The chat's notifications, shown by this tab or pushed, are withdrawn on this device. */
async function withdraw(sessionId: string): Promise<void> {
  const reg = await registration();
  for (const n of (await reg?.getNotifications()) ?? []) {
    if ((n.data as { sessionId?: string } | null)?.sessionId === sessionId) n.close();
  }
}

async function show(s: SessionListItem, attention: string): Promise<void> {
  if (typeof Notification === "undefined" || Notification.permission !== "granted") return;
  const reg = await registration();
  if (await pushSubscribed(reg)) return;
  const title = s.title || "New chat";
  const options: NotificationOptions = {
    body: BODY[attention] ?? "", tag: `chatsync:${s.id}`, icon: "/icon-192.png",
    data: { sessionId: s.id, type: attention, title, local: true },
  };
  if (reg) await reg.showNotification(title, options); // one per chat: the tag replaces the older one
  else new Notification(title, options);
}

$sessionList.listen((items) => {
  const next = new Map(items.map((s) => [s.id, wants(s)]));
  if (primed && $sessionsLoaded.get()) {
    for (const s of items) {
      const now = next.get(s.id) ?? null;
      const before = seen.get(s.id) ?? null;
      if (now === before) continue;
      if (now && document.visibilityState === "hidden") void show(s, now).catch(() => {});
      else if (!now && before) void withdraw(s.id).catch(() => {});
    }
  }
  seen = next;
  primed = $sessionsLoaded.get();
});
