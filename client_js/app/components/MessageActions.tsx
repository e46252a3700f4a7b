import type { ComponentChildren } from "preact";
import { useRef } from "preact/hooks";
import type { Message } from "../lib/chatsync";
import { announce } from "../stores/announcer";
import { act } from "../stores/call";

/** What an action is given: the message, and its element in the log (for what it shows, e.g. its text). */
export interface MessageContext {
  message: Message;
  element: HTMLElement | null;
}

/**
 * One entry of a message's action bar: a button named `label` that runs `run`, or anything `render` draws
 * (version arrows, a menu). `applies` says on which messages it shows (all by default).
 */
export interface MessageAction {
  key: string;
  label?: string;
  applies?: (m: Message) => boolean;
  run?: (ctx: MessageContext) => Promise<unknown> | void;
  render?: (ctx: MessageContext) => ComponentChildren;
}

const said = (m: Message) => (m.role === "user" || m.role === "assistant") && m.status !== "streaming";

async function copyText(text: string, what: string): Promise<void> {
  await navigator.clipboard.writeText(text);
  announce(`${what} copied`);
}

/** The actions of every message bar, in order. Other features add theirs with {@link addMessageAction}. */
export const MESSAGE_ACTIONS: MessageAction[] = [
  {
    key: "copy", label: "Copy", applies: (m) => said(m) && !!m.content,
    // As written: the Markdown source of an answer, the text of a user's message.
    run: ({ message }) => copyText(message.content, "Message"),
  },
  {
    key: "copy-plain", label: "Copy as plain text", applies: (m) => said(m) && !!m.content && m.role === "assistant",
    // As read: the rendered answer's text, without Markdown's marks.
    run: ({ message, element }) => {
      const shown = element?.querySelector<HTMLElement>(".md");
      return copyText(shown ? shown.innerText.trim() : message.content, "Text");
    },
  },
];

/** Adds an action to every message bar, at `index` (the end by default); returns a function that removes it. */
export function addMessageAction(action: MessageAction, index = MESSAGE_ACTIONS.length): () => void {
  MESSAGE_ACTIONS.splice(index, 0, action);
  return () => {
    const at = MESSAGE_ACTIONS.indexOf(action);
    if (at >= 0) MESSAGE_ACTIONS.splice(at, 1);
  };
}

const TIME = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });
const FULL = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "short" });

/** A message's bar: when it was written and its actions. Shown on hover and focus (always on touch screens). */
export function MessageBar({ m }: { m: Message }) {
  const ref = useRef<HTMLDivElement>(null);
  if (!said(m)) return null;
  const ctx = (): MessageContext => ({ message: m, element: ref.current?.closest<HTMLElement>(".msg") ?? null });
  const shown = MESSAGE_ACTIONS.filter((a) => !a.applies || a.applies(m));
  const when = new Date(m.createdAt);
  return (
    <div ref={ref} class="msg-bar" role="toolbar" aria-label="Message actions">
      <time class="msg-time" dateTime={when.toISOString()} title={FULL.format(when)}>{TIME.format(when)}</time>
      {shown.map((a) => a.render ? <span key={a.key}>{a.render(ctx())}</span> : (
        <button key={a.key} type="button" class="msg-action"
                onClick={() => { void act(a.label ?? a.key, async () => { await a.run?.(ctx()); }); }}>
          {a.label}
        </button>
      ))}
    </div>
  );
}
