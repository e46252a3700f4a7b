/**
 * The wire: `@trpc/client`'s links over one WebSocket (`wsLink`), or server-sent events plus batched HTTP
 * (`httpSubscriptionLink` + `httpBatchLink`), and the connection state as a store.
 *
 * States: `connecting` (never connected yet), `connected`, `reconnecting` (the connection dropped; calls wait
 * and subscriptions resume by themselves), `resumed` (back after a drop), `signed-out` (the token was rejected
 * or revoked: close codes 4501/4503, or `UNAUTHORIZED`), `closed` (closed by the app, or a close code in
 * 4500-4999 that is not about the token). After `signed-out` and `closed` nothing reconnects.
 */
import {
  createTRPCClient,
  createWSClient,
  getUntypedClient,
  httpBatchLink,
  httpSubscriptionLink,
  splitLink,
  wsLink,
  type TRPCClient,
  type TRPCLink,
  type TRPCUntypedClient,
} from "@trpc/client";
import { atom, type ReadableAtom } from "nanostores";
import { isFinalCloseCode, isSignedOutCode } from "./closeCodes.js";
import {
  DEFAULT_KEEP_ALIVE,
  DEFAULT_TRANSPORT,
  endpoints,
  reconnectDelayMs,
  type ChatsyncOptions,
  type Transport,
} from "./options.js";
import type { AppRouter } from "./router.gen.js";

export type ConnectionState = "connecting" | "connected" | "reconnecting" | "resumed" | "signed-out" | "closed";

/** What a subscription's `onConnectionStateChange` reports. */
export type LinkState = { state: "idle" | "connecting" | "pending"; error?: unknown };

export interface Connection {
  readonly transport: Transport;
  /** The typed `@trpc/client` proxy: `trpc.session.get.query({sessionId})`. */
  readonly trpc: TRPCClient<AppRouter>;
  /** The same client by path, for code that picks the procedure at run time. */
  readonly untyped: TRPCUntypedClient<AppRouter>;
  readonly state: ReadableAtom<ConnectionState>;
  /** The close code of the last WebSocket the server closed, if any. */
  readonly closeCode: ReadableAtom<number | null>;
  /** True once nothing will reconnect (`signed-out` or `closed`). */
  isFinal(): boolean;
  /** Subscriptions pass their link state here: with SSE there is no shared socket to watch. */
  reportLinkState(state: LinkState): void;
  /** The server refused the token: stop for good. */
  signOut(code?: number): void;
  close(): Promise<void>;
}

export function createConnection(options: ChatsyncOptions): Connection {
  const transport = options.transport ?? DEFAULT_TRANSPORT;
  const urls = endpoints(options.url);
  const $state = atom<ConnectionState>("connecting");
  const $closeCode = atom<number | null>(null);
  let everUp = false;
  let dropped = false;
  let closeSocket: (() => Promise<void>) | null = null;

  const isFinal = () => $state.get() === "signed-out" || $state.get() === "closed";
  const up = () => {
    if (isFinal()) return;
    $state.set(dropped ? "resumed" : "connected");
    everUp = true;
    dropped = false;
  };
  const down = () => {
    if (isFinal()) return;
    if (everUp) {
      dropped = true;
      $state.set("reconnecting");
    } else $state.set("connecting");
  };
  const finish = (state: "signed-out" | "closed") => {
    if (isFinal()) return;
    $state.set(state);
    void closeSocket?.();
  };

  let links: TRPCLink<AppRouter>[];
  if (transport === "ws") {
    const keepAlive = { ...DEFAULT_KEEP_ALIVE, ...options.keepAlive };
    const wsClient = createWSClient({
      url: urls.ws,
      ...(options.WebSocket ? { WebSocket: options.WebSocket as typeof WebSocket } : {}),
      connectionParams: { token: options.token },
      keepAlive: { enabled: true, intervalMs: keepAlive.intervalMs, pongTimeoutMs: keepAlive.pongTimeoutMs },
      retryDelayMs: options.reconnectDelayMs ?? reconnectDelayMs,
      onClose(cause) {
        const code = cause?.code;
        if (code !== undefined && code >= 4000) $closeCode.set(code);
        // Runs before the client schedules its reconnect, so closing here means it never does.
        if (isFinalCloseCode(code)) finish(isSignedOutCode(code) ? "signed-out" : "closed");
      },
    });
    closeSocket = () => wsClient.close();
    wsClient.connectionState.subscribe({
      next(s) {
        if (s.state === "pending") up();
        else if (s.state === "connecting") down();
      },
    });
    links = [wsLink<AppRouter>({ client: wsClient })];
  } else {
    const fetchFn = options.fetch;
    links = [
      splitLink<AppRouter>({
        condition: (op) => op.type === "subscription",
        true: httpSubscriptionLink<AppRouter, typeof EventSource>({
          url: urls.http,
          connectionParams: { token: options.token },
          ...(options.EventSource ? { EventSource: options.EventSource as typeof EventSource } : {}),
        }),
        false: httpBatchLink<AppRouter>({
          url: urls.http,
          headers: { authorization: `Bearer ${options.token}` },
          ...(fetchFn ? { fetch: fetchFn } : {}),
        }),
      }),
    ];
  }

  const trpc = createTRPCClient<AppRouter>({ links });
  return {
    transport,
    trpc,
    untyped: getUntypedClient(trpc),
    state: $state,
    closeCode: $closeCode,
    isFinal,
    reportLinkState(s) {
      // The WebSocket client's own state is the better signal; SSE has only this one.
      if (transport !== "sse") return;
      if (s.state === "pending") up();
      else if (s.state === "connecting" && s.error) down();
    },
    signOut(code) {
      if (code !== undefined) $closeCode.set(code);
      finish("signed-out");
    },
    async close() {
      finish("closed");
    },
  };
}
