// The one status region of the conversation: what a screen reader hears about a run (started, finished,
// failed, stopped) and about actions that failed. Never token by token: the log itself is aria-busy while
// an answer streams.
import { atom } from "nanostores";

export const $announcement = atom("");

export function announce(text: string): void {
  // The same words twice in a row must still be read: clear first, set on the next frame.
  if ($announcement.get() === text) {
    $announcement.set("");
    requestAnimationFrame(() => $announcement.set(text));
  } else {
    $announcement.set(text);
  }
}
