/**
 * Tool-call arguments as the model streams them (`tool-call-start`, `tool-call-delta`). Previews only: the
 * final arguments come with `message-completed` and `tool-call-ready`, and a client that joins mid-stream
 * gets no snapshot of partial arguments, so a preview may start late or stay incomplete. Deltas are placed by
 * their offset into the call's arguments, as the text of a message is.
 */
import type { DurableEvent, StreamEvent } from "../router.gen.js";
import { assemble, type HeldDelta } from "./text.js";

export interface ToolCallPreview {
  messageId: string;
  callId: string;
  name: string;
  /** The call's position among the message's tool calls. */
  index: number;
  /** The arguments so far (JSON text, usually incomplete). */
  arguments: string;
}

interface PreviewEntry extends ToolCallPreview {
  length: number;
  held: HeldDelta[];
}

export type PreviewsState = Record<string, PreviewEntry>;

export const emptyPreviews: PreviewsState = Object.freeze({}) as PreviewsState;

export function applyPreviewStream(state: PreviewsState, e: StreamEvent): PreviewsState {
  if (e.type === "tool-call-start") {
    if (state[e.callId]) return state;
    const entry = { messageId: e.messageId, callId: e.callId, name: e.name, index: e.index, arguments: "", length: 0, held: [] };
    return { ...state, [e.callId]: entry };
  }
  if (e.type === "tool-call-delta") {
    const p = state[e.callId];
    if (!p) return state; // started before we joined: no way to place it
    const { text, length, held } = assemble(p.arguments, p.length, p.held, [{ offset: e.offset, delta: e.delta }]);
    if (length === p.length && held.length === p.held.length) return state;
    return { ...state, [e.callId]: { ...p, arguments: text, length, held } };
  }
  return state;
}

/** Previews end with the message that made the calls, and with the run. */
export function applyPreviewDurable(state: PreviewsState, e: DurableEvent): PreviewsState {
  switch (e.type) {
    case "message-completed": {
      const kept = Object.values(state).filter((p) => p.messageId !== e.message.id);
      return kept.length === Object.keys(state).length ? state : Object.fromEntries(kept.map((p) => [p.callId, p]));
    }
    case "run-started":
    case "run-finished":
    case "run-failed":
    case "run-aborted":
      return Object.keys(state).length ? emptyPreviews : state;
    default:
      return state;
  }
}

/** What a UI shows, by call id. */
export function previewsOf(state: PreviewsState): Record<string, ToolCallPreview> {
  return Object.fromEntries(
    Object.values(state).map(({ messageId, callId, name, index, arguments: args }) => [
      callId,
      { messageId, callId, name, index, arguments: args },
    ]),
  );
}
