// The one status region of the conversation: what a screen reader hears about a run (started, finished,
// failed, stopped) and about actions that failed. Never token by token: the log itself is aria-busy while
// an answer streams.
import { atom } from "nanostores";

export const $announcement = atom("");
// The chat a run announcement was about (null for anything else, e.g. "Imported …" just before it opens).
let about: string | null = null;

export function announce(text: string, sessionId: string | null = null): void {
  about = sessionId;
  // The same words twice in a row must still be read: clear first, set on the next frame.
  if ($announcement.get() === text) {
    $announcement.set("");
    requestAnimationFrame(() => $announcement.set(text));
  } else {
    $announcement.set(text);
  }
}

/** Empties the region when it speaks of a run of another chat than `openSessionId` ("Answer finished" must not
 * carry into the chat opened next). */
export function forgetOtherChats(openSessionId: string | null): void {
  if (about !== null && about !== openSessionId) {
    about = null;
    $announcement.set("");
  }
}
