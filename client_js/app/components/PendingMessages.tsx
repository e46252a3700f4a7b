import { useStore } from "@nanostores/preact";
import { $messages, $queue, $sessionId } from "../stores/conversation";
import { $online, $outbox } from "../stores/outbox";

/** Messages of this chat written but not yet taken by the server: shown at the end of the log at once, marked
 * "waiting for connection" while the server is away (they are sent when it is back), "sending…" meanwhile. */
export function PendingMessages() {
  const outbox = useStore($outbox);
  const sessionId = useStore($sessionId);
  const messages = useStore($messages);
  const queue = useStore($queue);
  const online = useStore($online);
  const mine = outbox.filter((o) => o.sessionId === sessionId);
  if (!mine.length) return null; // the usual case, re-rendered with every streamed token: nothing to work out
  const arrived = new Set<string>();
  for (const m of messages) if (m.clientRequestId) arrived.add(m.clientRequestId);
  for (const q of queue) if (q.clientRequestId) arrived.add(q.clientRequestId);
  const waiting = mine.filter((o) => !arrived.has(o.clientRequestId));
  return (
    <>
      {waiting.map((o) => (
        <div key={o.clientRequestId} class="msg msg-user msg-pending" data-role="pending"
             data-client-request-id={o.clientRequestId}>
          <span class="sr-only">You: </span>
          {o.content && <p class="plain">{o.content}</p>}
          {o.fileNames.length > 0 && <p class="msg-pending-files">{o.fileNames.join(", ")}</p>}
          <p class="msg-pending-state">{online ? "Sending…" : "Waiting for connection"}</p>
        </div>
      ))}
    </>
  );
}
