import { useStore } from "@nanostores/preact";
import { useState } from "preact/hooks";
import { $busy, $messages } from "../stores/conversation";
import { $thisDeviceId } from "../stores/this-device";
import { retry, stoppedHere } from "../stores/actions";
import { act } from "../stores/call";
import type { Message } from "../lib/chatsync";

/** Why an answer did not finish, in words: who stopped it, a server restart, or the failure's reason. */
export function endingText(m: Message, thisDevice: string | null): string | null {
  if (m.status !== "interrupted" && m.status !== "error") return null;
  if (m.error?.code === "interrupted") return "Interrupted by a server restart";
  if (m.error) return `Failed: ${m.error.message}`;
  if (m.status === "error") return "Failed";
  const by = m.stoppedBy;
  if ((by?.deviceId && by.deviceId === thisDevice) || (m.runId && stoppedHere.has(m.runId))) return "Stopped by you";
  if (!by) return "Stopped";
  return `Stopped on ${by.deviceName || "another device"}`;
}

/** The id of the newest user or assistant message. */
function newestSaid(messages: readonly Message[]): string | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === "assistant" || messages[i].role === "user") return messages[i].id;
  }
  return null;
}

/** The line under an answer that did not finish, kept on the message (so it reads the same after a reload), and
 * "Retry" on the newest one that failed: the same conversation is answered again. */
export function MessageEnding({ m }: { m: Message }) {
  const thisDevice = useStore($thisDeviceId);
  const messages = useStore($messages);
  const busy = useStore($busy);
  const [sending, setSending] = useState(false);
  const text = endingText(m, thisDevice);
  if (!text) return null;
  const failed = m.status === "error" || !!m.error;
  const newest = newestSaid(messages) === m.id;
  const onRetry = () => {
    setSending(true);
    void act("Retrying", retry).finally(() => setSending(false));
  };
  return (
    <div class={failed ? "msg-ending failed" : "msg-ending"}>
      <p>{text}</p>
      {failed && newest && !busy && (
        <button type="button" onClick={onRetry} disabled={sending}>Retry</button>
      )}
    </div>
  );
}
