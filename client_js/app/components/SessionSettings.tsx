import { useStore } from "@nanostores/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { $session } from "../stores/conversation";
import { $builtinTools, $providers, firstModel, loadCatalog } from "../stores/catalog";
import { regenerateTitle, updateSettings } from "../stores/actions";
import { act } from "../stores/call";
import type { BusyPolicy, ProviderInfo, Session, ToolDefinition } from "../lib/chatsync";

const POLICIES: [BusyPolicy, string][] = [
  ["enqueue", "Queue it"], ["steer", "Add it to the answer"], ["interrupt", "Stop and send"], ["reject", "Refuse"],
];

const toolName = (t: Record<string, unknown>) => String(t.name ?? "");
const isServerTool = (t: Record<string, unknown>) => (t.executor ?? "server") === "server";

/** The provider choices: every provider the server knows (those it has no key for greyed out, with the reason),
 * and the session's own even when it is not available any more. */
function providerOptions(providers: readonly ProviderInfo[] | null, current: string) {
  const list = providers ?? [];
  const known = list.some((p) => p.id === current);
  return [
    ...list.map((p) => (
      <option key={p.id} value={p.id} disabled={!p.available && p.id !== current}>
        {p.label}{p.available ? "" : " (unavailable)"}
      </option>
    )),
    ...(known ? [] : [<option key={current} value={current}>{current}</option>]),
  ];
}

function SettingsForm({ session, onDone }: { session: Session; onDone: () => void }) {
  const providers = useStore($providers);
  const builtins = useStore($builtinTools);
  const [provider, setProvider] = useState(session.provider);
  const [model, setModel] = useState(session.model);
  const [prompt, setPrompt] = useState(session.systemPrompt ?? "");
  const [policy, setPolicy] = useState<BusyPolicy>(session.busyPolicy);
  const [enabled, setEnabled] = useState<Set<string>>(
    () => new Set(session.tools.filter(isServerTool).map(toolName)),
  );
  const [titleMethod, setTitleMethod] = useState<"truncate" | "model">("model");
  const chosen = providers?.find((p) => p.id === provider) ?? null;
  const builtinNames = new Set((builtins ?? []).map((t) => t.name));
  // Tools the session declared itself (client tools, or server tools under other names): listed, kept as they are.
  const declared = session.tools.filter((t) => !(isServerTool(t) && builtinNames.has(toolName(t))));
  const unavailable = (providers ?? []).filter((p) => !p.available);

  const save = async () => {
    const tools: ToolDefinition[] = [
      ...(declared as ToolDefinition[]),
      ...(builtins ?? []).filter((t) => enabled.has(t.name)),
    ];
    await updateSettings({
      ...(provider !== session.provider || model.trim() !== session.model ? { provider, model: model.trim() } : {}),
      systemPrompt: prompt.trim() ? prompt : null,
      busyPolicy: policy,
      ...(builtins ? { tools } : {}),
    });
    onDone();
  };

  return (
    <form class="settings-form" onSubmit={(e) => { e.preventDefault(); void act("Saving the settings", save); }}>
      <fieldset>
        <legend>Model</legend>
        <label>Provider
          <select value={provider} aria-describedby="provider-hint" onChange={(e) => {
            const next = e.currentTarget.value;
            setProvider(next);
            setModel(next === session.provider ? session.model : firstModel(providers, next));
          }}>
            {providerOptions(providers, session.provider)}
          </select>
        </label>
        <p id="provider-hint" class="hint">
          {chosen && !chosen.available ? `${chosen.label}: ${chosen.reason}` : ""}
          {unavailable.filter((p) => p.id !== provider).map((p) => `${p.label}: ${p.reason}`).join(" ")}
        </p>
        <label>Model
          <input value={model} list="model-choices" required spellcheck={false}
                 placeholder={chosen?.freeText ? "the server's model name" : undefined}
                 onInput={(e) => setModel(e.currentTarget.value)} />
        </label>
        <datalist id="model-choices">
          {(chosen?.models ?? []).map((m) => <option key={m} value={m} />)}
        </datalist>
      </fieldset>
      <label class="wide">System prompt
        <textarea rows={4} value={prompt} onInput={(e) => setPrompt(e.currentTarget.value)} />
      </label>
      <fieldset>
        <legend>Tools</legend>
        {builtins === null ? <p>Loading…</p> : builtins.map((t) => (
          <label key={t.name} class="check">
            <input type="checkbox" checked={enabled.has(t.name)} aria-describedby={`tool-${t.name}`}
                   onChange={(e) => {
                     const next = new Set(enabled);
                     if (e.currentTarget.checked) next.add(t.name); else next.delete(t.name);
                     setEnabled(next);
                   }} />
            {t.name}
            <span id={`tool-${t.name}`} class="hint">{t.description}</span>
          </label>
        ))}
        {declared.length > 0 && (
          <>
            <p class="hint">Declared by the session:</p>
            <ul aria-label="Declared tools" class="declared-tools">
              {declared.map((t) => (
                <li key={toolName(t)}>{toolName(t)} ({isServerTool(t) ? "runs on the server" : "runs on a client"})</li>
              ))}
            </ul>
          </>
        )}
      </fieldset>
      <label>While answering, a new message
        <select value={policy} onChange={(e) => setPolicy(e.currentTarget.value as BusyPolicy)}>
          {POLICIES.map(([v, label]) => <option key={v} value={v}>{label}</option>)}
        </select>
      </label>
      <fieldset>
        <legend>Title</legend>
        <label>Title from
          <select value={titleMethod} onChange={(e) => setTitleMethod(e.currentTarget.value as "truncate" | "model")}>
            <option value="model">the model (a short summary)</option>
            <option value="truncate">the first message</option>
          </select>
        </label>
        <button type="button" onClick={() => act("Regenerating the title", () => regenerateTitle(titleMethod))}>
          Regenerate title
        </button>
      </fieldset>
      <div class="dialog-actions">
        <button type="button" onClick={onDone}>Cancel</button>
        <button type="submit" class="primary">Save</button>
      </div>
    </form>
  );
}

/** "Session settings": provider and model (from what the server offers), system prompt, the server's tools,
 * what Enter does while the model answers, and the title; saved with one session.update for every device. */
export function SessionSettings() {
  const session = useStore($session);
  const [open, setOpen] = useState(false);
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (open && d && !d.open) d.showModal();
  }, [open]);
  if (!session) return null;
  return (
    <>
      <span class="model-label">Model: {session.provider}{session.model ? ` / ${session.model}` : ""}</span>
      <button type="button" aria-haspopup="dialog" onClick={() => {
        setOpen(true);
        void act("Loading the settings", loadCatalog);
      }}>Session settings</button>
      {open && (
        <dialog ref={dialog} class="settings-dialog" aria-labelledby="settings-heading" onClose={() => setOpen(false)}>
          <h2 id="settings-heading">Session settings</h2>
          <SettingsForm key={session.id} session={session} onDone={() => dialog.current?.close()} />
        </dialog>
      )}
    </>
  );
}
