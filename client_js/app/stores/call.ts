import { announce } from "./announcer";
import { errorMessage } from "../lib/chatsync";

/** Runs an action from a button; a failure is announced in the status region rather than thrown away. */
export function act(what: string, action: () => Promise<unknown>): Promise<void> {
  return action().then(() => undefined, (err) => announce(`${what} failed: ${errorMessage(err)}`));
}
