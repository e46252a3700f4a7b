/**
 * The messages of an open session, streaming answers included, and the actions that add to them.
 */
import { computed, type ReadableAtom } from "nanostores";
import { wireAttachments, type AttachmentInput } from "../files.js";
import type { Requests, WriteInput } from "../requests.js";
import type { Message, Procedures } from "../router.gen.js";
import type { SessionFollower } from "./follow.js";

export interface SendOptions {
  /** Uploaded files (`{fileId}` or what `files.upload` returned) and path references. */
  attachments?: readonly AttachmentInput[];
  instructions?: string | string[];
  busyPolicy?: WriteInput<"message.send">["busyPolicy"];
}

/** History order; a streaming answer's `content` grows as its text arrives. */
export function messagesStore(follower: SessionFollower): ReadableAtom<Message[]> {
  return computed(follower.state, (s) => s?.messages.list ?? NO_MESSAGES);
}
const NO_MESSAGES: Message[] = [];

export interface MessageActions {
  /** Send now, or per the busy policy (queue, steer, interrupt, reject) while the model answers. */
  send(content: string, options?: SendOptions): Promise<Procedures["message.send"]["output"]>;
  /** System instructions for the session (`respond: false` only stores them). */
  addInstructions(instructions: string | string[], respond?: boolean): Promise<Procedures["message.addInstructions"]["output"]>;
}

export function messageActions(requests: Requests, sessionId: string): MessageActions {
  return {
    send: (content, { attachments, ...rest } = {}) =>
      requests.write("message.send", {
        sessionId, content, ...rest, ...(attachments?.length ? { attachments: wireAttachments(attachments) } : {}),
      }),
    addInstructions: (instructions, respond = true) =>
      requests.write("message.addInstructions", { sessionId, instructions, respond }),
  };
}
