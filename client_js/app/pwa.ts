// The installable app (docs/web.md "Installing the app"): the service worker that keeps the app shell and shows
// notifications, and turning Web Push on and off for this device (docs/devices.md).
import type { PushEvent, PushSubscriptionInfo } from "../src/router.gen";
import { $client } from "./stores/auth";

export const PUSH_EVENTS: readonly { event: PushEvent; label: string }[] = [
  { event: "approval-needed", label: "A tool call needs approval" },
  { event: "answer-finished", label: "An answer is ready" },
  { event: "run-failed", label: "An answer failed" },
];

export function pushSupported(): boolean {
  return "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
}

if ("serviceWorker" in navigator && window.isSecureContext) {
  void navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch(() => {});
}

function trpc() {
  const c = $client.get();
  if (!c) throw new Error("Not signed in");
  return c.trpc;
}

function keyBytes(base64url: string): Uint8Array<ArrayBuffer> {
  const raw = atob(base64url.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (base64url.length % 4)) % 4));
  const out = new Uint8Array(new ArrayBuffer(raw.length));
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

/** This device's subscription as the server has it, or null. */
export async function currentPush(): Promise<PushSubscriptionInfo | null> {
  const all = await trpc().push.subscriptions.query();
  return all.find((s) => s.current) ?? null;
}

/** Ask for permission, subscribe with the push service, and tell the server which events this device wants. */
export async function enablePush(events: PushEvent[]): Promise<void> {
  if ((await Notification.requestPermission()) !== "granted") throw new Error("Notifications are blocked for this site");
  const reg = await navigator.serviceWorker.ready;
  const applicationServerKey = keyBytes(await trpc().push.publicKey.query());
  const sub = (await reg.pushManager.getSubscription())
    ?? (await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey }));
  const json = sub.toJSON();
  await trpc().push.subscribe.mutate({
    endpoint: sub.endpoint,
    keys: { p256dh: json.keys?.["p256dh"] ?? "", auth: json.keys?.["auth"] ?? "" },
    events,
  });
}

export async function disablePush(): Promise<void> {
  const reg = await navigator.serviceWorker.getRegistration();
  const sub = await reg?.pushManager.getSubscription();
  if (sub) {
    await trpc().push.unsubscribe.mutate({ endpoint: sub.endpoint });
    await sub.unsubscribe();
  }
}
