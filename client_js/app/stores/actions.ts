// What the buttons and the message box do, through the open session's actions (the client library's:
// writes carry a clientRequestId and are retried after a drop without being applied twice). The server's
// events, not these calls' replies, update what every device shows.
import { atom } from "nanostores";
import { $run, current } from "./conversation";
import { sendMessage } from "./outbox";
import { announce } from "./announcer";
import { navigate, sessionPath } from "./route";
import { errorCode, type AttachmentInput, type SessionSettings, type UploadedFile } from "../lib/chatsync";

/** Counts this device's sends: the log goes back to its end on each (the reader wants to see what they sent). */
export const $sends = atom(0);

/** Sends what was typed: an idle session answers it at once; a busy one queues or steers it (its policy). */
/** Sends to `sessionId`: the chat whose message box it was typed in (not whichever chat the store has open at
 * that instant — right after a switch it may still hold the one before). */
export async function send(sessionId: string, content: string, attachments: readonly UploadedFile[] = []): Promise<void> {
  $sends.set($sends.get() + 1);
  // Kept until the server has it: shown at once, sent again when the connection is back (stores/outbox.ts).
  const res = await sendMessage(sessionId, content, attachments);
  if (res === null) announce("Waiting for connection: the message is sent when the server is back");
  else if (res.status === "queued") announce("Message queued");
  else if (res.status === "steered") announce("Message sent into the current answer");
}

/** Answers the conversation again as it stands (after a failed answer): a run with no new message. */
export const retry = () => current().addInstructions([], true);

/** Runs this page stopped: their answers read "Stopped by you" even where the server knows no device name. */
export const stoppedHere = new Set<string>();

/** Stops the answer on every device: the server aborts the run (the partial answer is kept). */
export function stop(): Promise<unknown> {
  const run = $run.get()?.id;
  if (run) stoppedHere.add(run);
  return current().abort();
}

export async function approve(callId: string, approved: boolean): Promise<void> {
  try {
    await current().approve(callId, approved);
  } catch (err) {
    // Another device answered first: its answer stands and the card already shows it.
    if (errorCode(err) === "CONFLICT" && !$run.get()?.pendingApprovals.some((a) => a.callId === callId)) return;
    throw err;
  }
}

export const removeQueued = (messageId: string) => current().removeQueued(messageId);
/** Changes a queued message's text, its files (the list given replaces the old one), or both. */
export const editQueued = (messageId: string, change: { content?: string; attachments?: readonly AttachmentInput[] }) =>
  current().updateQueued(messageId, change);
export const moveQueued = (messageId: string, toIndex: number) => current().moveQueued(messageId, toIndex);
export const sendQueuedNow = (messageId: string) => current().sendQueuedNow(messageId, "interrupt");
export const clearQueue = () => current().clearQueue();
export const pauseQueue = () => current().pauseQueue();
export const resumeQueue = () => current().resumeQueue();
/** Changes the session's settings (provider and model, system prompt, tools, busy policy) for every device. */
export const updateSettings = (settings: SessionSettings) => current().update(settings);
export const regenerateTitle = (method: "truncate" | "model") => current().regenerateTitle(method);

// --- versions and branches (docs/api.md "Versions and branches"): every device follows from the events ---

/** A new version of one of your messages, answered (a run in progress is interrupted unless the policy rejects). */
export const editMessage = (messageId: string, content: string) => current().edit(messageId, content);
/** A new version of an answer, by the session's model or `provider`/`model`. */
export const regenerate = (messageId: string, provider?: string, model?: string) =>
  current().regenerate({ messageId, ...(provider && model ? { provider, model } : {}) });
/** The answer stopped at the length limit goes on in the same message. */
export const continueAnswer = () => current().continueAnswer();
/** Show another version of a message (and what follows it) on every device. */
export const switchVersion = (messageId: string) => current().switchBranch(messageId);
/** A new chat whose history is the conversation up to this message; it opens here. */
export async function forkAt(messageId: string): Promise<void> {
  const fork = await current().fork(messageId);
  announce("Forked into a new chat");
  navigate(sessionPath(fork.id));
}
