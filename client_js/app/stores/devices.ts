// This user's signed-in devices and device sign-in links: made here (auth.createLink), and every device's links
// still waiting to be used. While the Devices page is open, auth.watchDevices keeps both live: a link spent or
// revoked, a device signed in, renamed or revoked on any device shows without a reload.
import { atom } from "nanostores";
import { $client } from "./auth";
import type { Device, PendingLink } from "../lib/chatsync";

export const $devices = atom<Device[] | null>(null);
export const $links = atom<PendingLink[] | null>(null);
/** The link this page made last, to show as a QR code and to copy; gone once used or revoked. */
export const $link = atom<{ id: string; url: string; expiresAt: number; deviceName: string | null } | null>(null);

// Another sign-in (a link accepted, a revoked device signed out) shows nothing of the one before.
$client.listen(() => {
  $devices.set(null);
  $links.set(null);
  $link.set(null);
});

function client() {
  const c = $client.get();
  if (!c) throw new Error("Not signed in");
  return c;
}

// Whether the list has shown the link made here: only then does its absence mean it was spent or revoked (a
// list read just before it was made may arrive after it).
let madeListed = false;

function show(devices: Device[], links: PendingLink[]): void {
  $devices.set(devices);
  $links.set(links);
  const made = $link.get();
  if (!made) return;
  if (links.some((l) => l.id === made.id)) madeListed = true;
  else if (madeListed) $link.set(null); // spent or revoked: its code is no use now
}

/** Follows the devices and links until the returned function is called. */
export function watchDevices(): () => void {
  const c = $client.get();
  if (!c) return () => {};
  const sub = c.trpc.auth.watchDevices.subscribe(undefined, {
    onData(item) { if ($client.get() === c) show(item.devices, item.links); },
    onError() {},
  });
  return () => sub.unsubscribe();
}

export async function renameDevice(deviceId: string, name: string): Promise<void> {
  await client().requests.mutate("auth.renameDevice", { deviceId, name });
}

/** Revokes a device, and with it every link it made that is still waiting. */
export async function revokeDevice(deviceId: string): Promise<void> {
  await client().requests.mutate("auth.revokeDevice", { deviceId });
}

/** A one-time sign-in link; the device that spends it is named `deviceName` (the link carries the name). */
export async function createLink(deviceName: string): Promise<void> {
  const name = deviceName.trim() || null;
  const res = await client().requests.mutate("auth.createLink", name ? { deviceName: name } : {});
  madeListed = false;
  $link.set({ id: res.id, url: res.url, expiresAt: res.expiresAt, deviceName: name });
}

export async function revokeLink(linkId: string): Promise<void> {
  await client().requests.mutate("auth.revokeLink", { linkId });
  if ($link.get()?.id === linkId) $link.set(null);
}
