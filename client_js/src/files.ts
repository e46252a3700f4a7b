/**
 * Files: upload one (`POST /files`, multipart, the bearer token) to attach it to a message by its id, and
 * fetch one back (`GET /files/{id}`) to show or save it. Plain `fetch`, outside tRPC: a file is bytes, not
 * JSON, and the server streams it to storage.
 *
 * An attachment on `send`, `enqueue` and `updateQueued` is `{fileId}` (an uploaded file) or a path reference
 * to a file on the server's own machine. Messages and queued messages show an uploaded file as
 * `{fileId, name, mediaType, size}` ({@link FileAttachmentInfo}).
 */
import { DEFAULT_RETRY, retryDelay, type RetryOptions } from "./options.js";
import type { WriteInput } from "./requests.js";

/** What `POST /files` answers: the stored file. */
export interface UploadedFile {
  id: string;
  name: string;
  /** Decided by the server from the bytes, not from what the client claimed. */
  mediaType: string;
  size: number;
  sha256: string;
}

/** An uploaded file as messages, queued messages and their events show it. */
export interface FileAttachmentInfo {
  fileId: string;
  name: string;
  mediaType: string;
  size: number;
}

type WireAttachment = NonNullable<WriteInput<"message.send">["attachments"]>[number];

/**
 * What the actions take as an attachment: `{fileId}` (with, optionally, what is known of the file, which a
 * pending queue item shows before the server confirms it), an {@link UploadedFile} as `upload` returned it,
 * or a path reference.
 */
export type AttachmentInput = WireAttachment | { fileId: string; name?: string; mediaType?: string; size?: number } | UploadedFile;

/** Why a file request failed: the HTTP status (0: no answer) and a tRPC-style code. */
export class FileRequestError extends Error {
  constructor(
    message: string,
    /** The HTTP status; 0 when no answer came (network down, aborted). */
    readonly status: number,
    /** `PAYLOAD_TOO_LARGE`, `UNAUTHORIZED`, `NOT_FOUND`, `BAD_REQUEST`..., `NO_ANSWER` when none came. */
    readonly code: string,
  ) {
    super(message);
    this.name = "FileRequestError";
  }
}

const CODES: Record<number, string> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  429: "TOO_MANY_REQUESTS",
};

export interface FilesOptions {
  /** The server, e.g. `http://127.0.0.1:8787`. */
  url: string;
  token: string;
  fetch?: typeof fetch;
  /** Uploads and downloads that got no answer are tried again, as idempotent calls are. */
  retry?: Partial<RetryOptions>;
  sleep?: (ms: number) => Promise<void>;
}

export interface FileRequestOptions {
  signal?: AbortSignal;
}

export interface Files {
  /**
   * Upload a `File` or `Blob` (its name: the `File`'s, else `options.name`, else `file`). Rejects with a
   * {@link FileRequestError}: `PAYLOAD_TOO_LARGE` (413, with the server's message) past a limit,
   * `UNAUTHORIZED` (401) for a refused token. An upload that got no answer is sent again: one cut off midway
   * left nothing on the server, and one whose answer was lost left a file no message uses, which the server
   * collects (identical bytes are stored once per user either way). One answered 429 (the user has as many
   * uploads under way as the server allows at once) waits as `Retry-After` says and is sent again, for up to
   * {@link BUSY_WAIT_MS} in all.
   */
  upload(file: Blob, options?: FileRequestOptions & { name?: string }): Promise<UploadedFile>;
  /** The bytes of an uploaded file of this user (`NOT_FOUND` for anyone else's). */
  download(fileId: string, options?: FileRequestOptions): Promise<Blob>;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** How long a request waits in all while the server answers 429 before that answer is the error. */
const BUSY_WAIT_MS = 5 * 60_000;

/** The answer's `Retry-After` (seconds) in milliseconds: 1 s when absent, within 0.25-30 s. */
function retryAfterMs(res: Response): number {
  const seconds = Number(res.headers.get("retry-after") ?? "1");
  return Math.min(Math.max(Number.isFinite(seconds) ? seconds * 1000 : 1000, 250), 30_000);
}

/** `http://host:port` (or `.../trpc`) → `http://host:port/files`. */
export function filesEndpoint(url: string): string {
  return `${url.replace(/\/+$/, "").replace(/\/trpc$/, "")}/files`;
}

export async function failure(res: Response): Promise<FileRequestError> {
  let body: { error?: { code?: unknown; message?: unknown } } | null = null;
  try {
    body = await res.json();
  } catch {
    // not JSON: the status says enough
  }
  const code = typeof body?.error?.code === "string" ? body.error.code : CODES[res.status] ?? `HTTP_${res.status}`;
  const message = typeof body?.error?.message === "string" ? body.error.message : `${res.status} ${res.statusText}`.trim();
  return new FileRequestError(message, res.status, code);
}

export function createFiles(options: FilesOptions): Files {
  const endpoint = filesEndpoint(options.url);
  const retry = { ...DEFAULT_RETRY, ...options.retry };
  const sleep = options.sleep ?? defaultSleep;
  const auth = { Authorization: `Bearer ${options.token}` };

  async function request(url: string, init: () => RequestInit, signal?: AbortSignal): Promise<Response> {
    const doFetch = options.fetch ?? globalThis.fetch;
    let waited = 0;
    for (let n = 1; ; ) {
      let res: Response;
      try {
        res = await doFetch(url, { ...init(), ...(signal ? { signal } : {}) });
      } catch (err) {
        // No answer: the request may or may not have reached the server; both calls are safe to repeat.
        if (signal?.aborted || n >= retry.attempts) {
          throw new FileRequestError(signal?.aborted ? "the request was aborted" : String((err as Error)?.message ?? err), 0, "NO_ANSWER");
        }
        await sleep(retryDelay(retry, n++));
        continue;
      }
      // 429: the user's other uploads fill what the server lets run at once (or the rate limit): nothing was
      // stored, so wait as told and send it again.
      if (res.status === 429 && waited < BUSY_WAIT_MS && !signal?.aborted) {
        const ms = retryAfterMs(res);
        await res.body?.cancel();
        waited += ms;
        await sleep(ms);
        continue;
      }
      if (!res.ok) throw await failure(res);
      return res;
    }
  }

  return {
    async upload(file, opts = {}) {
      const name = (file as File).name || opts.name || "file";
      const res = await request(endpoint, () => {
        const form = new FormData();
        form.append("file", file, name);
        return { method: "POST", headers: auth, body: form };
      }, opts.signal);
      return (await res.json()) as UploadedFile;
    },
    async download(fileId, opts = {}) {
      const res = await request(`${endpoint}/${encodeURIComponent(fileId)}`, () => ({ headers: auth }), opts.signal);
      return res.blob();
    },
  };
}

/** The attachment an uploaded file makes, as messages show it. */
export function attachmentOf(file: UploadedFile): FileAttachmentInfo {
  return { fileId: file.id, name: file.name, mediaType: file.mediaType, size: file.size };
}

function isUploaded(a: AttachmentInput): a is UploadedFile {
  return "sha256" in a && "id" in a;
}

/** What the server is sent: `{fileId}` for an uploaded file (nothing else of it), path references as given. */
export function wireAttachments(list: readonly AttachmentInput[]): WireAttachment[] {
  return list.map((a) => {
    if (isUploaded(a)) return { fileId: a.id };
    if ("fileId" in a) return { fileId: a.fileId };
    return a;
  });
}

/** What a pending queue item shows of its attachments before the server has them. */
export function shownAttachments(list: readonly AttachmentInput[]): Record<string, unknown>[] {
  return list.map((a) => (isUploaded(a) ? attachmentOf(a) : { ...a }));
}

/** The uploaded files among a message's or queued message's attachments (path references left out). */
export function fileAttachments(list: readonly Record<string, unknown>[] | null | undefined): FileAttachmentInfo[] {
  const out: FileAttachmentInfo[] = [];
  for (const a of list ?? []) {
    if (typeof a.fileId !== "string") continue;
    out.push({
      fileId: a.fileId,
      name: typeof a.name === "string" ? a.name : "file",
      mediaType: typeof a.mediaType === "string" ? a.mediaType : "application/octet-stream",
      size: typeof a.size === "number" ? a.size : 0,
    });
  }
  return out;
}

/** A size as people read it: `812 B`, `9.4 KB`, `14 KB`, `3.1 MB` (powers of 1,000, as file managers show them). */
export function formatSize(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let v = bytes / 1000;
  let i = 0;
  while (v >= 999.95 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}
