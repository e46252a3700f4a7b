import { useStore } from "@nanostores/preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { memo } from "preact/compat";
import { $hasEarlier, $messages, $sessionId, $streaming, loadEarlier } from "../stores/conversation";
import { $outbox } from "../stores/outbox";
import type { Message } from "../lib/chatsync";
import { MessageItem } from "./MessageItem";
import { PendingMessages } from "./PendingMessages";
import { plural } from "../lib/plural";
import { $sends } from "../stores/actions";
import { act } from "../stores/call";

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

// Closer than this to the end counts as "at the end" (a reader who scrolled back down follows again).
const NEAR_END_PX = 48;
// Inputs by which a reader moves the log themselves; a scroll up that follows one is theirs.
const USER_KEYS = new Set(["ArrowUp", "PageUp", "Home", "ArrowDown", "PageDown", "End", " "]);

/** How many messages arrived after `since` (ids of the messages shown when the reader scrolled away). */
function countNew(messages: readonly Message[], since: ReadonlySet<string> | null): number {
  if (!since) return 0;
  return messages.filter((m) => !since.has(m.id) && (m.role === "user" || m.role === "assistant")).length;
}

/**
 * The conversation as a `log`: aria-busy while an answer streams, so a screen reader waits for the finished
 * text instead of reading every token. It follows the end — new messages, streaming text, the log shrinking
 * when the queue panel opens — unless the reader scrolled up themselves (a wheel, a touch, a key or the
 * scrollbar, then a scroll up); then "Jump to latest" says how many messages arrived since, and takes them back.
 */
export function MessageLog() {
  const messages = useStore($messages);
  const streaming = useStore($streaming);
  const hasEarlier = useStore($hasEarlier);
  const outbox = useStore($outbox);
  const [loading, setLoading] = useState(false);
  const earlier = () => {
    setLoading(true);
    void act("Loading earlier messages", loadEarlier).finally(() => setLoading(false));
  };
  const ref = useRef<HTMLDivElement>(null);
  // Following the end; false only after the reader scrolled up themselves.
  const follow = useRef(true);
  const lastTop = useRef(0);
  const userInput = useRef(0);
  // The ids shown when the reader scrolled away: what arrives after them is "new".
  const [away, setAway] = useState<ReadonlySet<string> | null>(null);
  const [shown, setShown] = useState(FIRST);
  useEffect(() => {
    if (shown < messages.length) return later(() => setShown((n) => n + SLICE));
  }, [shown, messages.length]);
  const from = Math.max(0, messages.length - shown);
  const pages: { start: number; messages: readonly Message[] }[] = [];
  for (let start = Math.floor(from / PAGE) * PAGE; start < messages.length; start += PAGE) {
    pages.push({ start, messages: messages.slice(Math.max(start, from), start + PAGE) });
  }
  const toEnd = () => {
    const el = ref.current;
    if (!el) return;
    el.scrollTop = el.scrollHeight;
    lastTop.current = el.scrollTop;
  };
  useLayoutEffect(() => {
    if (follow.current) toEnd();
    // (outbox: a message waiting for the connection shows at the end, like a new one)
    // Only for messages growing at the end: older slices added above keep the view where it is by the
    // browser's scroll anchoring, without forcing a layout of the whole log for each slice.
  }, [messages, outbox]);
  useEffect(() => {
    // The log also changes size without a new message: the queue panel opens below it, the window
    // turns, a message first laid out off screen gets its real height. A reader following stays at the end.
    const el = ref.current;
    if (!el || typeof ResizeObserver !== "function") return;
    const keep = new ResizeObserver(() => { if (follow.current) toEnd(); });
    keep.observe(el);
    if (el.firstElementChild) keep.observe(el.firstElementChild);
    return () => keep.disconnect();
  }, []);
  const jump = () => {
    follow.current = true;
    setAway(null);
    toEnd();
  };
  // A message this device sends brings the log back to its end, wherever the reader was.
  useEffect(() => $sends.listen(jump), []);
  const onScroll = () => {
    const el = ref.current!;
    const top = el.scrollTop;
    const nearEnd = el.scrollHeight - top - el.clientHeight < NEAR_END_PX;
    if (nearEnd) {
      if (!follow.current) jump();
    } else if (follow.current && top < lastTop.current - 1 && performance.now() - userInput.current < 1000) {
      // Only the reader moves the view up: layout changes (a panel opening, text reflowing) never do.
      follow.current = false;
      setAway(new Set($messages.get().map((m) => m.id)));
    }
    lastTop.current = top;
  };
  const byUser = () => { userInput.current = performance.now(); };
  // A reader who moves to "Load earlier messages" (a pointer on it, or the focus: a key or a screen reader)
  // has gone back to the start: the log stops following, or the top's messages laid out as they come into
  // view would send it back to its end, the button with it.
  const readBack = () => {
    if (!follow.current) return;
    follow.current = false;
    setAway(new Set($messages.get().map((m) => m.id)));
  };
  const fresh = countNew(messages, away);
  const pendingHere = outbox.some((o) => o.sessionId === $sessionId.get());
  return (
    <div class="log-frame">
      <div ref={ref} class="log" role="log" aria-label="Conversation" aria-busy={streaming ? "true" : "false"}
           tabIndex={0} onScroll={onScroll} onWheel={byUser} onTouchMove={byUser} onPointerDown={byUser}
           onKeyDown={(e) => { if (USER_KEYS.has(e.key)) byUser(); }}>
        <div class="log-content">
          {hasEarlier && from === 0 && (
            <button type="button" class="earlier" onClick={earlier} onFocus={readBack} onPointerDown={readBack}
                    disabled={loading} aria-busy={loading}>
              Load earlier messages
            </button>
          )}
          {messages.length === 0 && !pendingHere && <p class="empty">No messages yet. Say something below.</p>}
          {pages.map((p) => <Page key={p.start} messages={p.messages} />)}
          <PendingMessages />
        </div>
      </div>
      {away && (
        <div class="jump-latest">
          <button type="button" onClick={jump} aria-describedby="jump-count">Jump to latest</button>
          <span id="jump-count" class="jump-count">
            {fresh ? plural(fresh, "new message") : "no new messages"}
          </span>
        </div>
      )}
    </div>
  );
}
