import { useStore } from "@nanostores/preact";
import { useRef } from "preact/hooks";
import { $queue, $session } from "../stores/conversation";
import { clearQueue, moveQueued, pauseQueue, resumeQueue } from "../stores/actions";
import { act } from "../stores/call";
import { QueueItem } from "./QueueItem";
import { plural } from "../lib/plural";

/** Messages typed while the model answers, sent one by one when it is done; the same list on every device. */
export function QueuePanel() {
  const queue = useStore($queue);
  const session = useStore($session);
  const dragged = useRef<string | null>(null);
  const paused = !!session?.queuePaused;
  if (queue.length === 0 && !paused) return null;
  const drop = (toIndex: number) => {
    const id = dragged.current;
    dragged.current = null;
    if (id && queue.findIndex((q) => q.id === id) !== toIndex) void act("Moving", () => moveQueued(id, toIndex));
  };
  return (
    <section class="queue" aria-labelledby="queue-heading">
      <div class="queue-head">
        <h2 id="queue-heading">{plural(queue.length, "message")} queued{paused ? " (paused)" : ""}</h2>
        {paused
          ? <button type="button" onClick={() => act("Resuming the queue", resumeQueue)}>Resume queue</button>
          : <button type="button" onClick={() => act("Pausing the queue", pauseQueue)}>Pause queue</button>}
        {queue.length > 0 && <button type="button" onClick={() => act("Clearing the queue", clearQueue)}>Clear queue</button>}
      </div>
      <ol class="queue-list" aria-label="Queued messages">
        {queue.map((q, i) => (
          <QueueItem key={q.id} item={q} index={i} count={queue.length}
                     onDragStart={(id) => { dragged.current = id; }} onDrop={drop} />
        ))}
      </ol>
    </section>
  );
}
