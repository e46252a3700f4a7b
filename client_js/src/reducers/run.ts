/**
 * The run in progress: its status, the tool calls it waits on, pending approvals and who answered them.
 * Mirrors `session.get`'s `run` (docs/runs.md); the streaming text itself lives with the messages.
 */
import type { DecidedBy, DurableEvent, PendingApproval, PendingToolCall, RunState } from "../router.gen.js";

export interface Decision {
  approved: boolean;
  /** `self`: answered by this client; `other`: by another client (another tab, device or the terminal). */
  by: "self" | "other";
  /** Who answered, as the server tells (user and device name); `null` when it did not say. */
  decidedBy: DecidedBy | null;
}

export interface RunView {
  id: string;
  /** `running`, or `requires-action` while it waits for tool outputs or approvals. */
  status: string;
  /** The assistant message being streamed, if any. */
  streamingMessageId: string | null;
  pendingToolCalls: PendingToolCall[];
  pendingApprovals: PendingApproval[];
  /** Approvals answered during this run, by call id. */
  decisions: Record<string, Decision>;
}

/** `ownDecisions`: call ids this client answered, so decisions already taken show who took them. */
export function runFromSnapshot(run: RunState | null, ownDecisions: readonly string[] = []): RunView | null {
  if (!run) return null;
  const decisions: Record<string, Decision> = {};
  for (const c of run.pendingToolCalls) {
    if (c.approval === "approved" || c.approval === "denied") {
      decisions[c.callId] = {
        approved: c.approval === "approved",
        by: ownDecisions.includes(c.callId) ? "self" : "other",
        decidedBy: null,
      };
    }
  }
  return {
    id: run.id,
    status: run.status,
    streamingMessageId: run.streaming?.messageId ?? null,
    pendingToolCalls: run.pendingToolCalls,
    pendingApprovals: run.pendingApprovals,
    decisions,
  };
}

/** Apply a durable event. `ownDecisions` are call ids this client answered (for `Decision.by`). */
export function applyRunEvent(run: RunView | null, e: DurableEvent, ownDecisions: readonly string[] = []): RunView | null {
  switch (e.type) {
    case "run-started":
      return { id: e.runId, status: "running", streamingMessageId: null, pendingToolCalls: [], pendingApprovals: [], decisions: {} };
    case "run-finished":
    case "run-failed":
    case "run-aborted":
      return null;
    default:
      break;
  }
  if (!run) return run;
  switch (e.type) {
    case "session-updated": {
      const status = e.session.status;
      return (status === "running" || status === "requires-action") && status !== run.status ? { ...run, status } : run;
    }
    case "message-created":
      return e.message.status === "streaming" && e.message.role === "assistant"
        ? { ...run, streamingMessageId: e.message.id }
        : run;
    case "message-completed":
      return run.streamingMessageId === e.message.id ? { ...run, streamingMessageId: null } : run;
    case "tool-call-ready":
      return {
        ...run,
        pendingToolCalls: [
          ...run.pendingToolCalls.filter((c) => c.callId !== e.callId),
          {
            callId: e.callId,
            name: e.name,
            arguments: e.arguments,
            executor: e.executor,
            requiresApproval: e.requiresApproval,
            approval: e.requiresApproval ? "pending" : "none",
          },
        ],
      };
    case "tool-approval-requested": {
      const call = run.pendingToolCalls.find((c) => c.callId === e.callId);
      if (run.pendingApprovals.some((a) => a.callId === e.callId)) return run;
      const entry = { callId: e.callId, name: call?.name ?? "", arguments: call?.arguments ?? "" };
      return { ...run, pendingApprovals: [...run.pendingApprovals, entry] };
    }
    case "tool-approval-resolved":
      return {
        ...run,
        pendingToolCalls: run.pendingToolCalls.map((c) =>
          c.callId === e.callId ? { ...c, approval: e.approved ? "approved" : "denied" } : c,
        ),
        pendingApprovals: run.pendingApprovals.filter((a) => a.callId !== e.callId),
        decisions: { ...run.decisions, [e.callId]: decisionOf(e, ownDecisions) },
      };
    case "tool-call-result":
      return { ...run, pendingToolCalls: run.pendingToolCalls.filter((c) => c.callId !== e.callId) };
    default:
      return run;
  }
}

/** The decision a `tool-approval-resolved` records. */
export function decisionOf(
  e: Extract<DurableEvent, { type: "tool-approval-resolved" }>,
  ownDecisions: readonly string[],
): Decision {
  return { approved: e.approved, by: ownDecisions.includes(e.callId) ? "self" : "other", decidedBy: e.decidedBy ?? null };
}
