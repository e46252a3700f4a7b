// Bytes of uploaded files, fetched with the token (`GET /files/{id}`): the server wants the Authorization
// header, so an <img> cannot load them by URL. Recent ones are kept up to a byte budget, so a history drawn
// again does not fetch every thumbnail again; each view makes (and revokes) its own blob: URL.
import { $client } from "./auth";

/** Kept blobs, in bytes; the newest is kept even when it alone is larger. */
export const KEEP_BYTES = 32 * 1024 * 1024;

const blobs = new Map<string, { blob: Promise<Blob>; size: number }>();

function trim(): void {
  let total = 0;
  for (const { size } of blobs.values()) total += size;
  for (const [id, { size }] of blobs) {
    if (total <= KEEP_BYTES || blobs.size === 1) break;
    blobs.delete(id); // oldest first
    total -= size;
  }
}

/** The file's bytes (shared by every view of it while it is kept). */
export function fileBlob(fileId: string): Promise<Blob> {
  const hit = blobs.get(fileId);
  if (hit) {
    blobs.delete(fileId);
    blobs.set(fileId, hit); // most recent last
    return hit.blob;
  }
  const client = $client.get();
  if (!client) return Promise.reject(new Error("not signed in"));
  const entry = { blob: client.files.download(fileId), size: 0 };
  blobs.set(fileId, entry);
  entry.blob.then((b) => {
    entry.size = b.size;
    trim();
  }, () => {
    if (blobs.get(fileId) === entry) blobs.delete(fileId); // a failure is not kept: the next view tries again
  });
  return entry.blob;
}

/** Saves a file under its name. */
export async function saveFile(fileId: string, name: string): Promise<void> {
  saveBlob(await fileBlob(fileId), name);
}

/** Hands bytes to the browser to save: a blob: URL on a temporary link, revoked once the browser has it. */
export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
