// Files the person is about to send: picked, dropped or pasted into the composer. Each uploads at once (its
// chip shows it uploading, ready, or the server's reason for refusing it) and goes with the next message
// as `{fileId}`. A message is sent only when every chip is ready, so what is sent is what the chips show.
// An upload that got no answer (the server down, the network gone) says so, offers "Retry", and is sent again
// by itself once the connection is back.
import { atom } from "nanostores";
import { $client, $connection } from "./auth";
import { announce } from "./announcer";
import { errorMessage, FileRequestError, type UploadedFile } from "../lib/chatsync";

/** The server takes at most this many attachments on one message. */
export const MAX_ATTACHMENTS = 32;

export interface PendingFile {
  key: string;
  name: string;
  size: number;
  /** What the browser says the file is (for the chip only; the server decides from the bytes). */
  type: string;
  state: "uploading" | "ready" | "failed";
  error: string | null;
  /** Failed for want of an answer (not refused by the server): worth sending again. */
  retryable: boolean;
  uploaded: UploadedFile | null;
}

export const $pending = atom<readonly PendingFile[]>([]);

const uploads = new Map<string, AbortController>();
/** The chosen files by chip, kept until the chip goes, to send again after an outage. */
const sources = new Map<string, File>();
const OFFLINE = "No connection to the server: not uploaded yet. It is sent again when the connection is back.";
let counter = 0;

function patch(key: string, change: Partial<PendingFile>): void {
  $pending.set($pending.get().map((p) => (p.key === key ? { ...p, ...change } : p)));
}

async function upload(key: string, file: File): Promise<void> {
  const client = $client.get();
  const abort = new AbortController();
  uploads.set(key, abort);
  try {
    if (!client) throw new Error("not signed in");
    const uploaded = await client.files.upload(file, { signal: abort.signal });
    if (!abort.signal.aborted) patch(key, { state: "ready", uploaded, size: uploaded.size });
  } catch (err) {
    if (abort.signal.aborted) return; // removed while uploading: nothing to say
    const retryable = err instanceof FileRequestError && err.code === "NO_ANSWER";
    const error = retryable ? OFFLINE : errorMessage(err);
    patch(key, { state: "failed", error, retryable });
    announce(`${file.name} was not attached: ${error}`);
  } finally {
    uploads.delete(key);
  }
}

/** Adds files (picked, dropped, pasted) and starts uploading each. */
export function addFiles(files: Iterable<File>): void {
  const room = MAX_ATTACHMENTS - $pending.get().length;
  const list = [...files];
  if (list.length > room) announce(`A message takes at most ${MAX_ATTACHMENTS} files; ${list.length - Math.max(room, 0)} left out.`);
  const added = list.slice(0, Math.max(room, 0)).map((file): [PendingFile, File] => [{
    key: `f${++counter}`, name: file.name || "file", size: file.size, type: file.type, state: "uploading", error: null,
    retryable: false, uploaded: null,
  }, file]);
  if (!added.length) return;
  $pending.set([...$pending.get(), ...added.map(([p]) => p)]);
  for (const [p, file] of added) {
    sources.set(p.key, file);
    void upload(p.key, file);
  }
}

/** Sends a file that got no answer again ("Retry"). */
export function retryUpload(key: string): void {
  const file = sources.get(key);
  const chip = $pending.get().find((p) => p.key === key);
  if (!file || !chip || chip.state !== "failed" || uploads.has(key)) return;
  patch(key, { state: "uploading", error: null, retryable: false });
  void upload(key, file);
}

// The connection is back: what failed for want of an answer goes again.
$connection.listen((state) => {
  if (state !== "connected" && state !== "resumed") return;
  for (const p of $pending.get()) if (p.state === "failed" && p.retryable) retryUpload(p.key);
});

/** Takes a chip away (an upload in progress is cancelled). */
export function removePending(key: string): void {
  uploads.get(key)?.abort();
  sources.delete(key);
  $pending.set($pending.get().filter((p) => p.key !== key));
}

/**
 * The files to send with the message, taken out of the composer; null (and an announcement) while one is
 * still uploading or failed.
 */
export function takeReady(): PendingFile[] | null {
  const pending = $pending.get();
  if (pending.some((p) => p.state === "uploading")) {
    announce("Wait until the files have uploaded.");
    return null;
  }
  if (pending.some((p) => p.state === "failed" && p.retryable)) {
    announce("Some files are not uploaded yet (no connection): press Retry, or wait for the connection.");
    return null;
  }
  if (pending.some((p) => p.state === "failed")) {
    announce("Remove the files that could not be attached first.");
    return null;
  }
  for (const p of pending) sources.delete(p.key);
  $pending.set([]);
  return [...pending];
}

/** Puts files back after their message could not be sent. */
export function restore(files: readonly PendingFile[]): void {
  const keys = new Set($pending.get().map((p) => p.key));
  $pending.set([...files.filter((f) => !keys.has(f.key)), ...$pending.get()]);
}
