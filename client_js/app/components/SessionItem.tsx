import { useState } from "preact/hooks";
import type { SessionListItem as SessionSummary } from "../lib/chatsync";
import { deleteSession, renameSession } from "../stores/sessions";
import { act } from "../stores/call";
import { navigate, sessionPath } from "../stores/route";

const STATUS: Record<string, string> = { running: "answering", "requires-action": "needs you", error: "failed" };

/** A session in the sidebar: title, status, queue length; renamed or deleted in place. */
export function SessionItem({ s, current }: { s: SessionSummary; current: boolean }) {
  const [mode, setMode] = useState<"view" | "rename" | "confirm">("view");
  const [title, setTitle] = useState(s.title);
  const name = s.title || "New chat";
  if (mode === "rename") {
    return (
      <li class="session-item">
        <form class="rename" onSubmit={(e) => {
          e.preventDefault();
          setMode("view");
          void act("Renaming", () => renameSession(s.id, title));
        }}>
          <input aria-label="Chat title" value={title} autoFocus onInput={(e) => setTitle(e.currentTarget.value)}
                 onKeyDown={(e) => { if (e.key === "Escape") setMode("view"); }} />
          <button type="submit">Save</button>
        </form>
      </li>
    );
  }
  return (
    <li class={current ? "session-item current" : "session-item"}>
      <a href={sessionPath(s.id)} aria-current={current ? "page" : undefined}
         onClick={(e) => { e.preventDefault(); navigate(sessionPath(s.id)); }}>
        <span class="session-title">{name}</span>
        <span class="session-meta">
          {STATUS[s.status] && <span class={`badge badge-${s.status}`}>{STATUS[s.status]}</span>}
          {!!s.queueLength && <span class="badge">{s.queueLength} queued</span>}
          {s.unread && <span class="badge badge-unread">unread</span>}
        </span>
      </a>
      {mode === "confirm" ? (
        <span class="session-actions">
          <button type="button" class="danger" onClick={() => {
            setMode("view");
            void act("Deleting", async () => {
              await deleteSession(s.id);
              if (current) navigate("/", true);
            });
          }}>Confirm delete</button>
          <button type="button" onClick={() => setMode("view")}>Cancel</button>
        </span>
      ) : (
        <span class="session-actions">
          <button type="button" onClick={() => { setTitle(s.title); setMode("rename"); }}>Rename</button>
          <button type="button" onClick={() => setMode("confirm")}>Delete</button>
        </span>
      )}
    </li>
  );
}
