/**
 * The session's queue of messages waiting to be sent, in server order, plus this client's optimistic items.
 *
 * The server owns the queue: `queue-message-added/removed/updated/reordered/cleared` are the only way server
 * items change. An item this client is enqueueing shows at once as `pending`; it gives way to the server's
 * item when `queue-message-added` carries its `clientRequestId` (or, failing that, the id the call returned),
 * so it is never shown twice nor lost while the call is retried.
 */
import type { QueuedMessage, DurableEvent } from "../router.gen.js";

/** A queued message as a UI shows it; `pending` items are this client's, not yet confirmed by the server. */
export type QueueItem = QueuedMessage & { pending?: true };

export interface OptimisticItem {
  clientRequestId: string;
  content: string;
  attachments: QueuedMessage["attachments"];
  enqueuedAt: number;
  /** The server's id, once the call answered. */
  serverId: string | null;
}

export interface QueueState {
  /** Server order. */
  items: QueuedMessage[];
  optimistic: OptimisticItem[];
}

export const emptyQueue: QueueState = Object.freeze({ items: [], optimistic: [] }) as QueueState;

function crid(m: QueuedMessage): string | null | undefined {
  return (m as { clientRequestId?: string | null }).clientRequestId;
}

/** After `session.get`: the server's queue; optimistic items the server answered are covered by it. */
export function queueFromSnapshot(queue: QueuedMessage[], previous: QueueState = emptyQueue): QueueState {
  const known = new Set(queue.map((q) => crid(q)).filter(Boolean));
  const optimistic = previous.optimistic.filter((o) => o.serverId === null && !known.has(o.clientRequestId));
  return { items: queue, optimistic };
}

function withoutMatches(optimistic: OptimisticItem[], m: { id: string; crid?: string | null | undefined }) {
  const next = optimistic.filter((o) => o.serverId !== m.id && (!m.crid || o.clientRequestId !== m.crid));
  return next.length === optimistic.length ? optimistic : next;
}

/** Apply a queue event; other events return the state unchanged. */
export function applyQueueEvent(state: QueueState, e: DurableEvent): QueueState {
  switch (e.type) {
    case "queue-message-added": {
      const items = [...state.items.filter((q) => q.id !== e.message.id), e.message];
      return { items, optimistic: withoutMatches(state.optimistic, { id: e.message.id, crid: crid(e.message) }) };
    }
    case "queue-message-removed":
      return {
        items: state.items.filter((q) => q.id !== e.messageId),
        optimistic: withoutMatches(state.optimistic, { id: e.messageId }),
      };
    case "queue-cleared":
      return { items: [], optimistic: state.optimistic.filter((o) => o.serverId === null) };
    case "queue-message-updated":
      return { ...state, items: state.items.map((q) => (q.id === e.message.id ? e.message : q)) };
    case "queue-reordered": {
      const byId = new Map(state.items.map((q) => [q.id, q] as const));
      const items = e.order.flatMap((id) => {
        const q = byId.get(id);
        return q ? [q] : [];
      });
      return { ...state, items };
    }
    default:
      return state;
  }
}

/** Show an item this client is enqueueing, before the server answers. */
export function addOptimistic(state: QueueState, item: Omit<OptimisticItem, "serverId">): QueueState {
  return { ...state, optimistic: [...state.optimistic, { ...item, serverId: null }] };
}

/** The enqueue call answered with the server's item. */
export function ackOptimistic(state: QueueState, clientRequestId: string, serverId: string): QueueState {
  const i = state.optimistic.findIndex((o) => o.clientRequestId === clientRequestId);
  if (i < 0) return state;
  if (state.items.some((q) => q.id === serverId)) {
    return { ...state, optimistic: state.optimistic.filter((_, j) => j !== i) };
  }
  const optimistic = state.optimistic.slice();
  optimistic[i] = { ...optimistic[i]!, serverId };
  return { ...state, optimistic };
}

/** The enqueue call failed for good: take the item away. */
export function dropOptimistic(state: QueueState, clientRequestId: string): QueueState {
  const optimistic = state.optimistic.filter((o) => o.clientRequestId !== clientRequestId);
  return optimistic.length === state.optimistic.length ? state : { ...state, optimistic };
}

/** What a UI shows: the server's items in order, then this client's pending ones. */
export function queueItems(state: QueueState): QueueItem[] {
  if (!state.optimistic.length) return state.items;
  return [
    ...state.items,
    ...state.optimistic.map((o): QueueItem => ({
      id: `pending:${o.clientRequestId}`,
      content: o.content,
      attachments: o.attachments,
      enqueuedAt: o.enqueuedAt,
      clientRequestId: o.clientRequestId,
      pending: true,
    } as QueueItem)),
  ];
}
