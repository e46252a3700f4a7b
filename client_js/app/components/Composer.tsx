import { useStore } from "@nanostores/preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { $busy, $session } from "../stores/conversation";
import { send, stop } from "../stores/actions";
import { $pending, addFiles, restore, takeReady } from "../stores/attachments";
import { act } from "../stores/call";
import { AttachmentChips } from "./AttachmentChips";
import { DraftOffer } from "./DraftOffer";
import { composerChanged, draftSent } from "../stores/presence";
import { $chatBeingMade } from "../stores/sessions";

const WHILE_BUSY: Record<string, string> = {
  enqueue: "The model is answering: Enter adds your message to the queue.",
  steer: "The model is answering: Enter adds your message to the current answer.",
  interrupt: "The model is answering: Enter stops it and sends your message.",
  reject: "The model is answering: wait for it to finish before sending.",
};

const hasFiles = (e: DragEvent) => !!e.dataTransfer && [...e.dataTransfer.types].includes("Files");

/** The message box: usable while the model answers. Enter sends, Shift+Enter is a new line. Files come by
 * the "Attach files" button, by dropping them on the box, or by pasting images; each shows as a chip. */
export function Composer({ sessionId }: { sessionId: string }) {
  const busy = useStore($busy);
  const policy = useStore($session)?.busyPolicy ?? "enqueue";
  const [text, setText] = useState("");
  const [dropping, setDropping] = useState(false);
  const box = useRef<HTMLTextAreaElement>(null);
  useLayoutEffect(() => {
    // The box grows with its text, up to a third of the window; beyond that it scrolls.
    const el = box.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight + 2, Math.max(window.innerHeight / 3, 80))}px`;
  }, [text]);
  const picker = useRef<HTMLInputElement>(null);
  useEffect(() => {
    // A file dropped beside the box would make the browser open it in place of the app (and drop the draft).
    const refuse = (e: DragEvent) => {
      if (!hasFiles(e) || (e.target as Element | null)?.closest?.(".composer")) return;
      e.preventDefault();
      if (e.dataTransfer) e.dataTransfer.dropEffect = "none";
    };
    window.addEventListener("dragover", refuse);
    window.addEventListener("drop", refuse);
    return () => {
      window.removeEventListener("dragover", refuse);
      window.removeEventListener("drop", refuse);
    };
  }, []);
  const submit = () => {
    const content = text;
    const files = takeReady();
    if (!files) return;
    if (!content.trim() && !files.length) return;
    setText("");
    draftSent();
    const attachments = files.map((f) => f.uploaded!);
    const putBack = () => {
      setText((t) => t || content);
      restore(files);
    };
    // Sent while "New chat" is on its way, it belongs to the chat that opens, not to the one still on screen.
    const making = $chatBeingMade.get();
    void act("Sending", async () => {
      let target = sessionId;
      if (making) {
        const made = await making.catch(() => null);
        if (made === null) return putBack(); // no new chat: the message stays here, unsent (the error is shown)
        target = made;
      }
      await send(target, content, attachments).catch((err) => {
        putBack();
        throw err;
      });
    });
    box.current?.focus();
  };
  const onKeyDown = (e: KeyboardEvent) => {
    // An IME composing (Japanese, Chinese…) uses Enter to pick a candidate: that Enter is not a send.
    if (e.isComposing || e.keyCode === 229) return;
    // Esc stops the answer, when nothing is being written here (with text, Esc is left to the browser).
    if (e.key === "Escape" && busy && !text && !$pending.get().length) {
      e.preventDefault();
      void act("Stopping", stop);
      return;
    }
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      submit();
    }
  };
  const onPaste = (e: ClipboardEvent) => {
    // Images only: pasted text stays text (a file copied in a file manager pastes as its name).
    const images = [...(e.clipboardData?.files ?? [])].filter((f) => f.type.startsWith("image/"));
    if (!images.length) return;
    e.preventDefault();
    addFiles(images);
  };
  return (
    <form class={dropping ? "composer dropping" : "composer"} onSubmit={(e) => { e.preventDefault(); submit(); }}
          onDragOver={(e) => { if (hasFiles(e)) { e.preventDefault(); setDropping(true); } }}
          onDragLeave={(e) => {
            // Leaving the form itself, not moving from one of its children to another.
            if (!e.currentTarget.contains(e.relatedTarget as Node | null)) setDropping(false);
          }}
          onDrop={(e) => {
            if (!e.dataTransfer?.files.length) return;
            e.preventDefault();
            setDropping(false);
            addFiles(e.dataTransfer.files);
          }}>
      <AttachmentChips />
      <DraftOffer text={text} setText={setText} />
      <label for="message" class="sr-only">Message</label>
      <textarea id="message" ref={box} rows={2} value={text} placeholder="Message"
                aria-describedby="composer-hint"
                onInput={(e) => { setText(e.currentTarget.value); composerChanged(e.currentTarget.value); }}
                onKeyDown={onKeyDown} onPaste={onPaste} />
      <div class="composer-buttons">
        <button type="button" onClick={() => picker.current?.click()}>Attach files</button>
        <input ref={picker} type="file" multiple hidden tabIndex={-1}
               onChange={(e) => { addFiles(e.currentTarget.files ?? []); e.currentTarget.value = ""; }} />
        <button type="submit" class="primary">Send</button>
      </div>
      <p id="composer-hint" class="hint">
        {busy ? WHILE_BUSY[policy] : "Enter sends, Shift+Enter starts a new line."} Drop files here or paste images to attach them.
      </p>
    </form>
  );
}
