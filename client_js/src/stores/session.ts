/**
 * One open session: the stores of each concern (session, messages, queue, run) over one follower
 * (`follow.ts`), and the actions a UI calls. `openSession(id)` is what the app uses.
 */
import { computed, type ReadableAtom } from "nanostores";
import type { Connection } from "../connection.js";
import type { AttachmentInput } from "../files.js";
import type { Requests, WriteInput } from "../requests.js";
import type { Message, ProcedurePath, Procedures, Session, SessionUpdateInput } from "../router.gen.js";
import type { QueueItem } from "../reducers/queue.js";
import type { Decision, RunView } from "../reducers/run.js";
import type { ToolCallPreview } from "../reducers/previews.js";
import type { SessionSyncState } from "../reducers/session.js";
import { followSession, type EventListener, type FollowOptions, type FollowStatus } from "./follow.js";
import { messageActions, messagesStore, type EditOptions, type RegenerateOptions, type SendOptions } from "./messages.js";
import { queueActions, queueStore, type SendNowMode } from "./queue.js";
import { decisionsStore, previewsStore, runActions, runStore } from "./run.js";

export type { EventListener, FollowOptions, FollowStatus } from "./follow.js";
export type { EditOptions, RegenerateOptions, SendOptions } from "./messages.js";
export type { SendNowMode } from "./queue.js";

type Out<P extends ProcedurePath> = Procedures[P]["output"];

/** The provider/model and other settings `session.update` changes. */
export type SessionSettings = Omit<SessionUpdateInput, "sessionId">;

export interface OpenSession {
  readonly id: string;
  /** The session (title, status, provider, model, queuePaused, usage...); `null` until loaded. */
  readonly session: ReadableAtom<Session | null>;
  /** The history, streaming answers included (their text grows as it arrives): the newest messages of a
   * long history, and the earlier ones `loadEarlier` read. */
  readonly messages: ReadableAtom<Message[]>;
  /** Whether messages older than the loaded ones exist (`loadEarlier` reads them). */
  readonly hasEarlier: ReadableAtom<boolean>;
  /** The queue in server order, then this client's `pending` items. */
  readonly queue: ReadableAtom<QueueItem[]>;
  /** The run in progress: status, pending tool calls and approvals, decisions and who made them. */
  readonly run: ReadableAtom<RunView | null>;
  /** Approvals answered in this session, by call id: approved or not, `by` this client or another, and
   * `decidedBy` (user and device). Unlike `run.decisions` they stay after the run ends. */
  readonly decisions: ReadableAtom<Record<string, Decision>>;
  /** Tool-call arguments as the model streams them, by call id (previews only). */
  readonly toolCallPreviews: ReadableAtom<Record<string, ToolCallPreview>>;
  readonly status: ReadableAtom<FollowStatus>;
  /** The last error that stopped following or a reload, if any. */
  readonly error: ReadableAtom<unknown>;
  /** The whole local state, for tests and tools. */
  readonly state: ReadableAtom<SessionSyncState | null>;
  /** Resolves once the first `session.get` is applied (rejects if it fails for good). */
  readonly ready: Promise<void>;
  /** Read the next page of older messages into `messages`; `false` when the history is loaded from its start. */
  loadEarlier(limit?: number): Promise<boolean>;
  /** Called after each event of the stream is applied (for announcements, sounds...); returns an unsubscribe. */
  onEvent(listener: EventListener): () => void;
  /** How many times the local copy was thrown away and read again. */
  resyncs(): number;

  /** Send now, or per the busy policy (queue, steer, interrupt, reject) while the model answers. */
  send(content: string, options?: SendOptions): Promise<Out<"message.send">>;
  /** Put a message at the end of the queue; it shows at once as a `pending` item. */
  enqueue(content: string, attachments?: readonly AttachmentInput[]): Promise<Out<"message.enqueueMessage">>;
  /** System instructions for the session (`respond: false` only stores them). */
  addInstructions(instructions: string | string[], respond?: boolean): Promise<Out<"message.addInstructions">>;
  /** A new version of a user message, made active and answered (docs/api.md "Versions and branches"). */
  edit(messageId: string, content: string, options?: EditOptions): Promise<Out<"message.edit">>;
  /** A new version of an answer (default: the last one), by the session's model or the one given. */
  regenerate(options?: RegenerateOptions): Promise<Out<"run.regenerate">>;
  /** The last answer, stopped at the length limit, goes on in the same message. */
  continueAnswer(): Promise<Out<"run.continue">>;
  /** The path through `messageId` becomes the active one; every device follows from the events. */
  switchBranch(messageId: string): Promise<Out<"session.switchBranch">>;
  /** A new session whose history is the path up to `messageId`. */
  fork(messageId: string, title?: string): Promise<Out<"session.fork">>;
  /** Change a queued message's text or attachments (a given list replaces the old one). */
  updateQueued(messageId: string, change: { content?: string; attachments?: readonly AttachmentInput[] }): Promise<Out<"message.updateQueuedMessage">>;
  removeQueued(messageId: string): Promise<null>;
  moveQueued(messageId: string, toIndex: number): Promise<Out<"message.moveQueuedMessage">>;
  /** Send a queued message now: `interrupt` the run (default), `steer` it into the run, or make it `next`. */
  sendQueuedNow(messageId: string, mode?: SendNowMode): Promise<Out<"message.sendQueuedNow"> | null>;
  clearQueue(): Promise<null>;
  pauseQueue(): Promise<null>;
  resumeQueue(): Promise<Out<"message.resumeQueue">>;
  abort(): Promise<Out<"run.abort">>;
  approve(callId: string, approved: boolean, reason?: string): Promise<Out<"tool.approve">>;
  submitOutputs(outputs: WriteInput<"tool.submitOutputs">["toolOutputs"]): Promise<Out<"tool.submitOutputs">>;
  setTitle(title: string): Promise<Session>;
  clearTitle(): Promise<Session>;
  regenerateTitle(method?: "truncate" | "model"): Promise<Session>;
  /** Change provider, model, system prompt, tools, busy policy... */
  update(settings: SessionSettings): Promise<Session>;
  setModel(provider: string, model: string): Promise<Session>;
  delete(): Promise<null>;
  /** Read `session.get` again and resubscribe from its `lastEventId`. */
  resync(): Promise<void>;
  /** Stop following (the stores keep their last values). */
  close(): void;
}

export function openSession(
  connection: Connection,
  requests: Requests,
  sessionId: string,
  options: FollowOptions = {},
): OpenSession {
  const follower = followSession(connection, requests, sessionId, options);
  const ref = { sessionId };
  return {
    id: sessionId,
    session: computed(follower.state, (s) => s?.session ?? null),
    messages: messagesStore(follower),
    hasEarlier: computed(follower.state, (s) => s != null && s.messages.before != null),
    loadEarlier: follower.loadEarlier,
    queue: queueStore(follower),
    run: runStore(follower),
    decisions: decisionsStore(follower),
    toolCallPreviews: previewsStore(follower),
    onEvent: follower.onEvent,
    status: follower.status,
    error: follower.error,
    state: follower.state,
    ready: follower.ready,
    resyncs: follower.resyncs,
    resync: follower.resync,
    ...messageActions(requests, sessionId),
    ...queueActions(requests, follower),
    ...runActions(requests, follower),
    setTitle: (title) => requests.mutate("session.setTitle", { ...ref, title }),
    clearTitle: () => requests.mutate("session.clearTitle", ref),
    regenerateTitle: (method) => requests.mutate("session.regenerateTitle", { ...ref, ...(method ? { method } : {}) }),
    update: (settings) => requests.mutate("session.update", { ...ref, ...settings }),
    setModel: (provider, model) => requests.mutate("session.update", { ...ref, provider, model }),
    delete: () => requests.mutate("session.delete", ref),
    close: () => follower.close(),
  };
}
