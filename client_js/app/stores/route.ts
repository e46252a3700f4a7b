// The address bar as state: `/` (newest chat), `/s/<id>` (a chat), `/devices`, `/link#<code>` (device sign-in).
import { atom } from "nanostores";

export type Route =
  | { name: "home" }
  | { name: "session"; sessionId: string }
  | { name: "devices" }
  | { name: "link"; code: string };

export function parseRoute(loc: { pathname: string; hash: string }): Route {
  const m = /^\/s\/([^/]+)$/.exec(loc.pathname);
  if (m) return { name: "session", sessionId: decodeURIComponent(m[1]) };
  if (loc.pathname === "/devices") return { name: "devices" };
  if (loc.pathname === "/link") return { name: "link", code: loc.hash.replace(/^#/, "") };
  return { name: "home" };
}

export const $route = atom<Route>(parseRoute(location));

export function navigate(path: string, replace = false): void {
  if (path !== location.pathname + location.hash) {
    if (replace) history.replaceState(null, "", path);
    else history.pushState(null, "", path);
  }
  $route.set(parseRoute(location));
}

export const sessionPath = (id: string) => `/s/${encodeURIComponent(id)}`;

addEventListener("popstate", () => $route.set(parseRoute(location)));
