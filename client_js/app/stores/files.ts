// Bytes of uploaded files, fetched with the token (`GET /files/{id}`): the server wants the Authorization
// header, so an <img> cannot load them by URL. A few recent ones are kept, so a history re-rendered or opened
// on a second tab does not fetch every thumbnail again; each view makes (and revokes) its own blob: URL.
import { $client } from "./auth";

const KEEP = 64;
const blobs = new Map<string, Promise<Blob>>();

/** The file's bytes (shared by every view of it while it is among the last few fetched). */
export function fileBlob(fileId: string): Promise<Blob> {
  const hit = blobs.get(fileId);
  if (hit) {
    blobs.delete(fileId);
    blobs.set(fileId, hit); // most recent last
    return hit;
  }
  const client = $client.get();
  if (!client) return Promise.reject(new Error("not signed in"));
  const fetched = client.files.download(fileId);
  blobs.set(fileId, fetched);
  fetched.catch(() => blobs.delete(fileId)); // a failure is not kept: the next view tries again
  while (blobs.size > KEEP) blobs.delete(blobs.keys().next().value!);
  return fetched;
}

/** Saves a file under its name: a blob: URL on a temporary link, revoked once the browser has it. */
export async function saveFile(fileId: string, name: string): Promise<void> {
  const url = URL.createObjectURL(await fileBlob(fileId));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
