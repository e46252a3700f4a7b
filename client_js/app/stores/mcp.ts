// MCP servers (docs/tools.md): the servers this user may enable on a chat (mcp.servers), the open chat's choice
// of them (its mcpServers / mcpTools), and the progress MCP tools report while they run (tool-call-progress).
import { atom } from "nanostores";
import type { McpPolicy, McpServerInfo, SessionEvent } from "../../src/router.gen";
import { $client } from "./auth";

export type { McpPolicy, McpServerInfo };

/** The servers the user may enable, with their tools; null until read. */
export const $mcpServers = atom<McpServerInfo[] | null>(null);
/** The latest progress of each running MCP call of the open chat, by call id. */
export const $toolProgress = atom<Record<string, { progress: number; total?: number; message?: string }>>({});

$client.listen(() => $mcpServers.set(null));

export async function loadMcpServers(): Promise<void> {
  const c = $client.get();
  if (!c) throw new Error("Not signed in");
  $mcpServers.set((await c.requests.query("mcp.servers", undefined)).servers);
}

/** A session event of the open chat: keeps the progress of its MCP calls. */
export function trackProgress(e: SessionEvent): void {
  if (e.type === "tool-call-progress") {
    const { callId, progress, total, message } = e;
    $toolProgress.set({ ...$toolProgress.get(), [callId]: { progress, total, message } });
  } else if (e.type === "tool-call-result" && e.callId in $toolProgress.get()) {
    const { [e.callId]: _done, ...rest } = $toolProgress.get();
    $toolProgress.set(rest);
  }
}

/** `<server>__<tool>` of a server the chat enabled: which server and which of its tools (else null). */
export function mcpToolOf(name: string, enabled: readonly string[]): { server: string; tool: string } | null {
  const cut = name.indexOf("__");
  if (cut <= 0) return null;
  const server = name.slice(0, cut);
  return enabled.includes(server) ? { server, tool: name.slice(cut + 2) } : null;
}

/** Image types a tool result may show (never anything a browser could run). */
export const SHOWN_IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
