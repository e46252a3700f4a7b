import { useStore } from "@nanostores/preact";
import { useEffect, useRef } from "preact/hooks";
import {
  $searchHasMore, $searchLoaded, $searchResults, $searchText, $sessionList, $sessionsLoaded, $showArchived,
  importSession, makeNewChat, loadMoreResults, setSearch, showArchived,
} from "../stores/sessions";
import { $route, navigate, sessionPath } from "../stores/route";
import { act } from "../stores/call";
import { announce } from "../stores/announcer";
import { groupSessions } from "../lib/groups";
import type { SessionListItem } from "../lib/chatsync";
import { SessionItem } from "./SessionItem";
import "../sidebar.css";

/** Keyboard shortcuts (docs/web.md): Ctrl+Shift+O (⌘⇧O) a new chat, Ctrl+K (⌘K) the search box. */
export const NEW_CHAT_KEYS = "Control+Shift+O Meta+Shift+O";
export const SEARCH_KEYS = "Control+K Meta+K";

export function newChat(): Promise<void> {
  return act("Creating a chat", async () => {
    await makeNewChat((id) => navigate(sessionPath(id)));
    document.getElementById("message")?.focus();
  });
}

function List({ items, currentId, label }: { items: readonly SessionListItem[]; currentId: string | null;
                                             label: string }) {
  return (
    <ul class="session-list" aria-label={label}>
      {items.map((s) => <SessionItem key={s.id} s={s} current={s.id === currentId} />)}
    </ul>
  );
}

/** The server's search results, live: a rename or a new message elsewhere shows here too. */
function Results({ currentId }: { currentId: string | null }) {
  const results = useStore($searchResults) ?? [];
  const more = useStore($searchHasMore);
  const loaded = useStore($searchLoaded);
  const text = useStore($searchText).trim();
  return (
    <section class="session-group" aria-labelledby="search-results-heading">
      <h2 id="search-results-heading" class="group-title">Search results</h2>
      {loaded && !results.length && !more && <p class="hint">No chats match “{text}”.</p>}
      <List items={results} currentId={currentId} label="Search results" />
      {more && <button type="button" class="more" onClick={() => act("Searching", loadMoreResults)}>
        Search older chats
      </button>}
    </section>
  );
}

function Groups({ currentId }: { currentId: string | null }) {
  const sessions = useStore($sessionList);
  const archived = useStore($showArchived);
  const loaded = useStore($sessionsLoaded);
  if (archived) {
    return (
      <section class="session-group" aria-labelledby="archived-heading">
        <h2 id="archived-heading" class="group-title">Archived chats</h2>
        {loaded && !sessions.length && <p class="hint">No archived chats.</p>}
        <List items={sessions} currentId={currentId} label="Archived chats" />
      </section>
    );
  }
  return (
    <>
      {groupSessions(sessions).map((g) => {
        const id = `group-${g.label.replace(/\W+/g, "-").toLowerCase()}`;
        return (
          <section key={g.label} class="session-group" aria-labelledby={id}>
            <h2 id={id} class="group-title">{g.label}</h2>
            <List items={g.items} currentId={currentId} label={g.label} />
          </section>
        );
      })}
    </>
  );
}

export function Sidebar({ open }: { open: boolean }) {
  const route = useStore($route);
  const searching = useStore($searchResults) !== null;
  const text = useStore($searchText);
  const archived = useStore($showArchived);
  const searchBox = useRef<HTMLInputElement>(null);
  const importer = useRef<HTMLInputElement>(null);
  const currentId = route.name === "session" ? route.sessionId : null;
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!(e.ctrlKey || e.metaKey) || e.altKey) return;
      const key = e.key.toLowerCase();
      if (key === "o" && e.shiftKey) {
        e.preventDefault();
        void newChat();
      } else if (key === "k" && !e.shiftKey) {
        e.preventDefault();
        searchBox.current?.focus();
        searchBox.current?.select();
      }
    };
    addEventListener("keydown", onKey);
    return () => removeEventListener("keydown", onKey);
  }, []);
  const onImport = (file: File | undefined) => {
    if (!file) return;
    void act("Importing", async () => {
      const s = await importSession(file);
      announce(`Imported “${s.title || "New chat"}”`);
      navigate(sessionPath(s.id));
    });
  };
  return (
    <nav class={open ? "sidebar open" : "sidebar"} id="sidebar" aria-label="Sessions">
      <button type="button" class="primary new-chat" aria-keyshortcuts={NEW_CHAT_KEYS} onClick={newChat}>
        New chat
      </button>
      <div role="search" class="session-search">
        <input ref={searchBox} type="search" aria-label="Search chats" placeholder="Search chats (Ctrl+K)"
               aria-keyshortcuts={SEARCH_KEYS} value={text} onInput={(e) => setSearch(e.currentTarget.value)}
               onKeyDown={(e) => { if (e.key === "Escape" && text) { e.preventDefault(); setSearch(""); } }} />
      </div>
      {searching ? <Results currentId={currentId} /> : <Groups currentId={currentId} />}
      <div class="sidebar-tools">
        <button type="button" aria-pressed={archived} onClick={() => showArchived(!archived)}>Archived chats</button>
        <button type="button" onClick={() => importer.current?.click()}>Import</button>
        <input ref={importer} type="file" accept="application/json,.json" hidden
               onChange={(e) => { onImport(e.currentTarget.files?.[0]); e.currentTarget.value = ""; }} />
      </div>
      <a class="devices-link" href="/devices" aria-current={route.name === "devices" ? "page" : undefined}
         onClick={(e) => { e.preventDefault(); navigate("/devices"); }}>Devices</a>
    </nav>
  );
}
