// This user's signed-in devices (auth.devices) and device sign-in links (auth.createLink).
import { atom } from "nanostores";
import { mutate } from "./call";
import { $rpc } from "./auth";
import type { Device } from "../lib/types";

export const $devices = atom<Device[] | null>(null);
export const $link = atom<{ url: string; expiresAt: number } | null>(null);

export async function loadDevices(): Promise<void> {
  $devices.set(await $rpc.get()!.query<Device[]>("auth.devices"));
}

export async function renameDevice(deviceId: string, name: string): Promise<void> {
  await mutate("auth.renameDevice", { deviceId, name });
  await loadDevices();
}

export async function revokeDevice(deviceId: string): Promise<void> {
  await mutate("auth.revokeDevice", { deviceId });
  await loadDevices();
}

export async function createLink(deviceName?: string): Promise<void> {
  const res = await mutate<{ url: string; expiresAt: number }>("auth.createLink", deviceName ? { deviceName } : {});
  $link.set({ url: res.url, expiresAt: res.expiresAt });
}
