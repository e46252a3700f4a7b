// The open session, kept in sync from `session.events`: its messages (streaming text included), tool calls,
// queue and run. Invariant (the Python client's too): a message's text grows only by a delta whose offset
// equals its current length in code points; a delta repeating text a snapshot already gave is dropped; any
// other mismatch means this copy cannot be trusted, and the session is refetched and resubscribed.
import { atom, computed } from "nanostores";
import { $rpc } from "./auth";
import { announce } from "./announcer";
import { forgetSession, noteSession } from "./sessions";
import { codePointLength, dropCodePoints } from "../lib/codepoints";
import { errorCode, errorMessage } from "../lib/rpc";
import type { Message, QueuedMessage, Session, SessionEvent, Snapshot } from "../lib/types";

export interface MessageState extends Message { length: number }

export interface ToolCallState {
  callId: string;
  /** The assistant message that made the call (known from tool-call-start, while it streams). */
  messageId?: string;
  name: string;
  arguments: string;
  /** streaming: arguments still arriving; ready: final arguments known; done: it has a result. */
  phase: "streaming" | "ready" | "done";
  executor?: string;
  requiresApproval: boolean;
  approval: "pending" | "approved" | "denied" | null;
  /** Which device answered the approval, when the server says; "this device" when it was us. */
  decidedBy: string | null;
  result: { output: string; isError: boolean } | null;
}

export const $sessionId = atom<string | null>(null);
export const $session = atom<Session | null>(null);
export const $messages = atom<MessageState[]>([]);
export const $toolCalls = atom<Map<string, ToolCallState>>(new Map());
export const $queue = atom<QueuedMessage[]>([]);
export const $loadState = atom<"idle" | "loading" | "ready" | "missing" | "error">("idle");

export const $busy = computed($session, (s) => s?.status === "running" || s?.status === "requires-action");
export const $streaming = computed($messages, (ms) => ms.some((m) => m.status === "streaming"));

/** Approvals this device sent, so the card can say who decided once the event arrives. */
const decidedHere = new Set<string>();
export function noteDecidedHere(callId: string): void {
  decidedHere.add(callId);
}

/** Our answer lost (another device answered first): the decision shown is not ours. */
export function decidedElsewhere(callId: string): void {
  decidedHere.delete(callId);
  const c = $toolCalls.get().get(callId);
  if (c?.decidedBy === "this device") updateCall(callId, { decidedBy: "another device" });
}

let sub: { unsubscribe(): void } | null = null;
let generation = 0;
let lastEventId = "0";

function withLength(m: Message): MessageState {
  return { ...m, length: codePointLength(m.content) };
}

function setSession(s: Session): void {
  $session.set(s);
  noteSession({ ...s });
}

function replaceMessage(m: MessageState): void {
  const list = $messages.get();
  const i = list.findIndex((x) => x.id === m.id);
  if (i === -1) $messages.set([...list, m]);
  else $messages.set([...list.slice(0, i), m, ...list.slice(i + 1)]);
}

function findMessage(id: string): MessageState | undefined {
  const list = $messages.get();
  for (let i = list.length - 1; i >= 0; i--) if (list[i].id === id) return list[i];
  return undefined;
}

function updateCall(callId: string, change: Partial<ToolCallState>, name = ""): void {
  const next = new Map($toolCalls.get());
  const old: ToolCallState = next.get(callId) ?? {
    callId, name, arguments: "", phase: "ready", requiresApproval: false, approval: null, decidedBy: null,
    result: null,
  };
  next.set(callId, { ...old, ...change });
  $toolCalls.set(next);
}

function callsFromSnapshot(snap: Snapshot): Map<string, ToolCallState> {
  const calls = new Map<string, ToolCallState>();
  for (const m of snap.messages) {
    for (const c of m.toolCalls ?? []) {
      calls.set(c.id, { callId: c.id, name: c.name, arguments: c.arguments, phase: "ready", requiresApproval: false,
                        approval: null, decidedBy: null, result: null });
    }
    if (m.role === "tool" && m.toolCallId && calls.has(m.toolCallId)) {
      const c = calls.get(m.toolCallId)!;
      calls.set(c.callId, { ...c, phase: "done", result: { output: m.content, isError: m.status === "error" } });
    }
  }
  for (const p of snap.run?.pendingToolCalls ?? []) {
    const c = calls.get(p.callId);
    calls.set(p.callId, {
      ...(c ?? { callId: p.callId, name: p.name, phase: "ready", decidedBy: null, result: null }),
      arguments: p.arguments, executor: p.executor, requiresApproval: p.requiresApproval,
      approval: (p.approval as ToolCallState["approval"]) ?? (p.requiresApproval ? "pending" : null),
    } as ToolCallState);
  }
  return calls;
}

function applySnapshot(snap: Snapshot): void {
  const messages = snap.messages.map(withLength);
  const live = snap.run?.streaming;
  if (live) {
    const i = messages.findIndex((m) => m.id === live.messageId);
    if (i !== -1 && live.offset >= messages[i].length) {
      messages[i] = { ...messages[i], content: live.text, length: live.offset, status: "streaming" };
    }
  }
  setSession(snap.session);
  $messages.set(messages);
  $toolCalls.set(callsFromSnapshot(snap));
  $queue.set(snap.queue);
  lastEventId = snap.lastEventId;
}

/** Applies one event; false when the local copy can no longer be trusted. */
function apply(e: SessionEvent): boolean {
  switch (e.type) {
    case "text-delta": {
      const m = findMessage(e.messageId);
      if (!m) return false;
      if (m.status !== "streaming") return true; // stopped or completed: nothing may be added after the end
      const offset = Number(e.offset);
      const deltaLength = codePointLength(e.delta);
      if (offset === m.length) {
        replaceMessage({ ...m, content: m.content + e.delta, length: m.length + deltaLength });
      } else if (offset < m.length && offset + deltaLength > m.length) {
        const tail = dropCodePoints(e.delta, m.length - offset);
        replaceMessage({ ...m, content: m.content + tail, length: offset + deltaLength });
      } else if (offset > m.length) {
        return false;
      }
      return true;
    }
    case "stream-snapshot": {
      const m = findMessage(e.messageId);
      if (!m) return false;
      if (m.status === "streaming" && Number(e.offset) >= m.length) {
        replaceMessage({ ...m, content: e.text, length: Number(e.offset) });
      }
      return true;
    }
    case "message-created":
    case "message-completed": {
      const m = withLength(e.message);
      replaceMessage(m);
      for (const c of m.toolCalls ?? []) updateCall(c.id, { name: c.name, arguments: c.arguments }, c.name);
      if (m.role === "tool" && m.toolCallId && $toolCalls.get().has(m.toolCallId)) {
        const c = $toolCalls.get().get(m.toolCallId)!;
        if (!c.result) updateCall(c.callId, { phase: "done", result: { output: m.content, isError: m.status === "error" } });
      }
      return true;
    }
    case "tool-call-start":
      updateCall(e.callId, { name: e.name, phase: "streaming", arguments: "", messageId: e.messageId }, e.name);
      return true;
    case "tool-call-delta": {
      const c = $toolCalls.get().get(e.callId);
      // A preview only: the final arguments come with tool-call-ready, so a gap is simply not shown.
      if (c && c.phase === "streaming" && codePointLength(c.arguments) === Number(e.offset)) {
        updateCall(e.callId, { arguments: c.arguments + e.delta });
      }
      return true;
    }
    case "tool-call-ready":
      updateCall(e.callId, { name: e.name, arguments: e.arguments, phase: "ready", executor: e.executor,
                             requiresApproval: !!e.requiresApproval }, e.name);
      return true;
    case "tool-approval-requested":
      updateCall(e.callId, { approval: "pending" });
      announce("A tool call is waiting for your approval");
      return true;
    case "tool-approval-resolved": {
      const who = e.decidedBy as { deviceName?: string | null; userName?: string } | undefined;
      const by = decidedHere.has(e.callId) ? "this device" : who?.deviceName || "another device";
      updateCall(e.callId, { approval: e.approved ? "approved" : "denied", decidedBy: by });
      return true;
    }
    case "tool-call-result":
      updateCall(e.callId, { phase: "done", result: { output: e.output, isError: !!e.isError } });
      return true;
    case "run-started":
      announce("Answering…");
      return true;
    case "run-finished":
      announce(e.finishReason === "length" ? "Answer finished (length limit)" : "Answer finished");
      return true;
    case "run-failed":
      announce(`Answer failed: ${e.error?.message ?? "error"}`);
      return true;
    case "run-aborted":
      announce("Answer stopped");
      return true;
    case "session-updated":
      setSession(e.session);
      return true;
    case "title-changed": {
      const s = $session.get();
      if (s) setSession({ ...s, title: e.title, titleSource: e.source });
      return true;
    }
    case "queue-paused":
    case "queue-resumed": {
      const s = $session.get();
      if (s) setSession({ ...s, queuePaused: e.type === "queue-paused" });
      return true;
    }
    case "queue-message-added":
      if (!$queue.get().some((q) => q.id === e.message.id)) $queue.set([...$queue.get(), e.message]);
      return true;
    case "queue-message-removed":
      $queue.set($queue.get().filter((q) => q.id !== e.messageId));
      return true;
    case "queue-cleared":
      $queue.set([]);
      return true;
    case "queue-message-updated":
      $queue.set($queue.get().map((q) => (q.id === e.message.id ? e.message : q)));
      return true;
    case "queue-reordered": {
      const byId = new Map($queue.get().map((q) => [q.id, q]));
      $queue.set((e.order as string[]).map((id) => byId.get(id)).filter((q): q is QueuedMessage => !!q));
      return true;
    }
    case "session-deleted":
      forgetSession(e.sessionId);
      $loadState.set("missing");
      announce("This chat was deleted");
      return true;
    default:
      return true;
  }
}

function subscribe(sessionId: string, gen: number): void {
  const rpc = $rpc.get();
  if (!rpc) return;
  sub = rpc.subscribe<{ id?: string; data: SessionEvent }>("session.events", { sessionId, lastEventId }, {
    onData(env) {
      if (gen !== generation) return;
      const e = env.data;
      if (e.type === "resync-required") {
        void resync(sessionId, gen);
        return;
      }
      if (env.id) lastEventId = env.id;
      if (!apply(e)) void resync(sessionId, gen);
      else if (e.type === "session-deleted") {
        generation++; // the server ends the subscription; nothing more belongs to this view
        sub = null;
      }
    },
    onError(err) {
      if (gen !== generation) return;
      if (errorCode(err) === "NOT_FOUND") $loadState.set("missing");
      else void resync(sessionId, gen);
    },
  });
}

async function resync(sessionId: string, gen: number): Promise<void> {
  sub?.unsubscribe();
  sub = null;
  const rpc = $rpc.get();
  if (!rpc || gen !== generation) return;
  try {
    const snap = await rpc.query<Snapshot>("session.get", { sessionId });
    if (gen !== generation) return;
    applySnapshot(snap);
    $loadState.set("ready");
    subscribe(sessionId, gen);
  } catch (err) {
    if (gen !== generation) return;
    if (errorCode(err) === "NOT_FOUND") $loadState.set("missing");
    else {
      $loadState.set("error");
      announce(`Could not load this chat: ${errorMessage(err)}`);
    }
  }
}

/** Shows a session: replaces whatever was open (its subscription ends first). */
export function openSession(sessionId: string): void {
  if ($sessionId.get() === sessionId && sub) return;
  close();
  const gen = ++generation;
  $sessionId.set(sessionId);
  $loadState.set("loading");
  lastEventId = "0";
  void resync(sessionId, gen);
}

export function close(): void {
  generation++;
  sub?.unsubscribe();
  sub = null;
  decidedHere.clear();
  $sessionId.set(null);
  $session.set(null);
  $messages.set([]);
  $toolCalls.set(new Map());
  $queue.set([]);
  $loadState.set("idle");
}
