import { useStore } from "@nanostores/preact";
import { useLayoutEffect, useRef } from "preact/hooks";
import { $messages, $streaming } from "../stores/conversation";
import { MessageItem } from "./MessageItem";

/**
 * The conversation as a `log`: aria-busy while an answer streams, so a screen reader waits for the finished
 * text instead of reading every token. Follows the end while the reader is at the end.
 */
export function MessageLog() {
  const messages = useStore($messages);
  const streaming = useStore($streaming);
  const ref = useRef<HTMLDivElement>(null);
  const atEnd = useRef(true);
  useLayoutEffect(() => {
    const el = ref.current;
    if (el && atEnd.current) el.scrollTop = el.scrollHeight;
  }, [messages]);
  const onScroll = () => {
    const el = ref.current!;
    atEnd.current = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
  };
  return (
    <div ref={ref} class="log" role="log" aria-label="Conversation" aria-busy={streaming ? "true" : "false"}
         tabIndex={0} onScroll={onScroll}>
      {messages.length === 0 && <p class="empty">No messages yet. Say something below.</p>}
      {messages.map((m) => <MessageItem key={m.id} m={m} />)}
    </div>
  );
}
