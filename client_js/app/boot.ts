// Imported first by main.tsx, so the socket opens (and session.get is on its way) while the rest of the
// bundle — the components, marked, DOMPurify — is still being evaluated.
import { resume } from "./stores/auth";
import { openLink } from "./stores/link";
import { $route, navigate } from "./stores/route";

const route = $route.get();
if (route.name === "link") navigate("/", true); // the code leaves the address bar (and history) before anything
resume(); // whoever is signed in here stays signed in until they choose otherwise, link or not
if (route.name === "link") void openLink(route.code);
