// Where else this session is open (presence) and its unsent text (drafts), shared by the user's devices
// (docs/devices.md). This device reports whether the open chat is visible, focused and being typed in; it watches
// `presence.watch` for the other devices and for the draft. Drafts are saved a little after typing stops, at most
// once a second, and only over the version this device last saw: a newer draft from another device is offered,
// never written over.
import { atom, computed } from "nanostores";
import type { Draft, PresenceDevice } from "../../src/router.gen";
import { errorCode } from "../lib/chatsync";
import { $client, $connection } from "./auth";
import { $sessionId } from "./conversation";

export const $presence = atom<readonly PresenceDevice[]>([]);
/** A draft from another device this composer has not taken or dismissed, or null. */
export const $draftOffer = atom<Draft | null>(null);
/** Text the composer should show now (a draft taken, or cleared because it was sent elsewhere). */
export const $composerText = atom<{ text: string } | null>(null);

const TYPING_IDLE_MS = 3000;
const SAVE_AFTER_MS = 1200;

let watching: { unsubscribe(): void } | null = null;
let heartbeat: ReturnType<typeof setTimeout> | null = null;
let typingTimer: ReturnType<typeof setTimeout> | null = null;
let saveTimer: ReturnType<typeof setTimeout> | null = null;
let typing = false;
let reportedSession: string | null = null;
let myDevice: string | null = null;
/** The draft version this device last wrote or took, and the text it had then. */
let known = { version: 0, text: "" };
let composer = "";

/** The other devices' entries (this tab's own is left out): "Also open on …", "… is typing…". */
export const $others = computed($presence, (all) => all.filter((d) => !d.current));

function trpc() {
  return $client.get()?.trpc ?? null;
}

async function report(): Promise<void> {
  const t = trpc();
  const sessionId = $sessionId.get();
  if (heartbeat) clearTimeout(heartbeat);
  heartbeat = null;
  if (!t || !sessionId) return;
  const visible = document.visibilityState === "visible";
  try {
    const reply = await t.presence.update.mutate({ sessionId, visible, focused: visible && document.hasFocus(), typing });
    reportedSession = sessionId;
    if ($sessionId.get() === sessionId) heartbeat = setTimeout(() => void report(), reply.heartbeatSeconds * 1000);
  } catch {
    heartbeat = setTimeout(() => void report(), 5000); // offline or refused: try again, the entry expires meanwhile
  }
}

function leave(sessionId: string | null): void {
  const t = trpc();
  if (t && sessionId && reportedSession === sessionId) void t.presence.leave.mutate({ sessionId }).catch(() => {});
  reportedSession = null;
}

function follow(sessionId: string | null): void {
  watching?.unsubscribe();
  watching = null;
  $presence.set([]);
  $draftOffer.set(null);
  known = { version: 0, text: "" };
  const t = trpc();
  if (!t || !sessionId) return;
  watching = t.presence.watch.subscribe({ sessionId }, {
    onData(item) {
      if ($sessionId.get() !== sessionId) return;
      if (item.type === "presence") $presence.set(item.devices);
      else onDraft(item.draft);
    },
    onError() {},
  });
  if (myDevice === null) void t.auth.me.query().then((me) => { myDevice = me.deviceId; }).catch(() => {});
  void report();
  closeNotifications(sessionId);
}

function onDraft(draft: Draft): void {
  if (draft.version <= known.version) return;
  const mine = draft.deviceId !== null && draft.deviceId === myDevice;
  if (mine && draft.text === composer) {
    known = { version: draft.version, text: draft.text };
    return;
  }
  if (!draft.text) {
    // Sent or cleared elsewhere: a composer still holding that draft, unedited, empties too.
    if (composer === known.text && composer) {
      composer = "";
      $composerText.set({ text: "" });
    }
    known = { version: draft.version, text: "" };
    $draftOffer.set(null);
    return;
  }
  $draftOffer.set(draft);
}

/** The composer's text changed (typed by the person). */
export function composerChanged(text: string): void {
  composer = text;
  if (!typing) {
    typing = true;
    void report();
  }
  if (typingTimer) clearTimeout(typingTimer);
  typingTimer = setTimeout(() => {
    typing = false;
    void report();
  }, TYPING_IDLE_MS);
  if (saveTimer) clearTimeout(saveTimer);
  saveTimer = setTimeout(() => void save(), SAVE_AFTER_MS);
}

async function save(): Promise<void> {
  saveTimer = null;
  const t = trpc();
  const sessionId = $sessionId.get();
  if (!t || !sessionId || composer === known.text) return;
  const text = composer;
  try {
    const r = await t.draft.save.mutate({ sessionId, text, baseVersion: known.version });
    if (r.saved) known = { version: r.draft.version, text };
    else $draftOffer.set(r.draft); // another device wrote it meanwhile: offer, never overwrite
  } catch (err) {
    if (errorCode(err) === "TOO_MANY_REQUESTS") saveTimer = setTimeout(() => void save(), SAVE_AFTER_MS);
  }
}

/** The person takes the offered draft into the composer. */
export function takeDraft(): void {
  const draft = $draftOffer.get();
  if (!draft) return;
  known = { version: draft.version, text: draft.text };
  composer = draft.text;
  $composerText.set({ text: draft.text });
  $draftOffer.set(null);
}

/** The person keeps their own text: it becomes the draft, over the offered one. */
export function keepMine(): void {
  const draft = $draftOffer.get();
  if (draft) known = { version: draft.version, text: draft.text };
  $draftOffer.set(null);
  if (composer) void save();
}

/** The composer's message was sent: its draft goes, on every device that has not typed further. */
export function draftSent(): void {
  if (saveTimer) clearTimeout(saveTimer);
  saveTimer = null;
  composer = "";
  const t = trpc();
  const sessionId = $sessionId.get();
  if (!t || !sessionId || known.version === 0) return;
  const baseVersion = known.version;
  void t.draft.clear.mutate({ sessionId, baseVersion }).then((r) => {
    if (r.saved) known = { version: r.draft.version, text: "" };
  }).catch(() => {});
}

/** Notifications about this session are moot once it is open here (the others go on their next visit). */
function closeNotifications(sessionId: string): void {
  if (!("serviceWorker" in navigator)) return;
  void navigator.serviceWorker.getRegistration().then(async (reg) => {
    for (const n of (await reg?.getNotifications()) ?? []) {
      if ((n.data as { sessionId?: string } | null)?.sessionId === sessionId) n.close();
    }
  }).catch(() => {});
}

let previous: string | null = null;
$sessionId.subscribe((sessionId) => {
  if (sessionId === previous) return;
  leave(previous);
  previous = sessionId;
  composer = "";
  follow(sessionId);
});
$client.listen(() => { myDevice = null; });
// A new connection lost the entries of the old one: report again.
$connection.listen((state) => { if (state === "connected" || state === "resumed") void report(); });
document.addEventListener("visibilitychange", () => void report());
window.addEventListener("focus", () => void report());
window.addEventListener("blur", () => void report());
