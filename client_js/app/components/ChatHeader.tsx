import { useStore } from "@nanostores/preact";
import { $busy, $session } from "../stores/conversation";
import { stop } from "../stores/actions";
import { act } from "../stores/call";
import { SessionSettings } from "./SessionSettings";

const fmt = new Intl.NumberFormat();

/** Title, model, token usage, and Stop while the model answers (it stops the run for every device). */
export function ChatHeader() {
  const session = useStore($session);
  const busy = useStore($busy);
  if (!session) return null;
  return (
    <header class="chat-header">
      <h1 class="chat-title">{session.title || "New chat"}</h1>
      <SessionSettings />
      <p class="usage" aria-label="Token usage">
        {fmt.format(session.usage.inputTokens)} in · {fmt.format(session.usage.outputTokens)} out
      </p>
      {busy && <button type="button" class="danger" onClick={() => act("Stopping", stop)}>Stop</button>}
    </header>
  );
}
