import { memo } from "preact/compat";
import { useState } from "preact/hooks";
import { useStore } from "@nanostores/preact";
import { $leafId, $previews, previewsOf } from "../stores/conversation";
import type { Message } from "../lib/chatsync";
import { Markdown } from "./Markdown";
import { MessageAttachments } from "./MessageAttachments";
import { EditBox, MessageActions } from "./MessageVersions";
import { ToolCard } from "./ToolCard";
import { MessageEnding } from "./MessageEnding";
import { MessageBar } from "./MessageActions";

/** Calls of the message still streaming: their cards appear with tool-call-start, before the message completes. */
function StreamingToolCalls({ messageId }: { messageId: string }) {
  useStore($previews);
  return <>{previewsOf(messageId).map((id) => <ToolCard key={id} callId={id} />)}</>;
}

/** Files the model was given only as a placeholder for this answer, and why. */
function Notices({ m }: { m: Message }) {
  if (!m.notices?.length) return null;
  return <>{m.notices.map((n) => <p class="msg-notice" key={n.fileId + n.message}>{n.message}</p>)}</>;
}

/** Versions and actions under a message (not while it streams). */
function Actions({ m, onEdit }: { m: Message; onEdit: () => void }) {
  const leaf = useStore($leafId);
  if (m.status === "streaming") return null;
  return <MessageActions m={m} onEdit={onEdit} last={leaf === m.id} />;
}

/** One message of the log. Memoised on the message object: a token for another message leaves it alone. */
export const MessageItem = memo(function MessageItem({ m }: { m: Message }) {
  const [editing, setEditing] = useState(false);
  if (m.role === "tool") return null; // shown inside its tool call's card
  if (m.role === "system") {
    return <div class="msg msg-system" data-role="system"><p>{m.content}</p></div>;
  }
  if (m.role === "user") {
    return (
      <div class="msg msg-user" data-role="user" data-message-id={m.id}>
        <span class="sr-only">You: </span>
        {editing ? <EditBox m={m} done={() => setEditing(false)} />
                 : m.content && <p class="plain">{m.content}</p>}
        <MessageAttachments list={m.attachments} />
        {!editing && <MessageBar m={m} />}
        {!editing && <Actions m={m} onEdit={() => setEditing(true)} />}
      </div>
    );
  }
  const streaming = m.status === "streaming";
  return (
    <div class={streaming ? "msg msg-assistant streaming" : "msg msg-assistant"} data-role="assistant"
         data-message-id={m.id} data-status={m.status}>
      <span class="sr-only">Assistant: </span>
      {(m.content || !m.toolCalls?.length) && <Markdown text={m.content} final={!streaming} />}
      {streaming ? <StreamingToolCalls messageId={m.id} />
                 : m.toolCalls?.map((c) => <ToolCard key={c.id} callId={c.id} />)}
      <MessageEnding m={m} />
      <Notices m={m} />
      <MessageBar m={m} />
      <Actions m={m} onEdit={() => {}} />
    </div>
  );
});
