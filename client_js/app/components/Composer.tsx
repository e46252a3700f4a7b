import { useStore } from "@nanostores/preact";
import { useRef, useState } from "preact/hooks";
import { $busy, $session } from "../stores/conversation";
import { send } from "../stores/actions";
import { act } from "../stores/call";

const WHILE_BUSY: Record<string, string> = {
  enqueue: "The model is answering: Enter adds your message to the queue.",
  steer: "The model is answering: Enter adds your message to the current answer.",
  interrupt: "The model is answering: Enter stops it and sends your message.",
  reject: "The model is answering: wait for it to finish before sending.",
};

/** The message box: usable while the model answers. Enter sends, Shift+Enter is a new line. */
export function Composer() {
  const busy = useStore($busy);
  const policy = useStore($session)?.busyPolicy ?? "enqueue";
  const [text, setText] = useState("");
  const box = useRef<HTMLTextAreaElement>(null);
  const submit = () => {
    const content = text;
    if (!content.trim()) return;
    setText("");
    void act("Sending", () => send(content).catch((err) => { setText((t) => t || content); throw err; }));
    box.current?.focus();
  };
  const onKeyDown = (e: KeyboardEvent) => {
    // An IME composing (Japanese, Chinese…) uses Enter to pick a candidate: that Enter is not a send.
    if (e.isComposing || e.keyCode === 229) return;
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      submit();
    }
  };
  return (
    <form class="composer" onSubmit={(e) => { e.preventDefault(); submit(); }}>
      <label for="message" class="sr-only">Message</label>
      <textarea id="message" ref={box} rows={2} value={text} placeholder="Message"
                aria-describedby="composer-hint" onInput={(e) => setText(e.currentTarget.value)}
                onKeyDown={onKeyDown} />
      <button type="submit" class="primary">Send</button>
      <p id="composer-hint" class="hint">{busy ? WHILE_BUSY[policy] : "Enter sends, Shift+Enter starts a new line."}</p>
    </form>
  );
}
