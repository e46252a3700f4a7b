/**
 * Options of {@link createChatsyncClient}, with their defaults exported so an app can show or tweak them.
 */

/** Which wire the client uses. */
export type Transport = "ws" | "sse";

/** How writes are retried after the connection dropped before they were answered. */
export interface RetryOptions {
  /**
   * Attempts in all, the first included. A write that still has no answer then fails.
   * @default 8
   */
  attempts: number;
  /**
   * Delay before the second attempt; it doubles for every further one.
   * @default 250
   */
  baseDelayMs: number;
  /**
   * The longest delay between two attempts.
   * @default 5000
   */
  maxDelayMs: number;
}

/** The WebSocket keep-alive of `@trpc/client`: a `PING` after silence, a reconnect without `PONG`. */
export interface KeepAliveOptions {
  /**
   * Send `PING` after this long without a frame from the server.
   * @default 5000
   */
  intervalMs: number;
  /**
   * Reconnect when no `PONG` arrives within this long.
   * @default 2000
   */
  pongTimeoutMs: number;
}

export interface ChatsyncOptions {
  /** The server, e.g. `http://127.0.0.1:8787` (`/trpc` is added; `ws:` for the WebSocket is derived). */
  url: string;
  /** A bearer token (`chatsync users create`, or from a device link). */
  token: string;
  /**
   * `ws`: one WebSocket for everything (`wsLink`). `sse`: subscriptions as server-sent events
   * (`httpSubscriptionLink`), calls as batched HTTP requests (`httpBatchLink`), for networks that block
   * WebSockets.
   * @default "ws"
   */
  transport?: Transport;
  /** @default {@link DEFAULT_KEEP_ALIVE} */
  keepAlive?: Partial<KeepAliveOptions>;
  /** @default {@link DEFAULT_RETRY} */
  retry?: Partial<RetryOptions>;
  /**
   * Delay before the n-th reconnect of the WebSocket (n from 0).
   * @default {@link reconnectDelayMs}
   */
  reconnectDelayMs?: (attempt: number) => number;
  /** A `WebSocket` class, for runtimes without a global one (Node < 22: the `ws` package). */
  WebSocket?: unknown;
  /** An `EventSource` class, for runtimes without a global one (Node: the `eventsource` package). */
  EventSource?: unknown;
  /** A `fetch` function, for tests and runtimes without a global one. */
  fetch?: typeof fetch;
}

/** Keep-alive defaults: a dead connection is noticed within about seven seconds of silence. */
export const DEFAULT_KEEP_ALIVE: Readonly<KeepAliveOptions> = Object.freeze({ intervalMs: 5000, pongTimeoutMs: 2000 });

/** Write-retry defaults: about 20 s of attempts in all before a write is given up. */
export const DEFAULT_RETRY: Readonly<RetryOptions> = Object.freeze({ attempts: 8, baseDelayMs: 250, maxDelayMs: 5000 });

/** The default transport. */
export const DEFAULT_TRANSPORT: Transport = "ws";

/**
 * The default reconnect delay: at once the first time (a dropped socket usually comes straight back), then
 * 0.5 s doubling up to 10 s, so a server that restarts is found quickly without a storm of attempts.
 */
export function reconnectDelayMs(attempt: number): number {
  return attempt === 0 ? 0 : Math.min(500 * 2 ** (attempt - 1), 10_000);
}

/** The delay before write attempt `attempt` (counted from 1 for the first retry). */
export function retryDelay(retry: RetryOptions, attempt: number): number {
  return Math.min(retry.baseDelayMs * 2 ** (attempt - 1), retry.maxDelayMs);
}

/** `http://host:port` → the tRPC HTTP endpoint and the WebSocket URL. */
export function endpoints(url: string): { http: string; ws: string } {
  const base = url.replace(/\/+$/, "").replace(/\/trpc$/, "");
  return { http: `${base}/trpc`, ws: `${base.replace(/^http/, "ws")}/trpc` };
}
