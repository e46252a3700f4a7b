/**
 * `createChatsyncClient`: the connection, typed calls, the live session list and open sessions, in one object.
 */
import type { TRPCClient } from "@trpc/client";
import type { ReadableAtom } from "nanostores";
import { signedOutCodeOf } from "./closeCodes.js";
import { createConnection, type ConnectionState } from "./connection.js";
import { createFiles, type Files } from "./files.js";
import type { ChatsyncOptions } from "./options.js";
import { createRequests, isNoAnswer, type Requests, type WriteInput } from "./requests.js";
import type { AppRouter, Procedures } from "./router.gen.js";
import { openSession, type FollowOptions, type OpenSession } from "./stores/session.js";
import { watchSessions, type SessionList, type SessionListOptions } from "./stores/sessions.js";
import { createTranscripts, type Transcripts } from "./transcripts.js";

export interface ChatsyncClient {
  /** `connecting | connected | reconnecting | resumed | signed-out | closed`. */
  readonly connection: ReadableAtom<ConnectionState>;
  /** The close code of the last WebSocket the server closed (4501 token rejected, 4503 revoked...). */
  readonly closeCode: ReadableAtom<number | null>;
  /** The typed `@trpc/client` for anything not wrapped here: `trpc.auth.me.query()`. */
  readonly trpc: TRPCClient<AppRouter>;
  /** Calls by path, with the retry rules of writes. */
  readonly requests: Requests;
  /** Upload a file to attach it (`{fileId}`), and fetch one back: `POST /files`, `GET /files/{id}`. */
  readonly files: Files;
  /** A session out as a file and back in: `GET /sessions/{id}/export`, `POST /sessions/import`. */
  readonly transcripts: Transcripts;
  /** Follow the session list (call once; `close()` it when done). */
  watchSessions(options?: SessionListOptions): SessionList;
  /** Follow one session: stores plus actions. */
  openSession(sessionId: string, options?: FollowOptions): OpenSession;
  /** `session.create` as a deduplicated write (retried after a drop without creating two). */
  createSession(input?: WriteInput<"session.create">): Promise<Procedures["session.create"]["output"]>;
  /** Close the connection; every follower stops with status `closed`. */
  close(): Promise<void>;
}

export function createChatsyncClient(options: ChatsyncOptions): ChatsyncClient {
  const connection = createConnection(options);
  const requests = createRequests({
    async call(kind, path, input) {
      try {
        const result = await (kind === "query" ? connection.untyped.query(path, input) : connection.untyped.mutation(path, input));
        // Over SSE there is no socket to watch: an answered call is what says the server is reachable.
        connection.reportLinkState({ state: "pending" });
        return result;
      } catch (err) {
        if (isNoAnswer(err)) connection.reportLinkState({ state: "connecting", error: err });
        else connection.reportLinkState({ state: "pending" });
        throw err;
      }
    },
    ...(options.retry ? { retry: options.retry } : {}),
    isFinal: connection.isFinal,
    onUnauthorized: (err) => connection.signOut(signedOutCodeOf(err)),
  });
  // With SSE every subscription is its own stream: closing the client must end them one by one.
  const followers = new Set<{ close(): void }>();
  const track = <T extends { close(): void }>(f: T): T => {
    followers.add(f);
    const close = f.close.bind(f);
    f.close = () => {
      followers.delete(f);
      close();
    };
    return f;
  };
  const http = {
    url: options.url, token: options.token,
    ...(options.fetch ? { fetch: options.fetch } : {}), ...(options.retry ? { retry: options.retry } : {}),
  };
  return {
    connection: connection.state,
    closeCode: connection.closeCode,
    trpc: connection.trpc,
    requests,
    files: createFiles(http),
    transcripts: createTranscripts(http),
    watchSessions: (o) => track(watchSessions(connection, requests, o)),
    openSession: (id, o) => track(openSession(connection, requests, id, o)),
    createSession: (input = {}) => requests.write("session.create", input),
    async close() {
      await connection.close();
      for (const f of [...followers]) f.close();
    },
  };
}
