import { useStore } from "@nanostores/preact";
import { $connection } from "../stores/auth";
import { $outbox } from "../stores/outbox";
import { plural } from "../lib/plural";

/** While the server is away: says so at the top of the app, with how many messages wait to be sent (they go by
 * themselves when it is back, each once). Nothing while connected. */
export function OfflineBanner() {
  const state = useStore($connection);
  const waiting = useStore($outbox).length;
  // Reconnecting: it was connected and dropped. Still connecting with messages waiting: the app was opened (or
  // reloaded) while the server is away.
  if (state !== "reconnecting" && !(state === "connecting" && waiting > 0)) return null;
  return (
    <div class="offline-banner" role="alert">
      <strong>Offline</strong>
      {waiting
        ? `: ${plural(waiting, "message")} waiting to be sent when the server is back.`
        : ": what you write is sent when the server is back."}
    </div>
  );
}
