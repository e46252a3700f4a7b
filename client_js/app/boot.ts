// Imported first by main.tsx, so the socket opens (and session.get is on its way) while the rest of the
// bundle — the components, marked, DOMPurify — is still being evaluated.
import { resume } from "./stores/auth";
import { $route } from "./stores/route";

if ($route.get().name !== "link") resume();
