// What the conversation shows beyond the library's session state, from a second subscription to
// `session.events` on the same socket, from the position of the library's first snapshot (none of this
// needs older history, and nothing after that snapshot is missed):
//  * tool-call arguments as they stream (tool-call-start / tool-call-delta; previews only — the final
//    arguments come with the completed message);
//  * who answered an approval (tool-approval-resolved's decidedBy), kept after the run ends;
//  * the run's start, end, failure and stop, announced once each in the status region.
// The library could expose these (an event hook, previews in its run view); until it does, this adapter.
import { announce } from "./announcer";
import type { ChatsyncClient, OpenSession } from "../lib/chatsync";

export interface Preview { messageId: string; name: string; arguments: string }
export interface Extras {
  previews: Map<string, Preview>;
  decisions: Map<string, { approved: boolean; by: string }>;
}

/** Call ids this device answered, to say "this device" rather than its name. */
const answeredHere = new Set<string>();
export function noteAnsweredHere(callId: string): void {
  answeredHere.add(callId);
}
export function forgetAnsweredHere(callId: string): void {
  answeredHere.delete(callId);
}

export function followExtras(client: ChatsyncClient, session: OpenSession, publish: (x: Extras) => void) {
  let x: Extras = { previews: new Map(), decisions: new Map() };
  const set = (change: Partial<Extras>) => {
    x = { ...x, ...change };
    publish(x);
  };
  const onEvent = (e: any) => {
    switch (e.type) {
      case "tool-call-start": {
        const previews = new Map(x.previews);
        previews.set(e.callId, { messageId: e.messageId, name: e.name, arguments: "" });
        set({ previews });
        break;
      }
      case "tool-call-delta": {
        const p = x.previews.get(e.callId);
        if (!p || [...p.arguments].length !== Number(e.offset)) break; // a gap: the preview just waits
        const previews = new Map(x.previews);
        previews.set(e.callId, { ...p, arguments: p.arguments + e.delta });
        set({ previews });
        break;
      }
      case "message-completed":
        if (e.message.toolCalls?.length && [...x.previews.values()].some((p) => p.messageId === e.message.id)) {
          set({ previews: new Map([...x.previews].filter(([, p]) => p.messageId !== e.message.id)) });
        }
        break;
      case "tool-approval-requested":
        announce("A tool call is waiting for your approval");
        break;
      case "tool-approval-resolved": {
        const by = answeredHere.has(e.callId) ? "this device" : e.decidedBy?.deviceName || "another device";
        const decisions = new Map(x.decisions);
        decisions.set(e.callId, { approved: !!e.approved, by });
        set({ decisions });
        break;
      }
      case "run-started":
        announce("Answering…");
        break;
      case "run-finished":
        announce(e.finishReason === "length" ? "Answer finished (length limit)" : "Answer finished");
        break;
      case "run-failed":
        announce(`Answer failed: ${e.error?.message ?? "error"}`);
        break;
      case "run-aborted":
        announce("Answer stopped");
        break;
      case "session-deleted":
        announce("This chat was deleted");
        break;
    }
  };
  let sub: { unsubscribe(): void } | null = null;
  let closed = false;
  session.ready.then(() => {
    if (closed) return;
    const lastEventId = String(session.state.get()?.lastSeq ?? 0);
    sub = client.trpc.session.events.subscribe({ sessionId: session.id, lastEventId }, {
      onData: (item: any) => onEvent(item?.data ?? item),
      onError: () => undefined, // the library's follower reports the session's state; these are extras
    });
  }, () => undefined);
  return {
    close() {
      closed = true;
      sub?.unsubscribe();
    },
  };
}
