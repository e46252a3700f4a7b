/**
 * One session's whole local state and the pure function that applies a tracked item of `session.events`.
 *
 * Durable events carry their position in the session's log (`id = String(seq)`, 1, 2, 3, ... without gaps).
 * One at or below the last applied seq is a repeat (a second socket during a reconnect, a replay) and is
 * ignored; one past the next seq means the copy missed something and must be refetched. Stream events carry
 * the id of the last durable event and are placed by their offsets instead (see `messages.ts`).
 */
import {
  DURABLE_EVENT_TYPES,
  type DurableEvent,
  type Session,
  type SessionEvent,
  type SessionState,
  type StreamEvent,
} from "../router.gen.js";
import {
  applyStreamEvent, changeBranch, messagesFromSnapshot, putDecision, putMessage, type MessagesState,
} from "./messages.js";
import { applyQueueEvent, queueFromSnapshot, type QueueState } from "./queue.js";
import { applyPreviewDurable, applyPreviewStream, emptyPreviews, type PreviewsState } from "./previews.js";
import { applyRunEvent, decisionOf, runFromSnapshot, type Decision, type RunView } from "./run.js";

export interface SessionSyncState {
  sessionId: string;
  /** The seq of the last durable event applied (`session.get`'s `lastEventId` to begin with). */
  lastSeq: number;
  session: Session;
  messages: MessagesState;
  queue: QueueState;
  run: RunView | null;
  /** Approvals answered while this client followed the session (and those `session.get` showed), by call
   * id; unlike `run.decisions` they stay after the run ends. */
  decisions: Record<string, Decision>;
  /** Tool-call arguments as they stream. */
  previews: PreviewsState;
  /** `session-deleted` was applied. */
  deleted: boolean;
  /** Call ids this client answered with `tool.approve`. */
  ownDecisions: readonly string[];
}

export type ApplyOutcome = "applied" | "duplicate" | "resync";

const DURABLE = new Set<string>(DURABLE_EVENT_TYPES);

export function isDurable(e: SessionEvent): e is DurableEvent {
  return DURABLE.has(e.type);
}

/** The state `session.get` describes. `previous` keeps this client's optimistic queue items and decisions. */
export function fromSnapshot(snap: SessionState, previous?: SessionSyncState): SessionSyncState {
  const run = runFromSnapshot(snap.run, previous?.ownDecisions);
  return {
    sessionId: snap.session.id,
    lastSeq: Number(snap.lastEventId),
    session: snap.session,
    messages: messagesFromSnapshot(snap.messages, snap.run, snap.messagesBefore, previous?.messages),
    queue: queueFromSnapshot(snap.queue, previous?.queue),
    run,
    // What this client saw answered stays; `session.get` adds answers given while it was away.
    decisions: { ...run?.decisions, ...previous?.decisions },
    previews: emptyPreviews,
    deleted: false,
    ownDecisions: previous?.ownDecisions ?? [],
  };
}

function applySession(session: Session, e: DurableEvent): Session {
  switch (e.type) {
    case "session-updated":
      // the large fields (tools, system prompt, defaults, metadata) are there only when they changed
      return { ...session, ...e.session };
    case "title-changed":
      return { ...session, title: e.title, titleSource: e.source };
    case "queue-paused":
      return session.queuePaused ? session : { ...session, queuePaused: true };
    case "queue-resumed":
      return session.queuePaused ? { ...session, queuePaused: false } : session;
    default:
      return session;
  }
}

function applyDurable(state: SessionSyncState, e: DurableEvent): SessionSyncState | null {
  let messages: MessagesState | null = state.messages;
  if (e.type === "message-created" || e.type === "message-completed" || e.type === "message-continued") {
    messages = putMessage(messages, e.message);
  } else if (e.type === "branch-changed") {
    messages = changeBranch(messages, e.parentId, e.path);
    if (messages === null) return null;
  } else if (e.type === "tool-approval-resolved") {
    messages = putDecision(messages, e);
  }
  return {
    ...state,
    session: applySession(state.session, e),
    messages,
    queue: applyQueueEvent(state.queue, e),
    run: applyRunEvent(state.run, e, state.ownDecisions),
    decisions: e.type === "tool-approval-resolved"
      ? { ...state.decisions, [e.callId]: decisionOf(e, state.ownDecisions) }
      : state.decisions,
    previews: applyPreviewDurable(state.previews, e),
    deleted: state.deleted || e.type === "session-deleted",
  };
}

/** Apply one tracked item `{id, data}` of `session.events`. */
export function applyTracked(
  state: SessionSyncState,
  id: string,
  event: SessionEvent,
): { state: SessionSyncState; outcome: ApplyOutcome } {
  if (!isDurable(event)) {
    const messages = applyStreamEvent(state.messages, event as StreamEvent);
    const previews = applyPreviewStream(state.previews, event as StreamEvent);
    const changed = messages !== state.messages || previews !== state.previews;
    return { state: changed ? { ...state, messages, previews } : state, outcome: "applied" };
  }
  const seq = Number(id);
  if (!Number.isFinite(seq) || seq <= state.lastSeq) return { state, outcome: "duplicate" };
  if (seq !== state.lastSeq + 1) return { state, outcome: "resync" };
  const next = applyDurable(state, event);
  if (next === null) return { state, outcome: "resync" }; // a branch whose start this copy does not hold
  return { state: { ...next, lastSeq: seq }, outcome: "applied" };
}

/** Apply a run of tracked items in order; stops at the first that asks for a resync. */
export function applyAll(
  state: SessionSyncState,
  items: Iterable<{ id: string; data: SessionEvent }>,
): { state: SessionSyncState; outcome: ApplyOutcome } {
  let outcome: ApplyOutcome = "applied";
  for (const item of items) {
    const r = applyTracked(state, item.id, item.data);
    state = r.state;
    if (r.outcome === "resync") return r;
    outcome = r.outcome;
  }
  return { state, outcome };
}

/** Remember that this client answered `callId`, so its decision shows as its own. */
export function noteOwnDecision(state: SessionSyncState, callId: string): SessionSyncState {
  return state.ownDecisions.includes(callId) ? state : { ...state, ownDecisions: [...state.ownDecisions, callId] };
}
