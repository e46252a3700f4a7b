import { useStore } from "@nanostores/preact";
import { $announcement } from "../stores/announcer";

/** The conversation's one live region: a run started, finished, failed or stopped; an action failed. */
export function RunStatus() {
  const text = useStore($announcement);
  return <div class="run-status" role="status" aria-label="Answer status">{text}</div>;
}
