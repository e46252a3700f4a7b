// The browser tab names what is open: the chat's title (as renamed on any device), or the page.
import { $token } from "./auth";
import { $session } from "./conversation";
import { $route } from "./route";
import { $sessionList } from "./sessions";

const APP = "chatsync";

export function documentTitle(): string {
  const route = $route.get();
  if (!$token.get()) return APP;
  if (route.name === "devices") return `Devices – ${APP}`;
  if (route.name !== "session") return APP;
  const open = $session.get();
  const title = open?.id === route.sessionId ? open.title : $sessionList.get().find((s) => s.id === route.sessionId)?.title;
  return `${title || "New chat"} – ${APP}`;
}

const update = () => {
  const next = documentTitle();
  if (document.title !== next) document.title = next;
};
for (const store of [$token, $route, $session, $sessionList]) store.listen(update);
update();
