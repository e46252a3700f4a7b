// A message's versions and what can be done with them (docs/api.md "Versions and branches"): "< 2 / 3 >" to move
// between versions, Edit in place on your messages, Regenerate (with a model choice) and Continue on answers,
// Fork. Each action goes to the server; what every device shows changes with the events it sends back.
import { useState } from "preact/hooks";
import { useStore } from "@nanostores/preact";
import { $providers, loadCatalog } from "../stores/catalog";
import { $session } from "../stores/conversation";
import { continueAnswer, editMessage, forkAt, regenerate, switchVersion } from "../stores/actions";
import { announce } from "../stores/announcer";
import { errorMessage, type Message } from "../lib/chatsync";

/** "< 2 / 3 >": the previous and next versions of a message (the messages with its parent). */
export function VersionSwitch({ m }: { m: Message }) {
  const v = m.versions;
  const ids = m.siblingIds;
  if (!v || !ids || v.count < 2) return null;
  const go = (index: number) => void switchVersion(ids[index]!).catch((err) => announce(errorMessage(err)));
  return (
    <span class="msg-versions" role="group" aria-label="Versions">
      <button type="button" class="version-step" aria-label="Previous version" disabled={v.index === 0}
              onClick={() => go(v.index - 1)}>&lt;</button>
      <span class="version-count">{v.index + 1} / {v.count}</span>
      <button type="button" class="version-step" aria-label="Next version" disabled={v.index + 1 >= v.count}
              onClick={() => go(v.index + 1)}>&gt;</button>
    </span>
  );
}

/** A user message edited in place: Enter sends the new version, Shift+Enter is a new line, Escape cancels. */
export function EditBox({ m, done }: { m: Message; done: () => void }) {
  const [text, setText] = useState(m.content);
  const [problem, setProblem] = useState<string | null>(null);
  const submit = async () => {
    if (!text.trim()) return;
    try {
      await editMessage(m.id, text);
      done();
    } catch (err) {
      setProblem(errorMessage(err));
    }
  };
  return (
    <div class="msg-edit">
      <textarea aria-label="Edit message" value={text} rows={Math.min(8, text.split("\n").length + 1)}
                ref={(el) => el?.focus()}
                onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
                onKeyDown={(e) => {
                  if (e.key === "Escape") { e.preventDefault(); done(); }
                  else if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); void submit(); }
                }} />
      {problem && <p class="msg-notice" role="alert">{problem}</p>}
    </div>
  );
}

/** The model choices for Regenerate: the session's own first, then every model of the available providers. */
function modelChoices(): { value: string; label: string }[] {
  const session = $session.get();
  const own = session ? [{ value: "", label: `Same model (${session.model})` }] : [];
  const others = ($providers.get() ?? []).filter((p) => p.available).flatMap((p) =>
    p.models.filter((model) => !(session && p.id === session.provider && model === session.model))
      .map((model) => ({ value: `${p.id}\u0000${model}`, label: `${p.label}: ${model}` })));
  return [...own, ...others];
}

/** The actions under a message: Edit (yours), Regenerate with a model choice and Continue (answers), Fork. */
export function MessageActions({ m, onEdit, last }: { m: Message; onEdit: () => void; last: boolean }) {
  useStore($providers);
  const [model, setModel] = useState("");
  const fail = (err: unknown) => announce(errorMessage(err));
  const answer = m.role === "assistant";
  const canContinue = answer && last && m.status === "complete" && m.finishReason === "length";
  return (
    <div class="msg-actions" role="group" aria-label="Versions and edits">
      <VersionSwitch m={m} />
      {m.role === "user" && <button type="button" onClick={onEdit}>Edit</button>}
      {answer && (
        <>
          <select aria-label="Model for regenerate" value={model} onFocus={() => void loadCatalog().catch(() => {})}
                  onChange={(e) => setModel((e.target as HTMLSelectElement).value)}>
            {modelChoices().map((c) => <option key={c.value} value={c.value}>{c.label}</option>)}
          </select>
          <button type="button" onClick={() => {
            const [provider, chosen] = model ? model.split("\u0000") : [];
            void regenerate(m.id, provider, chosen).catch(fail);
          }}>Regenerate</button>
        </>
      )}
      {canContinue && <button type="button" onClick={() => void continueAnswer().catch(fail)}>Continue</button>}
      <button type="button" onClick={() => void forkAt(m.id).catch(fail)}>Fork</button>
    </div>
  );
}
