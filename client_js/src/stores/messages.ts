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

export interface EditOptions {
  /** The new version's files (default: those of the message edited). */
  attachments?: readonly AttachmentInput[];
  busyPolicy?: WriteInput<"message.edit">["busyPolicy"];
}

export interface RegenerateOptions {
  /** Any message of the answer (default: the last answer of the active path). */
  messageId?: string;
  provider?: string;
  model?: string;
  busyPolicy?: WriteInput<"run.regenerate">["busyPolicy"];
}

export interface MessageActions {
  /** Send now, or per the busy policy (queue, steer, interrupt, reject) while the model answers. */
  send(content: string, options?: SendOptions): Promise<Procedures["message.send"]["output"]>;
  /** System instructions for the session (`respond: false` only stores them). */
  addInstructions(instructions: string | string[], respond?: boolean): Promise<Procedures["message.addInstructions"]["output"]>;
  /** A new version of a user message, made active and answered. */
  edit(messageId: string, content: string, options?: EditOptions): Promise<Procedures["message.edit"]["output"]>;
  /** A new version of an answer, by the session's model or the one given. */
  regenerate(options?: RegenerateOptions): Promise<Procedures["run.regenerate"]["output"]>;
  /** The last answer, stopped at the length limit, goes on in the same message. */
  continueAnswer(): Promise<Procedures["run.continue"]["output"]>;
  /** The path through `messageId` becomes the active one (every device follows, from the events). */
  switchBranch(messageId: string): Promise<Procedures["session.switchBranch"]["output"]>;
  /** A new session whose history is the path up to `messageId`. */
  fork(messageId: string, title?: string): Promise<Procedures["session.fork"]["output"]>;
}

export function messageActions(requests: Requests, sessionId: string): MessageActions {
  return {
    send: (content, { attachments, ...rest } = {}) =>
      requests.write("message.send", {
        sessionId, content, ...rest, ...(attachments?.length ? { attachments: wireAttachments(attachments) } : {}),
      }),
    addInstructions: (instructions, respond = true) =>
      requests.write("message.addInstructions", { sessionId, instructions, respond }),
    edit: (messageId, content, { attachments, ...rest } = {}) =>
      requests.write("message.edit", {
        sessionId, messageId, content, ...rest, ...(attachments ? { attachments: wireAttachments(attachments) } : {}),
      }),
    regenerate: (options = {}) => requests.write("run.regenerate", { sessionId, ...options }),
    continueAnswer: () => requests.write("run.continue", { sessionId }),
    switchBranch: (messageId) => requests.write("session.switchBranch", { sessionId, messageId }),
    fork: (messageId, title) =>
      requests.write("session.fork", { sessionId, messageId, ...(title !== undefined ? { title } : {}) }),
  };
}
