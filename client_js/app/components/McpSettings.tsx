import { useStore } from "@nanostores/preact";
import { useEffect, useState } from "preact/hooks";
import type { Session } from "../lib/chatsync";
import { $mcpServers, loadMcpServers, type McpPolicy, type McpServerInfo } from "../stores/mcp";

type Choices = Record<string, { approval?: McpPolicy; tools?: Record<string, McpPolicy>; only?: string[] }>;

/** The session's MCP servers as the settings form edits them: which are enabled and each one's policy, saved
 * with the form's `session.update` (`changes()` is empty when nothing changed, so a server the user may no
 * longer use does not stop the rest of the form from saving). */
export function useMcpSettings(session: Session) {
  const servers = useStore($mcpServers);
  const [error, setError] = useState<string | null>(null);
  const [enabled, setEnabledList] = useState<string[]>(() => [...session.mcpServers]);
  const [choices, setChoices] = useState<Choices>(() => ({ ...(session.mcpTools as Choices) }));
  useEffect(() => {
    loadMcpServers().catch((err) => setError(String(err?.message ?? err)));
  }, []);
  const setEnabled = (name: string, on: boolean) =>
    setEnabledList(on ? [...enabled.filter((n) => n !== name), name] : enabled.filter((n) => n !== name));
  const setApproval = (name: string, approval: McpPolicy) =>
    setChoices({ ...choices, [name]: { ...choices[name], approval } });
  const changes = () => {
    const same = JSON.stringify(enabled) === JSON.stringify(session.mcpServers)
      && JSON.stringify(choices) === JSON.stringify(session.mcpTools);
    return same ? {} : { mcpServers: enabled, mcpTools: choices };
  };
  return { servers, error, enabled, choices, setEnabled, setApproval, changes };
}

type Props = ReturnType<typeof useMcpSettings>;

function policyOf(server: McpServerInfo, choices: Choices): McpPolicy {
  if (server.approval === "deny") return "deny";
  return choices[server.name]?.approval ?? server.approval;
}

/** The MCP servers the user may enable on this chat, each with its tools: "Use <server>" enables it, "Approval
 * for <server>" sets whether its calls wait for a device's approval ("Ask") or run at once ("Auto"). Names and
 * descriptions are the servers' own words, shown as text. */
export function McpSettings({ servers, error, enabled, choices, setEnabled, setApproval }: Props) {
  return (
    <fieldset class="mcp-settings">
      <legend>MCP servers</legend>
      {error ? <p role="alert">{error}</p>
        : servers === null ? <p>Loading…</p>
        : servers.length === 0 ? <p class="hint">No MCP servers are available to you.</p>
        : servers.map((server) => (
          <McpServerRow key={server.name} server={server} on={enabled.includes(server.name)}
                        policy={policyOf(server, choices)} setEnabled={setEnabled} setApproval={setApproval} />
        ))}
    </fieldset>
  );
}

function McpServerRow({ server, on, policy, setEnabled, setApproval }: {
  server: McpServerInfo; on: boolean; policy: McpPolicy;
  setEnabled: Props["setEnabled"]; setApproval: Props["setApproval"];
}) {
  const denied = server.approval === "deny";
  return (
    <div class="mcp-server" role="group" aria-label={`MCP server ${server.name}`}>
      <label class="check">
        <input type="checkbox" checked={on} onChange={(e) => setEnabled(server.name, e.currentTarget.checked)} />
        {`Use ${server.name}`}
        {server.description && <span class="hint">{server.description}</span>}
      </label>
      <label>{`Approval for ${server.name}`}
        <select value={policy} disabled={denied}
                onChange={(e) => setApproval(server.name, e.currentTarget.value as McpPolicy)}>
          <option value="ask">Ask</option>
          <option value="auto">Auto</option>
          {denied && <option value="deny">Never (set by the server's operator)</option>}
        </select>
      </label>
      {server.error
        ? <p class="hint">{server.error}</p>
        : (
          <ul class="mcp-tools" aria-label={`Tools of ${server.name}`}>
            {server.tools.map((t) => (
              <li key={t.name}><code>{t.name}</code>{t.description ? ` — ${t.description}` : ""}</li>
            ))}
          </ul>
        )}
    </div>
  );
}
