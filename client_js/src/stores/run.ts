/**
 * The run in progress of an open session (status, pending tool calls and approvals, who decided) and the
 * actions that answer or stop it.
 */
import { computed, type ReadableAtom } from "nanostores";
import type { Requests, WriteInput } from "../requests.js";
import type { Procedures } from "../router.gen.js";
import type { Decision, RunView } from "../reducers/run.js";
import { previewsOf, type ToolCallPreview } from "../reducers/previews.js";
import { noteOwnDecision } from "../reducers/session.js";
import type { SessionFollower } from "./follow.js";

type Out<P extends keyof Procedures> = Procedures[P]["output"];

export function runStore(follower: SessionFollower): ReadableAtom<RunView | null> {
  return computed(follower.state, (s) => s?.run ?? null);
}

/** Approvals answered in this session (kept after the run ends), by call id, with who answered. */
export function decisionsStore(follower: SessionFollower): ReadableAtom<Record<string, Decision>> {
  return computed(follower.state, (s) => s?.decisions ?? NO_DECISIONS);
}
const NO_DECISIONS: Record<string, Decision> = {};

/** Tool-call arguments as they stream, by call id (previews; the final arguments come with the message). */
export function previewsStore(follower: SessionFollower): ReadableAtom<Record<string, ToolCallPreview>> {
  const $raw = computed(follower.state, (s) => s?.previews ?? null);
  return computed($raw, (p) => (p ? previewsOf(p) : NO_PREVIEWS));
}
const NO_PREVIEWS: Record<string, ToolCallPreview> = {};

export interface RunActions {
  abort(): Promise<Out<"run.abort">>;
  /** Answer an approval; the decision shows as this client's (`by: "self"`). */
  approve(callId: string, approved: boolean, reason?: string): Promise<Out<"tool.approve">>;
  submitOutputs(outputs: WriteInput<"tool.submitOutputs">["toolOutputs"]): Promise<Out<"tool.submitOutputs">>;
}

export function runActions(requests: Requests, follower: SessionFollower): RunActions {
  const ref = { sessionId: follower.sessionId };
  return {
    abort: () => requests.mutate("run.abort", ref),
    approve(callId, approved, reason) {
      follower.update((s) => noteOwnDecision(s, callId));
      return requests.write("tool.approve", { ...ref, callId, approved, ...(reason !== undefined ? { reason } : {}) });
    },
    submitOutputs: (toolOutputs) => requests.write("tool.submitOutputs", { ...ref, toolOutputs }),
  };
}
