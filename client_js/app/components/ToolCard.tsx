import { useStore } from "@nanostores/preact";
import { useState } from "preact/hooks";
import { $toolCalls, type ToolCallState } from "../stores/conversation";
import { approve } from "../stores/actions";
import { act } from "../stores/call";

function statusText(c: ToolCallState): string {
  if (c.phase === "streaming") return "Preparing arguments…";
  if (c.approval === "pending") return "Waiting for approval";
  if (c.result) return c.result.isError ? "Failed" : "Done";
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

/** A tool call: its arguments (streaming in), status, approval and result. Any device may approve. */
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
    <section class="tool" aria-labelledby={headingId} data-call-id={callId}>
      <h2 id={headingId} class="tool-name">Tool call: {c.name}</h2>
      <pre class="tool-args">{prettyArguments(c.arguments)}</pre>
      <p class="tool-status">{statusText(c)}</p>
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
        <pre class={c.result.isError ? "tool-result error" : "tool-result"}>{c.result.output}</pre>
      )}
    </section>
  );
}
