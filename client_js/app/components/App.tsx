import { useStore } from "@nanostores/preact";
import { useEffect, useState } from "preact/hooks";
import { $client, $token, signOutHere } from "../stores/auth";
import { $linkPrompt } from "../stores/link";
import { forgetOtherChats } from "../stores/announcer";
import { $route, navigate, sessionPath } from "../stores/route";
import { $chatBeingMade, $sessionList, $sessionsLoaded, startSessions, stopSessions } from "../stores/sessions";
import { close as closeConversation } from "../stores/conversation";
import { SignIn } from "./SignIn";
import { LinkPrompt } from "./LinkPrompt";
import { newChat, Sidebar } from "./Sidebar";
import { Conversation } from "./Conversation";
import { Devices } from "./Devices";
import { startOutbox } from "../stores/outbox";
import { ConnectionStatus } from "./ConnectionStatus";
import { OfflineBanner } from "./OfflineBanner";
import { RunStatus } from "./RunStatus";

/** `/` opens the newest chat; with none yet, it offers to start one. */
function Home() {
  const loaded = useStore($sessionsLoaded);
  const list = useStore($sessionList);
  const creating = useStore($chatBeingMade) !== null;
  useEffect(() => {
    // Not while "New chat" makes one: that chat opens when it exists (opening this one first raced with it).
    if (loaded && list.length > 0 && !creating) navigate(sessionPath(list[0].id), true);
  }, [loaded, list.length > 0, creating]);
  // The sidebar's "New chat" is hidden behind "Chats" on a phone: the empty state has its own. With chats in the
  // list, "No chats yet." is never shown, not even for the frame before the effect above opens the newest one.
  return (
    <section class="chat">
      {loaded && list.length === 0 ? (
        <div class="empty">
          <p>No chats yet.</p>
          <button type="button" class="primary" onClick={() => void newChat()}>New chat</button>
        </div>
      ) : <p class="empty">Loading…</p>}
      <RunStatus />
    </section>
  );
}

function Shell() {
  const route = useStore($route);
  const client = useStore($client);
  const [menu, setMenu] = useState(false);
  useEffect(() => {
    if (!client) return;
    startSessions();
    const stopOutbox = startOutbox();
    return () => { stopSessions(); closeConversation(); stopOutbox(); };
  }, [client]);
  useEffect(() => {
    setMenu(false);
    forgetOtherChats(route.name === "session" ? route.sessionId : null); // "Answer finished" was about another chat
  }, [route]);
  return (
    <div class="shell">
      <header class="topbar">
        <button type="button" class="menu-toggle" aria-expanded={menu} aria-controls="sidebar"
                onClick={() => setMenu(!menu)}>Chats</button>
        <span class="brand">chatsync</span>
        <ConnectionStatus />
        <button type="button" class="sign-out" onClick={() => void signOutHere()}>Sign out</button>
      </header>
      <Sidebar open={menu} />
      <main class="main">
        <OfflineBanner />
        {route.name === "session" ? <Conversation sessionId={route.sessionId} />
          : route.name === "devices" ? <Devices /> : <Home />}
      </main>
    </div>
  );
}

export function App() {
  const token = useStore($token);
  const linkPrompt = useStore($linkPrompt);
  if (linkPrompt) return <LinkPrompt prompt={linkPrompt} />;
  if (!token) return <SignIn />;
  return <Shell />;
}
