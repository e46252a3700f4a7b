// This user's signed-in devices (auth.devices) and device sign-in links (auth.createLink).
import { atom } from "nanostores";
import { $client } from "./auth";
import type { Device } from "../lib/chatsync";

export const $devices = atom<Device[] | null>(null);
export const $link = atom<{ url: string; expiresAt: number } | null>(null);

function requests() {
  const c = $client.get();
  if (!c) throw new Error("Not signed in");
  return c.requests;
}

export async function loadDevices(): Promise<void> {
  $devices.set(await requests().query("auth.devices", undefined));
}

export async function renameDevice(deviceId: string, name: string): Promise<void> {
  await requests().mutate("auth.renameDevice", { deviceId, name });
  await loadDevices();
}

export async function revokeDevice(deviceId: string): Promise<void> {
  await requests().mutate("auth.revokeDevice", { deviceId });
  await loadDevices();
}

export async function createLink(): Promise<void> {
  const res = await requests().mutate("auth.createLink", {});
  $link.set({ url: res.url, expiresAt: res.expiresAt });
}
