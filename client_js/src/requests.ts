/**
 * Calls by path, typed from the generated {@link Procedures} map, and the write rule that keeps what a user
 * typed from being lost or doubled:
 *
 * A write (`message.send`, `message.enqueueMessage`, `message.addInstructions`, `session.create`, `message.edit`,
 * `run.regenerate`, `run.continue`, `session.switchBranch`, `session.fork`,
 * `tool.submitOutputs`, `tool.approve`) gets a fresh `clientRequestId`. When the connection drops before the
 * answer, the client cannot know whether the server applied it; it sends the same call again with the same
 * id, and the server answers a repeat with the first call's result without applying it twice. Other calls are
 * retried the same way when repeating them is harmless (reads, and changes that set a value).
 *
 * Only failures where no answer came (a closed socket, a failed fetch) are retried, a bounded number of
 * times with backoff. An error the server sent is final.
 */
import { TRPCClientError } from "@trpc/client";
import { DEFAULT_RETRY, retryDelay, type RetryOptions } from "./options.js";
import type { ProcedurePath, Procedures } from "./router.gen.js";

type PathsOf<K extends "query" | "mutation" | "subscription"> = {
  [P in ProcedurePath]: Procedures[P]["kind"] extends K ? P : never;
}[ProcedurePath];

export type QueryPath = PathsOf<"query">;
export type MutationPath = PathsOf<"mutation">;
export type SubscriptionPath = PathsOf<"subscription">;
export type InputOf<P extends ProcedurePath> = Procedures[P]["input"];
export type OutputOf<P extends ProcedurePath> = Procedures[P]["output"];

/** Writes the server deduplicates by `clientRequestId`. */
export const WRITE_PATHS = [
  "message.send",
  "message.enqueueMessage",
  "message.addInstructions",
  "session.create",
  "tool.submitOutputs",
  "tool.approve",
  "message.edit",
  "run.regenerate",
  "run.continue",
  "session.switchBranch",
  "session.fork",
] as const satisfies readonly MutationPath[];
export type WritePath = (typeof WRITE_PATHS)[number];
export type WriteInput<P extends WritePath> = Omit<NonNullable<InputOf<P>>, "clientRequestId">;

/**
 * Mutations that are safe to repeat without an id: the second call leaves the same state. A repeat of a
 * removal may find the thing already gone (`NOT_FOUND`): that repeat counts as done.
 */
const REPEATABLE = new Set<string>([
  "message.updateQueuedMessage",
  "message.moveQueuedMessage",
  "message.clearQueue",
  "message.pauseQueue",
  "message.resumeQueue",
  "message.removeQueuedMessage",
  "message.sendQueuedNow",
  "run.abort",
  "session.update",
  "session.setTitle",
  "session.clearTitle",
  "session.delete",
]);
const GONE_MEANS_DONE = new Set<string>(["message.removeQueuedMessage", "message.sendQueuedNow", "session.delete"]);

/** A new id for a write: random, so two tabs never collide. */
export function newClientRequestId(): string {
  const c = (globalThis as { crypto?: Crypto }).crypto;
  if (c && typeof c.randomUUID === "function") return c.randomUUID();
  // randomUUID exists only in secure contexts; a page served over plain http on a LAN address still has this.
  const bytes = new Uint8Array(16);
  c!.getRandomValues(bytes);
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** True when the call got no answer from the server (so it may or may not have been applied). */
export function isNoAnswer(err: unknown): boolean {
  return err instanceof TRPCClientError && !err.shape;
}

/** The tRPC error code of a server answer (`NOT_FOUND`, `CONFLICT`, ...), or null. */
export function errorCode(err: unknown): string | null {
  const data = (err as { data?: { code?: unknown } } | null)?.data;
  return typeof data?.code === "string" ? data.code : null;
}

/** Raised instead of retrying when the connection was signed out or closed. */
export class ConnectionClosedError extends Error {
  constructor(message = "the connection is closed") {
    super(message);
    this.name = "ConnectionClosedError";
  }
}

export type CallFn = (kind: "query" | "mutation", path: string, input: unknown) => Promise<unknown>;

export interface RequestsOptions {
  call: CallFn;
  retry?: Partial<RetryOptions>;
  /** True when retrying cannot help any more (signed out, closed). */
  isFinal?: () => boolean;
  /** Called with every `UNAUTHORIZED` answer. */
  onUnauthorized?: (err: unknown) => void;
  /** Waits `ms` (tests pass a fake clock). */
  sleep?: (ms: number) => Promise<void>;
}

export interface Requests {
  query<P extends QueryPath>(path: P, input: InputOf<P>): Promise<OutputOf<P>>;
  mutate<P extends MutationPath>(path: P, input: InputOf<P>): Promise<OutputOf<P>>;
  /** A deduplicated write; pass `clientRequestId` to choose it (e.g. to match an optimistic item). */
  write<P extends WritePath>(path: P, input: WriteInput<P>, clientRequestId?: string): Promise<OutputOf<P>>;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function createRequests(opts: RequestsOptions): Requests {
  const retry = { ...DEFAULT_RETRY, ...opts.retry };
  const sleep = opts.sleep ?? defaultSleep;

  async function attempt(kind: "query" | "mutation", path: string, input: unknown, repeatable: boolean) {
    for (let n = 1; ; n++) {
      if (opts.isFinal?.()) throw new ConnectionClosedError();
      try {
        return await opts.call(kind, path, input);
      } catch (err) {
        if (errorCode(err) === "UNAUTHORIZED") opts.onUnauthorized?.(err);
        if (n > 1 && errorCode(err) === "NOT_FOUND" && GONE_MEANS_DONE.has(path)) return null;
        if (!repeatable || !isNoAnswer(err) || n >= retry.attempts || opts.isFinal?.()) throw err;
        await sleep(retryDelay(retry, n));
      }
    }
  }

  return {
    query: (path, input) => attempt("query", path, input, true) as never,
    mutate: (path, input) => attempt("mutation", path, input, REPEATABLE.has(path)) as never,
    write: (path, input, clientRequestId = newClientRequestId()) =>
      attempt("mutation", path, { ...input, clientRequestId }, true) as never,
  };
}
