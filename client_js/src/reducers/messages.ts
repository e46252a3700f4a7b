/**
 * Messages of one session, with the text of streaming answers assembled from `text-delta` and
 * `stream-snapshot`.
 *
 * Invariant: a streaming message's text only grows by the part of a delta past its current end. A delta whose
 * range is already there (a repeat, or text a snapshot covered) is dropped; one that starts past the end is
 * held until the gap is filled by other deltas or by a snapshot. A snapshot replaces the text; the final text
 * of `message-completed` replaces everything, and later stream events for that message are ignored.
 */
import type { DurableEvent, Message, RunState, StreamEvent, TextDeltaEvent } from "../router.gen.js";
import { assemble, cpLength, type HeldDelta } from "./text.js";

export type { HeldDelta } from "./text.js";

/** Per streaming message: its text length in code points and the deltas that arrived ahead of it. */
export interface StreamState {
  length: number;
  held: HeldDelta[];
}

export interface MessagesState {
  /** History order: `session.get`'s newest messages, after the earlier pages this client loaded. */
  list: Message[];
  streams: Record<string, StreamState>;
  /** `message.list`'s `before` for the messages older than `list`; `null` when `list` starts the history. */
  before: number | null;
}

export const emptyMessages: MessagesState = Object.freeze({ list: [], streams: {}, before: null }) as MessagesState;

/**
 * The state after `session.get`: a streaming message takes the run's partial text, which may be newer. Earlier
 * pages `previous` had loaded stay in front: a history only grows at its end, so the messages before the
 * snapshot's first one are still the same.
 */
export function messagesFromSnapshot(
  messages: Message[],
  run: RunState | null,
  before: number | null = null,
  previous?: MessagesState,
): MessagesState {
  let list = messages;
  const first = messages[0];
  const kept = first && previous ? previous.list.findIndex((m) => m.id === first.id) : -1;
  if (kept > 0) {
    list = [...previous!.list.slice(0, kept), ...messages];
    before = previous!.before;
  }
  const streams: Record<string, StreamState> = {};
  for (const m of messages) {
    if (m.status === "streaming") streams[m.id] = { length: cpLength(m.content), held: [] };
  }
  const live = run?.streaming;
  if (live) {
    list = list.map((m) => (m.id === live.messageId ? { ...m, content: live.text } : m));
    streams[live.messageId] = { length: cpLength(live.text), held: [] };
  }
  return { list, streams, before };
}

/** A page of `message.list` read with `before`: its messages go in front; `nextCursor` is the new `before`. */
export function withEarlier(state: MessagesState, items: Message[], nextCursor: number | null): MessagesState {
  const known = new Set(state.list.map((m) => m.id));
  const older = items.filter((m) => !known.has(m.id));
  return { ...state, list: [...older, ...state.list], before: nextCursor };
}

function indexOf(state: MessagesState, id: string): number {
  // Recent messages change most: search from the end.
  for (let i = state.list.length - 1; i >= 0; i--) if (state.list[i]!.id === id) return i;
  return -1;
}

function replaceAt(list: Message[], i: number, msg: Message): Message[] {
  const next = list.slice();
  next[i] = msg;
  return next;
}

/** A message created, completed or continued: insert or replace it; completion ends its stream. A message that
 * carries no `versions` (`message-completed`) keeps those held; one that does (a new message) gives every version
 * held its new place among them. */
export function putMessage(state: MessagesState, msg: Message): MessagesState {
  const i = indexOf(state, msg.id);
  const old = i < 0 ? undefined : state.list[i]!;
  if (old && msg.versions == null) msg = { ...msg, versions: old.versions ?? null, siblingIds: old.siblingIds ?? null };
  let list = i < 0 ? [...state.list, msg] : replaceAt(state.list, i, msg);
  const siblings = msg.siblingIds;
  if (siblings && siblings.length > 1) {
    list = list.map((m) => {
      const index = m.id === msg.id ? -1 : siblings.indexOf(m.id);
      return index < 0 ? m : { ...m, versions: { index, count: siblings.length }, siblingIds: siblings };
    });
  }
  const streams = { ...state.streams };
  const held = streams[msg.id]?.held ?? [];
  if (msg.status === "streaming") {
    streams[msg.id] = { length: cpLength(msg.content), held: [] };
    return drain({ ...state, list, streams }, msg.id, held);
  }
  delete streams[msg.id];
  return { ...state, list, streams };
}

/**
 * `branch-changed`: the active path is now the path up to `parentId` (null: from the start) followed by `path`.
 * The messages held up to `parentId` stay; returns null when `parentId` is not among them (it is older than the
 * pages loaded, or the copy missed something): then the session is read again.
 */
export function changeBranch(state: MessagesState, parentId: string | null, path: Message[]): MessagesState | null {
  let kept: Message[] = [];
  let before = state.before;
  if (parentId !== null) {
    const i = indexOf(state, parentId);
    if (i < 0) return null;
    kept = state.list.slice(0, i + 1);
  } else {
    before = null; // the path carried starts the history
  }
  const list = [...kept, ...path];
  const streams: Record<string, StreamState> = {};
  for (const m of list) {
    const held = state.streams[m.id];
    if (m.status === "streaming") streams[m.id] = held ?? { length: cpLength(m.content), held: [] };
  }
  return { list, streams, before };
}

/** An approval answered (`tool-approval-resolved`): the call's message keeps who decided and when, as
 * `session.get` shows it (`toolCalls[].decision`). */
export function putDecision(state: MessagesState, e: Extract<DurableEvent, { type: "tool-approval-resolved" }>): MessagesState {
  const i = state.list.findIndex((m) => m.toolCalls?.some((c) => c.id === e.callId));
  if (i < 0 || !e.decidedBy || e.decidedAt === undefined) return state;
  const msg = state.list[i]!;
  const decision = {
    approved: e.approved, userName: e.decidedBy.userName, deviceName: e.decidedBy.deviceName, decidedAt: e.decidedAt,
  };
  const toolCalls = msg.toolCalls!.map((c) => (c.id === e.callId ? { ...c, decision } : c));
  return { ...state, list: replaceAt(state.list, i, { ...msg, toolCalls }) };
}

function drain(state: MessagesState, id: string, extra: HeldDelta[]): MessagesState {
  const stream = state.streams[id];
  const i = indexOf(state, id);
  if (!stream || i < 0) return state;
  const msg = state.list[i]!;
  const { text, length, held } = assemble(msg.content, stream.length, stream.held, extra);
  const list = text === msg.content ? state.list : replaceAt(state.list, i, { ...msg, content: text });
  return { ...state, list, streams: { ...state.streams, [id]: { length, held } } };
}

function applyDelta(state: MessagesState, e: TextDeltaEvent): MessagesState {
  const i = indexOf(state, e.messageId);
  const d = { offset: e.offset, delta: e.delta };
  if (i < 0) {
    // Not created yet as far as we know: keep it for when it is.
    const old = state.streams[e.messageId] ?? { length: 0, held: [] };
    return { ...state, streams: { ...state.streams, [e.messageId]: { length: old.length, held: [...old.held, d] } } };
  }
  const msg = state.list[i]!;
  const stream = state.streams[e.messageId];
  if (msg.status !== "streaming" || !stream) return state; // completed: its final text is authoritative
  if (d.offset + cpLength(d.delta) <= stream.length) return state; // a repeat
  if (d.offset > stream.length) {
    return { ...state, streams: { ...state.streams, [e.messageId]: { ...stream, held: [...stream.held, d] } } };
  }
  return drain(state, e.messageId, [d]);
}

/** Apply a stream event (text and tool-call previews). Tool-call previews do not change messages. */
export function applyStreamEvent(state: MessagesState, e: StreamEvent): MessagesState {
  if (e.type === "text-delta") return applyDelta(state, e);
  if (e.type === "stream-snapshot") {
    const i = indexOf(state, e.messageId);
    const msg = i < 0 ? undefined : state.list[i];
    if (!msg || msg.status !== "streaming") return state;
    const stream = state.streams[e.messageId] ?? { length: 0, held: [] };
    const replaced: MessagesState = {
      ...state,
      list: msg.content === e.text ? state.list : replaceAt(state.list, i, { ...msg, content: e.text }),
      streams: { ...state.streams, [e.messageId]: { length: cpLength(e.text), held: [] } },
    };
    return drain(replaced, e.messageId, stream.held);
  }
  return state;
}

/** The streaming message and its text, as `session.get`'s `run.streaming` has it. */
export function streamingOf(state: MessagesState): RunState["streaming"] {
  for (let i = state.list.length - 1; i >= 0; i--) {
    const m = state.list[i]!;
    if (m.status === "streaming") {
      return { messageId: m.id, offset: state.streams[m.id]?.length ?? cpLength(m.content), text: m.content };
    }
  }
  return null;
}
