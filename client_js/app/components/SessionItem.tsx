import { useState } from "preact/hooks";
import type { SessionListItem as SessionSummary } from "../lib/chatsync";
import { deleteSession, exportSession, organise, renameSession } from "../stores/sessions";
import { act } from "../stores/call";
import { navigate, sessionPath } from "../stores/route";

const STATUS: Record<string, string> = { running: "answering", "requires-action": "needs you", error: "failed" };

/** A session in the sidebar: title, status, queue length; renamed, pinned, archived, exported or deleted in
 * place (pins and archiving are the server's: every device's list follows). */
export function SessionItem({ s, current }: { s: SessionSummary; current: boolean }) {
  const [mode, setMode] = useState<"view" | "rename" | "confirm" | "export">("view");
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
  const save = (format: "json" | "markdown") => {
    setMode("view");
    void act("Exporting", () => exportSession(s, format));
  };
  return (
    <li class={current ? "session-item current" : "session-item"} data-session-id={s.id}>
      <a href={sessionPath(s.id)} aria-current={current ? "page" : undefined}
         onClick={(e) => { e.preventDefault(); navigate(sessionPath(s.id)); }}>
        <span class="session-title">{name}</span>
        <span class="session-meta">
          {STATUS[s.status] && <span class={`badge badge-${s.status}`}>{STATUS[s.status]}</span>}
          {!!s.queueLength && <span class="badge">{s.queueLength} queued</span>}
          {/* A failed answer stays marked until its chat is looked at (the session itself is idle again). */}
          {s.unread && s.attention === "failure" && s.status !== "error" && <span class="badge badge-error">failed</span>}
          {s.unread && s.attention !== "failure" && <span class="badge badge-unread">unread</span>}
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
          <button type="button" onClick={() => act(s.pinned ? "Unpinning" : "Pinning",
                                                   () => organise(s.id, { pinned: !s.pinned }))}>
            {s.pinned ? "Unpin" : "Pin"}
          </button>
          <button type="button" onClick={() => act(s.archived ? "Restoring" : "Archiving",
                                                   () => organise(s.id, { archived: !s.archived }))}>
            {s.archived ? "Unarchive" : "Archive"}
          </button>
          <button type="button" aria-expanded={mode === "export"}
                  onClick={() => setMode(mode === "export" ? "view" : "export")}>Export</button>
          <button type="button" onClick={() => setMode("confirm")}>Delete</button>
          {mode === "export" && (
            <span class="export-formats" role="group" aria-label={`Export ${name} as`}>
              <button type="button" onClick={() => save("markdown")}>Markdown</button>
              <button type="button" onClick={() => save("json")}>JSON</button>
            </span>
          )}
        </span>
      )}
    </li>
  );
}
