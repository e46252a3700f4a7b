/**
 * A whole session as a file and back: `GET /sessions/{id}/export` (JSON to import again, or Markdown to read)
 * and `POST /sessions/import` (a JSON export becomes a new session of the caller's). Plain `fetch` with the
 * bearer token, as for files: an export is a download, and an import may be larger than a tRPC call.
 *
 * An import carries an `Idempotency-Key`, so one that got no answer is sent again with the same key and the
 * server imports it once.
 */
import { FileRequestError, failure, type FilesOptions } from "./files.js";
import { DEFAULT_RETRY, retryDelay } from "./options.js";
import { newClientRequestId } from "./requests.js";
import type { Session } from "./router.gen.js";

export type ExportFormat = "json" | "markdown";

export interface Transcripts {
  /** The session as a file: JSON (re-importable) or Markdown. Rejects with a {@link FileRequestError}. */
  export(sessionId: string, format?: ExportFormat): Promise<Blob>;
  /** A JSON export (its text or a file) as a new session; `BAD_REQUEST` when it is not one. */
  import(body: Blob | string, options?: { requestId?: string }): Promise<Session>;
}

/** `http://host:port` (or `.../trpc`) → `http://host:port/sessions`. */
export function sessionsEndpoint(url: string): string {
  return `${url.replace(/\/+$/, "").replace(/\/trpc$/, "")}/sessions`;
}

export function createTranscripts(options: FilesOptions): Transcripts {
  const endpoint = sessionsEndpoint(options.url);
  const retry = { ...DEFAULT_RETRY, ...options.retry };
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const auth = { Authorization: `Bearer ${options.token}` };

  /** `fetch`, sent again while no answer comes (both calls are safe to repeat). */
  async function request(url: string, init: RequestInit): Promise<Response> {
    const doFetch = options.fetch ?? globalThis.fetch;
    for (let n = 1; ; n++) {
      let res: Response;
      try {
        res = await doFetch(url, init);
      } catch (err) {
        if (n >= retry.attempts) throw new FileRequestError(String((err as Error)?.message ?? err), 0, "NO_ANSWER");
        await sleep(retryDelay(retry, n));
        continue;
      }
      if (!res.ok) throw await failure(res);
      return res;
    }
  }

  return {
    async export(sessionId, format = "json") {
      const url = `${endpoint}/${encodeURIComponent(sessionId)}/export?format=${format}`;
      return (await request(url, { headers: auth })).blob();
    },
    async import(body, opts = {}) {
      const headers = { ...auth, "Content-Type": "application/json", "Idempotency-Key": opts.requestId ?? newClientRequestId() };
      const res = await request(`${endpoint}/import`, { method: "POST", headers, body });
      return (await res.json()) as Session;
    },
  };
}
