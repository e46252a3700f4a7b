// This user's signed-in devices (auth.devices) and device sign-in links: made here (auth.createLink), and every
// device's links still waiting to be used (auth.links, auth.revokeLink).
import { atom } from "nanostores";
import { $client } from "./auth";
import type { Device, PendingLink } from "../lib/chatsync";

export const $devices = atom<Device[] | null>(null);
export const $links = atom<PendingLink[] | null>(null);
/** The link this page made last, to copy; gone once revoked. */
export const $link = atom<{ id: string; url: string; expiresAt: number } | null>(null);

// Another sign-in (a link accepted, a revoked device signed out) shows nothing of the one before.
$client.listen(() => {
  $devices.set(null);
  $links.set(null);
  $link.set(null);
});

function requests() {
  const c = $client.get();
  if (!c) throw new Error("Not signed in");
  return c.requests;
}

export async function loadDevices(): Promise<void> {
  const r = requests();
  const [devices, links] = await Promise.all([r.query("auth.devices", undefined), r.query("auth.links", undefined)]);
  $devices.set(devices);
  $links.set(links);
}

export async function renameDevice(deviceId: string, name: string): Promise<void> {
  await requests().mutate("auth.renameDevice", { deviceId, name });
  await loadDevices();
}

/** Revokes a device, and with it every link it made that is still waiting. */
export async function revokeDevice(deviceId: string): Promise<void> {
  await requests().mutate("auth.revokeDevice", { deviceId });
  await loadDevices();
}

export async function createLink(): Promise<void> {
  const res = await requests().mutate("auth.createLink", {});
  $link.set({ id: res.id, url: res.url, expiresAt: res.expiresAt });
  $links.set(await requests().query("auth.links", undefined));
}

export async function revokeLink(linkId: string): Promise<void> {
  await requests().mutate("auth.revokeLink", { linkId });
  $links.set(await requests().query("auth.links", undefined));
  if ($link.get()?.id === linkId) $link.set(null);
}
