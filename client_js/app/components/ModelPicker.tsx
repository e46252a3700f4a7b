import { useStore } from "@nanostores/preact";
import { useEffect, useState } from "preact/hooks";
import { $session } from "../stores/conversation";
import { setBusyPolicy, updateModel } from "../stores/actions";
import { act } from "../stores/call";
import type { BusyPolicy } from "../lib/chatsync";

const PROVIDERS = ["echo", "openai", "anthropic", "google", "ollama"];
const POLICIES: [BusyPolicy, string][] = [
  ["enqueue", "Queue it"], ["steer", "Add it to the answer"], ["interrupt", "Stop and send"], ["reject", "Refuse"],
];

/** The session's provider and model (session.update), and what Enter does while the model answers. */
export function ModelPicker() {
  const session = useStore($session);
  const [provider, setProvider] = useState(session?.provider ?? "echo");
  const [model, setModel] = useState(session?.model ?? "");
  useEffect(() => {
    setProvider(session?.provider ?? "echo");
    setModel(session?.model ?? "");
  }, [session?.id, session?.provider, session?.model]);
  if (!session) return null;
  return (
    <details class="settings">
      <summary>Model: {session.provider}{session.model ? ` / ${session.model}` : ""}</summary>
      <form class="settings-form" onSubmit={(e) => {
        e.preventDefault();
        void act("Changing the model", () => updateModel(provider, model.trim()));
      }}>
        <label>Provider
          <select value={provider} onChange={(e) => setProvider(e.currentTarget.value)}>
            {[...new Set([...PROVIDERS, session.provider])].map((p) => <option key={p} value={p}>{p}</option>)}
          </select>
        </label>
        <label>Model <input value={model} onInput={(e) => setModel(e.currentTarget.value)} /></label>
        <button type="submit">Apply</button>
        <label>While answering, a new message
          <select value={session.busyPolicy}
                  onChange={(e) => act("Changing the policy", () => setBusyPolicy(e.currentTarget.value as BusyPolicy))}>
            {POLICIES.map(([v, label]) => <option key={v} value={v}>{label}</option>)}
          </select>
        </label>
      </form>
    </details>
  );
}
