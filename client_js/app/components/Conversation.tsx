import { useStore } from "@nanostores/preact";
import { useLayoutEffect } from "preact/hooks";
import { $loadState, openSession } from "../stores/conversation";
import { ChatHeader } from "./ChatHeader";
import { MessageLog } from "./MessageLog";
import { RunStatus } from "./RunStatus";
import { QueuePanel } from "./QueuePanel";
import { Composer } from "./Composer";
import { PresenceStatus } from "./PresenceStatus";

export function Conversation({ sessionId }: { sessionId: string }) {
  const state = useStore($loadState);
  // Before the browser paints or hands over input: nothing typed here can reach the chat open before it.
  useLayoutEffect(() => openSession(sessionId), [sessionId]);
  if (state === "missing") {
    return <section class="chat"><p class="empty">This chat does not exist (or was deleted).</p></section>;
  }
  return (
    <section class="chat" aria-label="Chat">
      <ChatHeader />
      <MessageLog key={sessionId} />
      <RunStatus />
      <QueuePanel />
      <PresenceStatus />
      <Composer sessionId={sessionId} />
    </section>
  );
}
