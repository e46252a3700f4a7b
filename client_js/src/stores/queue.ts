/**
 * The queue of an open session (server order, then this client's pending items) and its actions.
 * `enqueue` shows the item at once; the server's `queue-message-added` with the same `clientRequestId`
 * replaces it, and a call that fails for good takes it away again.
 */
import { computed, type ReadableAtom } from "nanostores";
import { shownAttachments, wireAttachments, type AttachmentInput } from "../files.js";
import { newClientRequestId, type Requests } from "../requests.js";
import type { Procedures } from "../router.gen.js";
import { ackOptimistic, addOptimistic, dropOptimistic, queueItems, type QueueItem } from "../reducers/queue.js";
import type { SessionFollower } from "./follow.js";

type Out<P extends keyof Procedures> = Procedures[P]["output"];
type Attachments = readonly AttachmentInput[];

/** How `sendQueuedNow` delivers a queued message while a run is in progress. */
export type SendNowMode = "interrupt" | "steer" | "next";

export function queueStore(follower: SessionFollower): ReadableAtom<QueueItem[]> {
  const $queueState = computed(follower.state, (s) => s?.queue ?? null);
  return computed($queueState, (q) => (q ? queueItems(q) : NO_ITEMS));
}
const NO_ITEMS: QueueItem[] = [];

export interface QueueActions {
  /** Put a message at the end of the queue; it shows at once as a `pending` item (with its attachments). */
  enqueue(content: string, attachments?: Attachments): Promise<Out<"message.enqueueMessage">>;
  updateQueued(messageId: string, change: { content?: string; attachments?: Attachments }): Promise<Out<"message.updateQueuedMessage">>;
  removeQueued(messageId: string): Promise<null>;
  moveQueued(messageId: string, toIndex: number): Promise<Out<"message.moveQueuedMessage">>;
  /** Send a queued message now: `interrupt` the run (default), `steer` it into the run, or make it `next`. */
  sendQueuedNow(messageId: string, mode?: SendNowMode): Promise<Out<"message.sendQueuedNow"> | null>;
  clearQueue(): Promise<null>;
  pauseQueue(): Promise<null>;
  resumeQueue(): Promise<Out<"message.resumeQueue">>;
}

export function queueActions(requests: Requests, follower: SessionFollower): QueueActions {
  const ref = { sessionId: follower.sessionId };
  return {
    async enqueue(content, attachments = []) {
      const clientRequestId = newClientRequestId();
      follower.update((s) => ({
        ...s,
        queue: addOptimistic(s.queue, {
          clientRequestId, content, attachments: shownAttachments(attachments), enqueuedAt: Date.now(),
        }),
      }));
      try {
        const item = await requests.write(
          "message.enqueueMessage", { ...ref, content, attachments: wireAttachments(attachments) }, clientRequestId);
        follower.update((s) => ({ ...s, queue: ackOptimistic(s.queue, clientRequestId, item.id) }));
        return item;
      } catch (err) {
        follower.update((s) => ({ ...s, queue: dropOptimistic(s.queue, clientRequestId) }));
        throw err;
      }
    },
    updateQueued: (messageId, { attachments, ...change }) =>
      requests.mutate("message.updateQueuedMessage", {
        ...ref, messageId, ...change, ...(attachments ? { attachments: wireAttachments(attachments) } : {}),
      }),
    removeQueued: (messageId) => requests.mutate("message.removeQueuedMessage", { ...ref, messageId }),
    moveQueued: (messageId, toIndex) => requests.mutate("message.moveQueuedMessage", { ...ref, messageId, toIndex }),
    sendQueuedNow: (messageId, mode = "interrupt") => requests.mutate("message.sendQueuedNow", { ...ref, messageId, mode }),
    clearQueue: () => requests.mutate("message.clearQueue", ref),
    pauseQueue: () => requests.mutate("message.pauseQueue", ref),
    resumeQueue: () => requests.mutate("message.resumeQueue", ref),
  };
}
