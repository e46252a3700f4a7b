import { useStore } from "@nanostores/preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { memo } from "preact/compat";
import { $hasEarlier, $messages, $streaming, loadEarlier } from "../stores/conversation";
import type { Message } from "../lib/chatsync";
import { MessageItem } from "./MessageItem";

// A long history is shown newest first: the last messages at once, older ones added in slices between
// frames, so opening a chat of a thousand messages never holds the page for long.
const FIRST = 30;
const SLICE = 20;
const later = (f: () => void): (() => void) => {
  if (typeof requestIdleCallback === "function") {
    const id = requestIdleCallback(f, { timeout: 100 });
    return () => cancelIdleCallback(id);
  }
  const id = setTimeout(f, 16);
  return () => clearTimeout(id);
};

// Messages are rendered in pages of a fixed size, counted from the start of the history, so a page's
// messages stay the same objects while tokens stream into the last one: only that page is diffed again.
const PAGE = 20;
const Page = memo(({ messages }: { messages: readonly Message[] }) => (
  <>{messages.map((m) => <MessageItem key={m.id} m={m} />)}</>
), (a, b) => a.messages.length === b.messages.length && a.messages.every((m, i) => m === b.messages[i]));

/**
 * The conversation as a `log`: aria-busy while an answer streams, so a screen reader waits for the finished
 * text instead of reading every token. Follows the end while the reader is at the end.
 */
export function MessageLog() {
  const messages = useStore($messages);
  const streaming = useStore($streaming);
  const hasEarlier = useStore($hasEarlier);
  const [loading, setLoading] = useState(false);
  const earlier = () => {
    setLoading(true);
    loadEarlier().catch(() => undefined).finally(() => setLoading(false));
  };
  const ref = useRef<HTMLDivElement>(null);
  const atEnd = useRef(true);
  const [shown, setShown] = useState(FIRST);
  useEffect(() => {
    if (shown < messages.length) return later(() => setShown((n) => n + SLICE));
  }, [shown, messages.length]);
  const from = Math.max(0, messages.length - shown);
  const pages: { start: number; messages: readonly Message[] }[] = [];
  for (let start = Math.floor(from / PAGE) * PAGE; start < messages.length; start += PAGE) {
    pages.push({ start, messages: messages.slice(Math.max(start, from), start + PAGE) });
  }
  useLayoutEffect(() => {
    const el = ref.current;
    if (el && atEnd.current) el.scrollTop = el.scrollHeight;
    // Only for messages growing at the end: older slices added above keep the view where it is by the
    // browser's scroll anchoring, without forcing a layout of the whole log for each slice.
  }, [messages]);
  useEffect(() => {
    // The log also changes size without a new message: the queue panel opens below it, the window
    // turns, a message first laid out off screen gets its real height. A reader at the end stays there.
    const el = ref.current;
    if (!el || typeof ResizeObserver !== "function") return;
    const follow = new ResizeObserver(() => { if (atEnd.current) el.scrollTop = el.scrollHeight; });
    follow.observe(el);
    if (el.firstElementChild) follow.observe(el.firstElementChild);
    return () => follow.disconnect();
  }, []);
  const onScroll = () => {
    const el = ref.current!;
    atEnd.current = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
  };
  return (
    <div ref={ref} class="log" role="log" aria-label="Conversation" aria-busy={streaming ? "true" : "false"}
         tabIndex={0} onScroll={onScroll}>
      <div class="log-content">
        {hasEarlier && from === 0 && (
          <button type="button" class="earlier" onClick={earlier} disabled={loading} aria-busy={loading}>
            Load earlier messages
          </button>
        )}
        {messages.length === 0 && <p class="empty">No messages yet. Say something below.</p>}
        {pages.map((p) => <Page key={p.start} messages={p.messages} />)}
      </div>
    </div>
  );
}
