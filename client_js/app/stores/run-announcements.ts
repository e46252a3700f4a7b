// What the status region says about the open session's runs: start, end, failure, stop, an approval
// waiting — once per event, never per token.
import { announce as say } from "./announcer";
import type { SessionEvent } from "../lib/chatsync";

export function announceRuns(e: SessionEvent): void {
  const announce = (text: string) => say(text, e.sessionId);
  switch (e.type) {
    case "run-started":
      announce("Answering…");
      break;
    case "run-finished":
      announce(e.finishReason === "length" ? "Answer finished (length limit)" : "Answer finished");
      break;
    case "run-failed":
      announce(`Answer failed: ${e.error?.message ?? "error"}`);
      break;
    case "run-aborted":
      announce("Answer stopped");
      break;
    case "tool-approval-requested":
      announce("A tool call is waiting for your approval");
      break;
    case "session-deleted":
      announce("This chat was deleted");
      break;
  }
}
