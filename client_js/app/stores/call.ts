// Calls that write: each gets a clientRequestId, so a call retried after a dropped socket is applied once.
import { $rpc } from "./auth";
import { errorCode, errorMessage } from "../lib/rpc";
import { requestId } from "../lib/ids";
import { announce } from "./announcer";

// A server from before clientRequestId rejects the unknown field; after the first such answer we stop sending it.
let requestIdsAccepted = true;

export async function mutateOnce<T>(path: string, input: Record<string, unknown>): Promise<T> {
  const rpc = $rpc.get();
  if (!rpc) throw new Error("Not signed in");
  if (requestIdsAccepted) {
    try {
      return await rpc.mutate<T>(path, { ...input, clientRequestId: requestId() });
    } catch (err) {
      if (!(errorCode(err) === "BAD_REQUEST" && /clientRequestId/.test(errorMessage(err)))) throw err;
      requestIdsAccepted = false;
    }
  }
  return rpc.mutate<T>(path, input);
}

export async function mutate<T>(path: string, input: Record<string, unknown>): Promise<T> {
  const rpc = $rpc.get();
  if (!rpc) throw new Error("Not signed in");
  return rpc.mutate<T>(path, input);
}

/** Runs an action from a button; a failure is announced in the status region rather than thrown away. */
export function act(what: string, action: () => Promise<unknown>): Promise<void> {
  return action().then(() => undefined, (err) => announce(`${what} failed: ${errorMessage(err)}`));
}
