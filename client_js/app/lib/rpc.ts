// The app's one connection to the server: the official @trpc/client over a WebSocket (wsLink), the token in
// connectionParams — never in a URL, so it reaches no access log. Every query, mutation and subscription
// shares this socket; @trpc/client reconnects it and resubscribes tracked subscriptions with their last id.
import { createTRPCUntypedClient, createWSClient, wsLink, type TRPCClientError } from "@trpc/client";

export type ConnectionState = "connecting" | "connected" | "reconnecting" | "resumed";

/** Close codes 4500-4999: the server refused this token (4501 rejected, 4503 revoked); retrying is pointless. */
export const isRefusedCloseCode = (code?: number) => code !== undefined && code >= 4500 && code <= 4999;

export interface RpcHandlers {
  onState(state: ConnectionState): void;
  onRefused(code: number): void;
}

export interface Rpc {
  query<T = unknown>(path: string, input?: unknown): Promise<T>;
  mutate<T = unknown>(path: string, input?: unknown): Promise<T>;
  subscribe<T = unknown>(path: string, input: unknown, handlers: {
    onData(value: T): void; onError?(err: TRPCClientError<any>): void; onStarted?(): void;
  }): { unsubscribe(): void };
  close(): void;
}

/** The first retry is quick (a blip), later ones back off to 10 s, with jitter so tabs do not retry in step. */
export const retryDelayMs = (attempt: number) => Math.min(10_000, 250 * 2 ** attempt) * (0.75 + Math.random() / 2);

export function socketUrl(loc: Location = location): string {
  return `${loc.protocol === "https:" ? "wss:" : "ws:"}//${loc.host}/trpc`;
}

export function connect(token: string, handlers: RpcHandlers): Rpc {
  let everOpen = false;
  let closed = false;
  handlers.onState("connecting");
  const ws = createWSClient({
    url: socketUrl(),
    connectionParams: () => ({ token }),
    retryDelayMs,
    keepAlive: { enabled: true, intervalMs: 20_000, pongTimeoutMs: 10_000 },
    onOpen() {
      handlers.onState(everOpen ? "resumed" : "connected");
      everOpen = true;
    },
    onClose(cause) {
      if (closed) return;
      if (isRefusedCloseCode(cause?.code)) {
        handlers.onRefused(cause!.code!);
        return;
      }
      handlers.onState(everOpen ? "reconnecting" : "connecting");
    },
  });
  const client = createTRPCUntypedClient({ links: [wsLink({ client: ws })] });
  return {
    query: (path, input) => client.query(path, input) as Promise<any>,
    mutate: (path, input) => client.mutation(path, input) as Promise<any>,
    subscribe: (path, input, h) => client.subscription(path, input, {
      onData: h.onData as (v: unknown) => void,
      onError: h.onError,
      onStarted: h.onStarted,
    }),
    close() {
      closed = true;
      ws.close();
    },
  };
}

export function errorCode(err: unknown): string | undefined {
  const data = (err as { data?: { code?: string } } | null)?.data;
  return data?.code;
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
