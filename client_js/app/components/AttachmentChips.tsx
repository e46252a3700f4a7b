import { useStore } from "@nanostores/preact";
import { $pending, removePending, retryUpload } from "../stores/attachments";
import { formatSize } from "../lib/chatsync";

/** The files going with the next message: uploading, ready, refused (with the server's reason), or not sent
 * for want of a connection (with "Retry"). */
export function AttachmentChips() {
  const pending = useStore($pending);
  if (!pending.length) return null;
  return (
    <ul class="chips" aria-label="Files to send">
      {pending.map((p) => (
        <li key={p.key} class={`chip chip-${p.state}`} data-state={p.state}>
          <span class="chip-name">{p.name}</span>
          <span class="chip-meta">
            {p.state === "uploading" ? <>uploading <progress aria-label={`Uploading ${p.name}`} /></>
              : p.state === "failed" ? <span class="error">{p.error}</span>
              : formatSize(p.size)}
          </span>
          {p.state === "failed" && p.retryable && (
            <button type="button" aria-label={`Retry uploading ${p.name}`} onClick={() => retryUpload(p.key)}>Retry</button>
          )}
          <button type="button" class="chip-remove" aria-label={`Remove ${p.name}`} title={`Remove ${p.name}`}
                  onClick={() => removePending(p.key)}>×</button>
        </li>
      ))}
    </ul>
  );
}
