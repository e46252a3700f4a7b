// Which device this is, as the server knows it (`auth.me`): to tell "Stopped by you" from another device's Stop.
import { atom, onMount } from "nanostores";
import { $client } from "./auth";

export const $thisDeviceId = atom<string | null>(null);

onMount($thisDeviceId, () => $client.subscribe((client) => {
  $thisDeviceId.set(null);
  if (!client) return;
  void client.trpc.auth.me.query().then((me) => {
    if ($client.get() === client) $thisDeviceId.set(me.deviceId);
  }).catch(() => {});
}));
