// What this server offers a session: its providers (provider.list: available or why not, known models) and the
// tools it runs itself (tool.builtins). Read once per sign-in, when settings are first opened.
import { atom } from "nanostores";
import { $client } from "./auth";
import type { ProviderInfo, ToolDefinitionInfo } from "../lib/chatsync";

export const $providers = atom<ProviderInfo[] | null>(null);
export const $builtinTools = atom<ToolDefinitionInfo[] | null>(null);

$client.listen(() => {
  $providers.set(null);
  $builtinTools.set(null);
});

export async function loadCatalog(): Promise<void> {
  const c = $client.get();
  if (!c) throw new Error("Not signed in");
  if ($providers.get() && $builtinTools.get()) return;
  const [providers, tools] = await Promise.all([
    c.requests.query("provider.list", undefined), c.requests.query("tool.builtins", undefined),
  ]);
  if ($client.get() !== c) return;
  $providers.set(providers);
  $builtinTools.set(tools);
}

/** The model a session gets when its provider changes to `provider`: that provider's first known model, never
 * the old provider's (empty when the model is typed, e.g. an OpenAI-compatible server). */
export function firstModel(providers: readonly ProviderInfo[] | null, provider: string): string {
  return providers?.find((p) => p.id === provider)?.models[0] ?? "";
}
