// What the buttons and the message box do. Every write names the open session; the server's events, not
// these calls' replies, update the stores, so every device (this one included) shows the same thing.
import { $session, $sessionId, decidedElsewhere, noteDecidedHere } from "./conversation";
import { announce } from "./announcer";
import { mutate, mutateOnce } from "./call";
import { errorCode } from "../lib/rpc";
import type { BusyPolicy, QueuedMessage } from "../lib/types";

function sessionId(): string {
  const id = $sessionId.get();
  if (!id) throw new Error("No chat is open");
  return id;
}

/** Sends what was typed: an idle session answers it at once; a busy one queues or steers it (its policy). */
export async function send(content: string): Promise<void> {
  const res = await mutateOnce<{ status: string; queued?: QueuedMessage }>("message.send",
    { sessionId: sessionId(), content });
  if (res.status === "queued") announce("Message queued");
  else if (res.status === "steered") announce("Message sent into the current answer");
}

/** Stops the answer on every device: the server aborts the run (the partial answer is kept). */
export const stop = () => mutate("run.abort", { sessionId: sessionId() });

export async function approve(callId: string, approved: boolean): Promise<void> {
  noteDecidedHere(callId);
  try {
    await mutateOnce("tool.approve", { sessionId: sessionId(), callId, approved });
  } catch (err) {
    if (errorCode(err) === "CONFLICT") {
      decidedElsewhere(callId); // the first answer won, and it was not this one: nothing to report
      return;
    }
    throw err;
  }
}

export const removeQueued = (messageId: string) =>
  mutate("message.removeQueuedMessage", { sessionId: sessionId(), messageId });
export const editQueued = (messageId: string, content: string) =>
  mutate("message.updateQueuedMessage", { sessionId: sessionId(), messageId, content });
export const moveQueued = (messageId: string, toIndex: number) =>
  mutate("message.moveQueuedMessage", { sessionId: sessionId(), messageId, toIndex });
export const sendQueuedNow = (messageId: string) =>
  mutate("message.sendQueuedNow", { sessionId: sessionId(), messageId, mode: "interrupt" });
export const clearQueue = () => mutate("message.clearQueue", { sessionId: sessionId() });
export const pauseQueue = () => mutate("message.pauseQueue", { sessionId: sessionId() });
export const resumeQueue = () => mutate("message.resumeQueue", { sessionId: sessionId() });

export async function updateModel(provider: string, model: string): Promise<void> {
  const s = await mutate<any>("session.update", { sessionId: sessionId(), provider, model });
  $session.set(s);
}

export async function setBusyPolicy(busyPolicy: BusyPolicy): Promise<void> {
  const s = await mutate<any>("session.update", { sessionId: sessionId(), busyPolicy });
  $session.set(s);
}
