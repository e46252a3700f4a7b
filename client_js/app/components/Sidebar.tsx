import { useStore } from "@nanostores/preact";
import { $sessionList } from "../stores/sessions";
import { createSession } from "../stores/sessions";
import { $route, navigate, sessionPath } from "../stores/route";
import { act } from "../stores/call";
import { SessionItem } from "./SessionItem";

export function Sidebar({ open }: { open: boolean }) {
  const sessions = useStore($sessionList);
  const route = useStore($route);
  const currentId = route.name === "session" ? route.sessionId : null;
  return (
    <nav class={open ? "sidebar open" : "sidebar"} id="sidebar" aria-label="Sessions">
      <button type="button" class="primary new-chat" onClick={() => act("Creating a chat", async () => {
        const s = await createSession();
        navigate(sessionPath(s.id));
        document.getElementById("message")?.focus();
      })}>New chat</button>
      <ul class="session-list">
        {sessions.map((s) => <SessionItem key={s.id} s={s} current={s.id === currentId} />)}
      </ul>
      <a class="devices-link" href="/devices" aria-current={route.name === "devices" ? "page" : undefined}
         onClick={(e) => { e.preventDefault(); navigate("/devices"); }}>Devices</a>
    </nav>
  );
}
