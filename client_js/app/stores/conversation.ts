// The open session. Its state — messages with streaming text, queue, run, approval decisions, tool-call
// argument previews — is the client library's `openSession`, which follows `session.events` with the sync
// rules (seq order, offsets, resync). Its events also drive the status region (run-announcements.ts).
import { atom, computed } from "nanostores";
import { $client } from "./auth";
import { announceRuns } from "./run-announcements";
import { $toolProgress, SHOWN_IMAGE_TYPES, trackProgress } from "./mcp";
import type {
  Decision, Message, OpenSession, QueueItem, RunView, Session, ToolCallPreview, ToolOutcome,
} from "../lib/chatsync";

export interface ToolCallState {
  callId: string;
  name: string;
  arguments: string;
  /** streaming: arguments still arriving; ready: final arguments known; done: it has a result. */
  phase: "streaming" | "ready" | "done";
  executor?: string;
  approval: "pending" | "approved" | "denied" | null;
  /** Which device answered the approval: "this device", the other device's name, or "another device". */
  decidedBy: string | null;
  /** Its result and how the call ended (ok, error, denied, unknown-tool, cancelled). */
  result: { output: string; outcome: ToolOutcome } | null;
  /** Images the tool returned (MCP tools), shown under its result. */
  images: { name: string; mediaType: string; data: string }[];
}

export const $sessionId = atom<string | null>(null);
export const $session = atom<Session | null>(null);
export const $messages = atom<readonly Message[]>([]);
/** A long history is loaded from its end: older messages exist that `loadEarlier` reads. */
export const $hasEarlier = atom(false);
export const $queue = atom<readonly QueueItem[]>([]);
export const $run = atom<RunView | null>(null);
export const $loadState = atom<"idle" | "loading" | "ready" | "missing" | "error">("idle");
export const $decisions = atom<Record<string, Decision>>({});
export const $previews = atom<Record<string, ToolCallPreview>>({});

export const $busy = computed($session, (s) => s?.status === "running" || s?.status === "requires-action");
/** The last message of the active path (where Continue applies). */
export const $leafId = computed($messages, (ms) => ms[ms.length - 1]?.id ?? null);
export const $streaming = computed($messages, (ms) => ms.some((m) => m.status === "streaming"));

/** Every tool call of the session by id: the messages say what was called and its result; the run says
 * what waits for approval; the previews hold arguments still streaming; the decisions who answered. */
export const $toolCalls = computed([$messages, $run, $previews, $decisions], (messages, run, previews, decisions) => {
  const calls = new Map<string, ToolCallState>();
  for (const m of messages) {
    if (m.role === "assistant") {
      for (const c of m.toolCalls ?? []) {
        // An answered approval is kept on the call (`decision`), so it shows after a reload too.
        const d = c.decision;
        calls.set(c.id, { callId: c.id, name: c.name, arguments: c.arguments, phase: "ready",
                          approval: d ? (d.approved ? "approved" : "denied") : null,
                          decidedBy: d ? d.deviceName || "another device" : null, result: null, images: [] });
      }
    } else if (m.role === "tool" && m.toolCallId && calls.has(m.toolCallId)) {
      const c = calls.get(m.toolCallId)!;
      c.phase = "done";
      c.result = { output: m.content, outcome: m.outcome ?? "ok" };
      c.images = toolImages(m.attachments);
    }
  }
  for (const [callId, p] of Object.entries(previews)) {
    if (!calls.has(callId)) {
      calls.set(callId, { callId, name: p.name, arguments: p.arguments, phase: "streaming", approval: null,
                          decidedBy: null, result: null, images: [] });
    }
  }
  for (const p of run?.pendingToolCalls ?? []) {
    const c = calls.get(p.callId);
    if (c) {
      c.executor = p.executor;
      if (p.approval === "pending") c.approval = "pending";
    }
  }
  for (const [callId, d] of Object.entries(decisions)) {
    const c = calls.get(callId);
    if (c) {
      c.approval = d.approved ? "approved" : "denied";
      c.decidedBy = d.by === "self" ? "this device" : d.decidedBy?.deviceName || "another device";
    }
  }
  return calls;
});

function toolImages(attachments: readonly Record<string, unknown>[] | undefined): ToolCallState["images"] {
  return (attachments ?? []).flatMap((a) =>
    typeof a.data === "string" && typeof a.mediaType === "string" && SHOWN_IMAGE_TYPES.includes(a.mediaType)
      ? [{ name: String(a.name ?? "image"), mediaType: a.mediaType, data: a.data }]
      : []);
}

/** Calls whose cards belong to a message that is still streaming (tool-call-start came before it completed). */
export function previewsOf(messageId: string): string[] {
  return Object.entries($previews.get()).filter(([, p]) => p.messageId === messageId).map(([id]) => id);
}

let open: OpenSession | null = null;
let stop: (() => void)[] = [];

/** The open session's actions (send, queue, approve...), for stores/actions.ts. */
export function current(): OpenSession {
  if (!open) throw new Error("No chat is open");
  return open;
}

/** Reads the page of messages before the oldest one shown. */
export function loadEarlier(): Promise<boolean> {
  return open ? open.loadEarlier() : Promise.resolve(false);
}

/** Shows a session: replaces whatever was open. */
export function openSession(sessionId: string): void {
  if ($sessionId.get() === sessionId && open) return;
  close();
  const client = $client.get();
  if (!client) return;
  $sessionId.set(sessionId);
  $loadState.set("loading");
  const s = client.openSession(sessionId);
  open = s;
  stop = [
    s.session.subscribe((v) => $session.set(v)),
    s.messages.subscribe((v) => $messages.set(v)),
    s.hasEarlier.subscribe((v) => $hasEarlier.set(v)),
    s.queue.subscribe((v) => $queue.set(v)),
    s.run.subscribe((v) => $run.set(v)),
    s.decisions.subscribe((v) => $decisions.set(v)),
    s.toolCallPreviews.subscribe((v) => $previews.set(v)),
    s.onEvent(announceRuns),
    s.onEvent(trackProgress),
    s.status.subscribe((status) => {
      if (status === "live" || status === "resyncing") $loadState.set("ready");
      else if (status === "deleted") $loadState.set("missing");
      else if (status === "error") $loadState.set("error");
    }),
  ];
}

export function close(): void {
  for (const f of stop) f();
  stop = [];
  open?.close();
  open = null;
  $sessionId.set(null);
  $session.set(null);
  $messages.set([]);
  $hasEarlier.set(false);
  $queue.set([]);
  $run.set(null);
  $decisions.set({});
  $previews.set({});
  $toolProgress.set({});
  $loadState.set("idle");
}
