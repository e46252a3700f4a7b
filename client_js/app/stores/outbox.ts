// Messages on their way to the server. A message is written here (and to IndexedDB) before it is sent, shown at
// once, and kept until the server has answered for it, so one sent while the server is away survives a reload,
// even one made while the server is still away (the service worker keeps the app's shell). It is sent again,
// with the same clientRequestId, each time the connection comes back: the server applies it once.
import { atom, computed } from "nanostores";
import { $client, $connection, $token } from "./auth";
import {
  ConnectionClosedError, isNoAnswer, newClientRequestId, wireAttachments, type AttachmentInput,
} from "../lib/chatsync";

export interface Outgoing {
  clientRequestId: string;
  /** Whose it is (a digest of the signing-in token): another account signed in on this browser never sends it. */
  owner: string;
  sessionId: string;
  content: string;
  /** As the server takes them (`{fileId}` or a path reference). */
  attachments: ReturnType<typeof wireAttachments>;
  /** What the message shows of its files while it waits. */
  fileNames: string[];
  createdAt: number;
}

export type SendResult = { status: string };

const DB = "chatsync";
const STORE = "outbox";

export const $outbox = atom<readonly Outgoing[]>([]);
/** Whether messages wait on the connection (for "waiting for connection" as against "sending…"). */
export const $online = computed($connection, (c) => c === "connected" || c === "resumed");

let db: Promise<IDBDatabase | null> | null = null;

function open(): Promise<IDBDatabase | null> {
  if (!db) {
    db = new Promise((resolve) => {
      if (typeof indexedDB === "undefined") return resolve(null);
      const req = indexedDB.open(DB, 1);
      req.onupgradeneeded = () => req.result.createObjectStore(STORE, { keyPath: "clientRequestId" });
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => resolve(null); // private windows without storage: kept in memory only
    });
  }
  return db;
}

async function store(mode: IDBTransactionMode, act: (s: IDBObjectStore) => IDBRequest): Promise<unknown> {
  const d = await open();
  if (!d) return undefined;
  return new Promise((resolve, reject) => {
    const tx = d.transaction(STORE, mode);
    const req = act(tx.objectStore(STORE));
    tx.oncomplete = () => resolve(req.result);
    tx.onerror = () => reject(tx.error);
  });
}

function drop(clientRequestId: string): void {
  $outbox.set($outbox.get().filter((o) => o.clientRequestId !== clientRequestId));
  void store("readwrite", (s) => s.delete(clientRequestId)).catch(() => undefined);
}

const inFlight = new Set<string>();
const RETRY_MS = 5000;

/** Sends one message; resolves with the server's answer, or null when it waits for the connection (kept). A
 * refusal from the server is final: the message leaves the outbox and the error is thrown. */
async function deliver(item: Outgoing): Promise<SendResult | null> {
  const client = $client.get();
  if (!client || inFlight.has(item.clientRequestId)) return null;
  inFlight.add(item.clientRequestId);
  try {
    const input = {
      sessionId: item.sessionId, content: item.content,
      ...(item.attachments.length ? { attachments: item.attachments } : {}),
    };
    const res = await client.requests.write("message.send", input, item.clientRequestId);
    drop(item.clientRequestId);
    return res;
  } catch (err) {
    if (isNoAnswer(err) || err instanceof ConnectionClosedError) {
      // Given up while the connection looks up (it went down and up during the attempts): try again soon.
      if ($online.get()) setTimeout(() => void flush(), RETRY_MS);
      return null;
    }
    drop(item.clientRequestId);
    throw err;
  } finally {
    inFlight.delete(item.clientRequestId);
  }
}

/** A digest of the token, so the outbox knows whose each message is without keeping the token again. */
async function owner(): Promise<string> {
  const token = $token.get() ?? "";
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return token.slice(0, 8);
  const hash = new Uint8Array(await subtle.digest("SHA-256", new TextEncoder().encode(token)));
  return Array.from(hash.slice(0, 12), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Keeps the message (shown at once; written to IndexedDB alongside, never holding the send up), then sends it. */
export function sendMessage(sessionId: string, content: string,
                            files: readonly (AttachmentInput & { name?: string })[]): Promise<SendResult | null> {
  const item: Outgoing = {
    clientRequestId: newClientRequestId(), owner: "", sessionId, content, attachments: wireAttachments(files),
    fileNames: files.map((f) => f.name ?? "file"), createdAt: Date.now(),
  };
  $outbox.set([...$outbox.get(), item]);
  void owner().then((me) => {
    item.owner = me;
    // Already answered for (and dropped): nothing to keep. IndexedDB runs this put before any later delete.
    if ($outbox.get().some((o) => o.clientRequestId === item.clientRequestId)) {
      return store("readwrite", (s) => s.put(item));
    }
  }).catch(() => undefined);
  return deliver(item);
}

/** Sends what waits, oldest first, one at a time (so they arrive in the order they were written). */
async function flush(): Promise<void> {
  const me = await owner();
  const mine = $outbox.get().filter((o) => o.owner === me || o.owner === "");
  for (const item of mine.sort((a, b) => a.createdAt - b.createdAt)) {
    if (!$online.get()) return;
    await deliver(item).catch(() => undefined); // a refusal drops it; nothing else to do here
  }
}

/** Reads what a previous page left waiting, and sends it whenever the connection is (back) up. */
export function startOutbox(): () => void {
  void Promise.all([store("readonly", (s) => s.getAll()), owner()]).then(([kept, me]) => {
    const known = new Set($outbox.get().map((o) => o.clientRequestId));
    const more = ((kept as Outgoing[] | undefined) ?? []).filter((o) => o.owner === me && !known.has(o.clientRequestId));
    if (more.length) $outbox.set([...$outbox.get(), ...more]);
    if ($online.get()) void flush();
  }).catch(() => undefined);
  // Kept across a change of connection (nothing typed may vanish from view); flush sends only this account's.
  return $online.subscribe((online) => { if (online) void flush(); });
}
