import { useStore } from "@nanostores/preact";
import { useRef } from "preact/hooks";
import { $queue, $session } from "../stores/conversation";
import { clearQueue, moveQueued, pauseQueue, resumeQueue } from "../stores/actions";
import { act } from "../stores/call";
import { QueueItem } from "./QueueItem";
import { ConfirmButton } from "./ConfirmButton";

/** Messages typed while the model answers, sent one by one when it is done; the same list on every device. */
export function QueuePanel() {
  const queue = useStore($queue);
  const session = useStore($session);
  const dragged = useRef<string | null>(null);
  const paused = !!session?.queuePaused;
  // Nothing queued, nothing to show (paused or not: the next send resumes a paused queue anyway).
  if (queue.length === 0) return null;
  const busy = session?.status === "running" || session?.status === "requires-action";
  const drop = (toIndex: number) => {
    const id = dragged.current;
    dragged.current = null;
    if (id && queue.findIndex((q) => q.id === id) !== toIndex) void act("Moving", () => moveQueued(id, toIndex));
  };
  return (
    <section class="queue" aria-labelledby="queue-heading">
      <div class="queue-head">
        <h2 id="queue-heading">
          {queue.length === 1 ? "1 message queued" : `${queue.length} messages queued`}{paused ? " (paused)" : ""}
        </h2>
        {paused
          ? <button type="button" onClick={() => act("Resuming the queue", resumeQueue)}>Resume queue</button>
          : <button type="button" onClick={() => act("Pausing the queue", pauseQueue)}>Pause queue</button>}
        {(
          <ConfirmButton label="Clear queue" confirm="Yes, clear it" danger={false}
                         question={queue.length === 1 ? "Remove the queued message?" : `Remove all ${queue.length} queued messages?`}
                         onConfirm={() => void act("Clearing the queue", clearQueue)} />
        )}
      </div>
      {busy && <p id="send-now-hint" class="hint">“Send now” stops the current answer and sends that message instead.</p>}
      <ol class="queue-list" aria-label="Queued messages">
        {queue.map((q, i) => (
          <QueueItem key={q.id} item={q} index={i} count={queue.length}
                     onDragStart={(id) => { dragged.current = id; }} onDrop={drop} />
        ))}
      </ol>
    </section>
  );
}
