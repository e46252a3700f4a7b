import { useStore } from "@nanostores/preact";
import { useEffect, useState } from "preact/hooks";
import { $session, $toolCalls, type ToolCallState } from "../stores/conversation";
import { $toolProgress, mcpToolOf } from "../stores/mcp";
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

/** An image a tool returned, from a blob: URL made from its bytes (revoked when the card goes). */
function ToolImage({ image, alt }: { image: ToolCallState["images"][number]; alt: string }) {
  const [src, setSrc] = useState<string | null>(null);
  useEffect(() => {
    const bytes = Uint8Array.from(atob(image.data), (ch) => ch.charCodeAt(0));
    const url = URL.createObjectURL(new Blob([bytes], { type: image.mediaType }));
    setSrc(url);
    return () => URL.revokeObjectURL(url);
  }, [image.data, image.mediaType]);
  return src ? <img class="tool-image" src={src} alt={alt} /> : null;
}

/** A tool call: its arguments (streaming in), status, approval and result — a group named "Tool call: NAME"
 * whose status says how it ended. Any device may approve. */
export function ToolCard({ callId }: { callId: string }) {
  const c = useStore($toolCalls).get(callId);
  const session = useStore($session);
  const progress = useStore($toolProgress)[callId];
  const [sending, setSending] = useState(false);
  if (!c) return null;
  const mcp = mcpToolOf(c.name, session?.mcpServers ?? []);
  const decide = (approved: boolean) => {
    setSending(true);
    void act(approved ? "Approving" : "Denying", () => approve(callId, approved)).finally(() => setSending(false));
  };
  const headingId = `tool-${callId}`;
  return (
    <div class="tool" role="group" aria-labelledby={headingId} data-call-id={callId}
         data-outcome={c.result?.outcome ?? "open"}>
      <h2 id={headingId} class="tool-name">Tool call: {mcp ? mcp.tool : c.name}</h2>
      {mcp && <p class="tool-server">MCP server: {mcp.server}</p>}
      <pre class="tool-args">{prettyArguments(c.arguments)}</pre>
      <p class="tool-status"><span class="tool-mark" aria-hidden="true" />{statusText(c)}</p>
      {progress && !c.result && (
        <p class="tool-progress">
          <progress max={progress.total ?? undefined} value={progress.progress}
                    aria-label={`Progress of ${mcp ? mcp.tool : c.name}`} />
          {progress.message ? ` ${progress.message}` : ""}
        </p>
      )}
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
      {c.images.map((image, i) => (
        <ToolImage key={i} image={image} alt={`${image.name} returned by ${mcp ? mcp.tool : c.name}`} />
      ))}
    </div>
  );
}
