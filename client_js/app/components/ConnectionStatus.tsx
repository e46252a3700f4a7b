import { useStore } from "@nanostores/preact";
import { $connection } from "../stores/auth";
import type { ConnectionState } from "../lib/chatsync";

const TEXT: Record<ConnectionState, string> = {
  connecting: "connecting", connected: "connected", reconnecting: "reconnecting", resumed: "resumed",
  "signed-out": "signed out", closed: "closed",
};

/** The socket's state: connected, reconnecting (it dropped), resumed (back, caught up from where it was). */
export function ConnectionStatus() {
  const state = useStore($connection);
  return (
    <div class={`connection connection-${state}`} role="status" aria-label="Connection">
      <span class="dot" aria-hidden="true" />{TEXT[state]}
    </div>
  );
}
