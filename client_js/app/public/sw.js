// The app's service worker (docs/web.md "Installing the app"): it keeps the app shell (the page and its hashed
// assets) so the app opens without a network, and it shows Web Push notifications (docs/devices.md). It never
// caches the API, files or anything else of the user's: only "/" and /assets/.
const SHELL = "chatsync-shell-v1";
const APP_ROUTES = /^\/($|s\/[^/]+$|devices$|link$)/;

self.addEventListener("install", (event) => {
  // The page and the hashed assets it names, so the next start works without a network.
  event.waitUntil((async () => {
    const cache = await caches.open(SHELL);
    const page = await fetch("/", { cache: "no-store" });
    if (!page.ok) return;
    const assets = [...new Set((await page.clone().text()).match(/\/assets\/[^"'\s>]+/g) ?? [])];
    await cache.put("/", page);
    await cache.addAll(assets);
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) if (name !== SHELL) await caches.delete(name);
    await self.clients.claim();
  })());
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== self.location.origin) return;
  if (request.mode === "navigate" && APP_ROUTES.test(url.pathname)) {
    // The page: the network's when it answers (a new build), else the kept one.
    event.respondWith((async () => {
      try {
        const fresh = await fetch(request);
        if (fresh.ok) await (await caches.open(SHELL)).put("/", fresh.clone());
        return fresh;
      } catch {
        return (await caches.match("/")) ?? Response.error();
      }
    })());
  } else if (url.pathname.startsWith("/assets/")) {
    // Hashed names never change their content: kept as first fetched.
    event.respondWith((async () => {
      const kept = await caches.match(request);
      if (kept) return kept;
      const fresh = await fetch(request);
      if (fresh.ok) await (await caches.open(SHELL)).put(request, fresh.clone());
      return fresh;
    })());
  }
  // Anything else (/trpc, /files, /auth, ...) goes to the network untouched and is never kept.
});

self.addEventListener("push", (event) => {
  let note = {};
  try {
    note = event.data ? event.data.json() : {};
  } catch {
    return;
  }
  if (!note.sessionId) return;
  const options = {
    body: note.body || "",
    tag: note.tag || `${note.sessionId}:${note.type}`,
    renotify: true,
    icon: "/icon-192.png",
    data: note,
    requireInteraction: note.type === "approval-needed",
  };
  if (note.type === "approval-needed" && note.capability) options.actions = note.actions || [];
  event.waitUntil((async () => {
    // The newest word about a chat replaces what this device showed of it before (an approval that was
    // answered, an answer since followed by another): every device gets the push, so each withdraws its own.
    for (const older of await self.registration.getNotifications()) {
      if (older.data && older.data.sessionId === note.sessionId) older.close();
    }
    await self.registration.showNotification(note.title || "chatsync", options);
  })());
});

async function decide(note, approved) {
  const res = await fetch("/trpc/push.decide", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ capability: note.capability, approved }),
  });
  const word = approved ? "Approved" : "Denied";
  const outcome = res.ok ? `${word} from this device.` : "Already decided (or expired): open the chat to see.";
  await self.registration.showNotification(note.title || "chatsync", { body: outcome, tag: note.tag, data: note });
}

/** A notification clicked (`action`: "approve", "deny", or "" for the notification itself). A named function, so
 * the browser tests can run exactly this on a shown notification (they cannot press a system notification). */
async function onNotificationClick(notification, action) {
  const note = notification.data || {};
  notification.close();
  if ((action === "approve" || action === "deny") && note.capability) {
    await decide(note, action === "approve");
    return;
  }
  const target = `/s/${encodeURIComponent(note.sessionId || "")}`;
  for (const client of await self.clients.matchAll({ type: "window", includeUncontrolled: true })) {
    if ("focus" in client) {
      await client.focus();
      if ("navigate" in client) await client.navigate(target);
      return;
    }
  }
  await self.clients.openWindow(target);
}

self.addEventListener("notificationclick", (event) => {
  event.waitUntil(onNotificationClick(event.notification, event.action));
});
