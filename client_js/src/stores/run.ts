/**
 * The run in progress of an open session (status, pending tool calls and approvals, who decided) and the
 * actions that answer or stop it.
 */
import { computed, type ReadableAtom } from "nanostores";
import type { Requests, WriteInput } from "../requests.js";
import type { Procedures } from "../router.gen.js";
import type { RunView } from "../reducers/run.js";
import { noteOwnDecision } from "../reducers/session.js";
import type { SessionFollower } from "./follow.js";

type Out<P extends keyof Procedures> = Procedures[P]["output"];

export function runStore(follower: SessionFollower): ReadableAtom<RunView | null> {
  return computed(follower.state, (s) => s?.run ?? null);
}

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
