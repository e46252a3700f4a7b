// Wire shapes of the chatsync API (docs/api.md, docs/runs.md) as far as the app reads them.

export type SessionStatus = "idle" | "running" | "requires-action" | "error";
export type BusyPolicy = "enqueue" | "reject" | "interrupt" | "steer";

export interface Usage { inputTokens: number; outputTokens: number }

export interface ToolDefinition {
  name: string; description?: string; parameters?: unknown; executor?: "client" | "server";
  requiresApproval?: boolean;
}

export interface Session {
  id: string; title: string; titleSource: string; provider: string; model: string;
  status: SessionStatus; queuePaused: boolean; busyPolicy: BusyPolicy; usage: Usage;
  tools: ToolDefinition[]; createdAt: number; updatedAt: number; queueLength?: number;
}

/** What the sidebar needs of a session: `session.list` items and `session.feed` summaries both fit. */
export type SessionSummary = Pick<Session, "id" | "title" | "status" | "provider" | "model" | "queuePaused" |
  "createdAt" | "updatedAt"> & { queueLength?: number };

export interface ToolCall { id: string; name: string; arguments: string }

export interface Message {
  id: string; sessionId: string; role: "system" | "user" | "assistant" | "tool"; content: string;
  toolCalls?: ToolCall[] | null; toolCallId?: string | null;
  status: "complete" | "streaming" | "interrupted" | "error"; finishReason?: string | null;
  runId?: string | null; createdAt: number; clientRequestId?: string | null;
}

export interface QueuedMessage {
  id: string; content: string; enqueuedAt: number; attachments: unknown[]; clientRequestId?: string | null;
}

export interface PendingToolCall {
  callId: string; name: string; arguments: string; executor: string; requiresApproval: boolean;
  approval?: string | null;
}

export interface RunSnapshot {
  id: string; status: string;
  streaming: null | { messageId: string; offset: number; text: string };
  pendingToolCalls: PendingToolCall[];
}

export interface Snapshot {
  session: Session; messages: Message[]; queue: QueuedMessage[]; run: RunSnapshot | null; lastEventId: string;
}

export interface Device { id: string; name: string; createdAt: number; lastUsedAt: number | null; current: boolean }

/** A session event as `session.events` delivers it (`{id, data}`, tracked). */
export interface SessionEvent { type: string; sessionId: string; [field: string]: any }
