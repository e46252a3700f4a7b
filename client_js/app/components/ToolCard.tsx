import { useStore } from "@nanostores/preact";
import { useState } from "preact/hooks";
import { $toolCalls, type ToolCallState } from "../stores/conversation";
import type { ToolOutcome } from "../lib/chatsync";
import { approve } from "../stores/actions";
import { act } from "../stores/call";

/** How a finished call ended, in words: each outcome its own, so a failure never reads as done. */
export const OUTCOMES: Record<ToolOutcome, string> = {
  ok: "Done", error: "Failed", denied: "Denied", "unknown-tool": "Unknown tool", cancelled: "Cancelled",
};

function statusText(c: ToolCallState): string {
  if (c.phase === "streaming") return "Preparing arguments…";
  if (c.approval === "pending") return "Waiting for approval";
  if (c.result) return OUTCOMES[c.result.outcome] ?? "Failed";
  if (c.approval === "denied") return "Denied";
  if (c.executor === "client") return "Waiting for a client to run it";
  return "Running…";
}

function prettyArguments(args: string): string {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args; // still streaming, or not JSON: shown as it is
  }
}

/** A tool call: its arguments (streaming in), status, approval and result — a group named "Tool call: NAME"
 * whose status says how it ended. Any device may approve. */
export function ToolCard({ callId }: { callId: string }) {
  const c = useStore($toolCalls).get(callId);
  const [sending, setSending] = useState(false);
  if (!c) return null;
  const decide = (approved: boolean) => {
    setSending(true);
    void act(approved ? "Approving" : "Denying", () => approve(callId, approved)).finally(() => setSending(false));
  };
  const headingId = `tool-${callId}`;
  return (
    <div class="tool" role="group" aria-labelledby={headingId} data-call-id={callId}
         data-outcome={c.result?.outcome ?? "open"}>
      <h2 id={headingId} class="tool-name">Tool call: {c.name}</h2>
      <pre class="tool-args">{prettyArguments(c.arguments)}</pre>
      <p class="tool-status"><span class="tool-mark" aria-hidden="true" />{statusText(c)}</p>
      {c.approval === "pending" && (
        <div class="tool-actions">
          <button type="button" class="primary" disabled={sending} onClick={() => decide(true)}>Approve</button>
          <button type="button" disabled={sending} onClick={() => decide(false)}>Deny</button>
        </div>
      )}
      {(c.approval === "approved" || c.approval === "denied") && (
        <p class="tool-decision">
          {c.approval === "approved" ? "Approved" : "Denied"}{c.decidedBy ? ` on ${c.decidedBy}` : ""}
        </p>
      )}
      {c.result && (
        <pre class={c.result.outcome === "ok" ? "tool-result" : "tool-result error"}>{c.result.output}</pre>
      )}
    </div>
  );
}
