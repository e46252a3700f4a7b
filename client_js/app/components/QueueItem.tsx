import { useStore } from "@nanostores/preact";
import { useState } from "preact/hooks";
import { $busy } from "../stores/conversation";
import type { AttachmentInput, QueueItem as Item } from "../lib/chatsync";
import { editQueued, moveQueued, removeQueued, sendQueuedNow } from "../stores/actions";
import { act } from "../stores/call";
import { attachmentCount } from "./MessageAttachments";

export const PREVIEW_CHARS = 50;

/** The first 50 characters (code points: an emoji is never cut in half). */
export function preview(text: string): string {
  const chars = Array.from(text);
  return chars.length > PREVIEW_CHARS ? chars.slice(0, PREVIEW_CHARS).join("") + "…" : text;
}

interface Props {
  item: Item;
  index: number;
  count: number;
  onDragStart(id: string): void;
  onDrop(toIndex: number): void;
}

/** One queued message: its preview, edited in place, removed, sent now, moved (buttons or dragging). */
export function QueueItem({ item, index, count, onDragStart, onDrop }: Props) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(item.content);
  const [draftFiles, setDraftFiles] = useState(item.attachments ?? []);
  const [over, setOver] = useState(false);
  const busy = useStore($busy); // then "Send now" stops the answer: it says so
  // Typed here and not yet confirmed by the server: shown at once, but there is nothing to act on yet.
  const pending = !!item.pending;
  const attached = item.attachments ?? [];
  const nameOf = (a: Record<string, unknown>) => String(a.name ?? a.path ?? "file");
  const names = attached.map(nameOf).join(", ");
  const startEditing = () => {
    setDraft(item.content);
    setDraftFiles(attached);
    setEditing(true);
  };
  const save = () => {
    const change: { content?: string; attachments?: readonly AttachmentInput[] } = {};
    if (draft.trim() && draft !== item.content) change.content = draft;
    // Files can only be taken off here; the list sent replaces the message's.
    if (draftFiles.length !== attached.length) change.attachments = draftFiles as unknown as AttachmentInput[];
    setEditing(false);
    if (change.content !== undefined || change.attachments) void act("Editing", () => editQueued(item.id, change));
  };
  return (
    <li class={over ? "queue-item drop-target" : "queue-item"} draggable={!editing && !pending} data-queue-id={item.id}
        onDragStart={(e) => { e.dataTransfer?.setData("text/plain", item.id); onDragStart(item.id); }}
        onDragOver={(e) => { e.preventDefault(); setOver(true); }}
        onDragLeave={() => setOver(false)}
        onDrop={(e) => { e.preventDefault(); setOver(false); onDrop(index); }}>
      {editing ? (
        <form class="queue-edit" onSubmit={(e) => { e.preventDefault(); save(); }}>
          <textarea aria-label="Edit queued message" value={draft} rows={3} autoFocus
                    onInput={(e) => setDraft(e.currentTarget.value)}
                    onKeyDown={(e) => { if (e.key === "Escape") setEditing(false); }} />
          <button type="submit" class="primary">Save</button>
          <button type="button" onClick={() => setEditing(false)}>Cancel</button>
          {draftFiles.length > 0 && (
            <ul class="chips" aria-label="Files of this message">
              {draftFiles.map((a, i) => (
                <li key={i} class="chip">
                  <span class="chip-name">{nameOf(a)}</span>
                  <button type="button" class="chip-remove" aria-label={`Remove ${nameOf(a)} from the queued message`}
                          title={`Remove ${nameOf(a)}`}
                          onClick={() => setDraftFiles(draftFiles.filter((_, j) => j !== i))}>×</button>
                </li>
              ))}
            </ul>
          )}
        </form>
      ) : (
        <>
          <span class="queue-text" title={item.content}>{preview(item.content)}</span>
          {attached.length > 0 && <span class="queue-attachments" title={names}>{attachmentCount(attached.length)}</span>}
          <span class="queue-actions">
            <button type="button" disabled={pending}
                    onClick={startEditing}>Edit</button>
            <button type="button" disabled={pending} aria-describedby={busy ? "send-now-hint" : undefined}
                    title={busy ? "Stops the current answer and sends this message now" : undefined}
                    onClick={() => act("Sending now", () => sendQueuedNow(item.id))}>Send now</button>
            <button type="button" disabled={pending || index === 0}
                    onClick={() => act("Moving", () => moveQueued(item.id, index - 1))}>Move up</button>
            <button type="button" disabled={pending || index === count - 1}
                    onClick={() => act("Moving", () => moveQueued(item.id, index + 1))}>Move down</button>
            <button type="button" disabled={pending}
                    onClick={() => act("Removing", () => removeQueued(item.id))}>Remove</button>
          </span>
        </>
      )}
    </li>
  );
}
