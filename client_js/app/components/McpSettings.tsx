import { useStore } from "@nanostores/preact";
import { useEffect, useState } from "preact/hooks";
import type { Session } from "../lib/chatsync";
import { act } from "../stores/call";
import { $session, current } from "../stores/conversation";
import { $mcpServers, loadMcpServers, type McpPolicy, type McpServerInfo } from "../stores/mcp";

type Choices = Record<string, { approval?: McpPolicy; tools?: Record<string, McpPolicy>; only?: string[] }>;

/** The open chat's MCP servers: which are enabled and their policy, and how to change them (`session.update`).
 * For the session settings dialog: `const mcp = useMcpSettings()` then `<McpSettings {...mcp} />`. */
export function useMcpSettings() {
  const servers = useStore($mcpServers);
  const session = useStore($session);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (servers === null) loadMcpServers().catch((err) => setError(String(err?.message ?? err)));
  }, [servers]);
  const enabled = session?.mcpServers ?? [];
  const choices = (session?.mcpTools ?? {}) as Choices;
  const save = (mcpServers: string[], mcpTools: Choices) =>
    act("Saving MCP settings", () => current().update({ mcpServers, mcpTools }));
  const setEnabled = (name: string, on: boolean) =>
    save(on ? [...enabled.filter((n) => n !== name), name] : enabled.filter((n) => n !== name), choices);
  const setApproval = (name: string, approval: McpPolicy) =>
    save(enabled, { ...choices, [name]: { ...choices[name], approval } });
  return { servers, session, enabled, choices, error, setEnabled, setApproval };
}

type Props = ReturnType<typeof useMcpSettings>;

function policyOf(server: McpServerInfo, choices: Choices): McpPolicy {
  if (server.approval === "deny") return "deny";
  return choices[server.name]?.approval ?? server.approval;
}

/** The MCP servers the user may enable on this chat, each with its tools: a checkbox enables it, a choice sets
 * whether its calls wait for an approval ("Ask") or run at once ("Auto"). Names and descriptions are the
 * servers' own words, shown as text. */
export function McpSettings({ servers, session, enabled, choices, error, setEnabled, setApproval }: Props) {
  if (error) return <section aria-label="MCP servers"><h3>MCP servers</h3><p role="alert">{error}</p></section>;
  if (servers === null || session === null) return <section aria-label="MCP servers"><h3>MCP servers</h3><p>Loading…</p></section>;
  return (
    <section aria-label="MCP servers" class="mcp-settings">
      <h3>MCP servers</h3>
      {servers.length === 0 && <p>No MCP servers are available to you.</p>}
      {servers.map((server) => (
        <McpServerRow key={server.name} server={server} session={session} on={enabled.includes(server.name)}
                      policy={policyOf(server, choices)} setEnabled={setEnabled} setApproval={setApproval} />
      ))}
    </section>
  );
}

function McpServerRow({ server, on, policy, setEnabled, setApproval }: {
  server: McpServerInfo; session: Session; on: boolean; policy: McpPolicy;
  setEnabled: Props["setEnabled"]; setApproval: Props["setApproval"];
}) {
  const denied = server.approval === "deny";
  return (
    <fieldset class="mcp-server">
      <legend>{server.name}</legend>
      {server.description && <p class="mcp-description">{server.description}</p>}
      <label>
        <input type="checkbox" checked={on} onChange={(e) => void setEnabled(server.name, e.currentTarget.checked)} />
        {` Use ${server.name}`}
      </label>
      <label>
        {`Approval for ${server.name} `}
        <select value={policy} disabled={denied} aria-label={`Approval for ${server.name}`}
                onChange={(e) => void setApproval(server.name, e.currentTarget.value as McpPolicy)}>
          <option value="ask">Ask</option>
          <option value="auto">Auto</option>
          {denied && <option value="deny">Never (set by the server's operator)</option>}
        </select>
      </label>
      {server.error
        ? <p class="mcp-error">{server.error}</p>
        : (
          <ul class="mcp-tools" aria-label={`Tools of ${server.name}`}>
            {server.tools.map((t) => (
              <li key={t.name}><code>{t.name}</code>{t.description ? ` — ${t.description}` : ""}</li>
            ))}
          </ul>
        )}
    </fieldset>
  );
}
