import { useRef, useState, type FormEvent } from "react";
import { useShallow } from "zustand/react/shallow";
import { isAgentNode, linkedAgentIds } from "../lib/graph";
import { useAppStore, useAppStoreApi } from "../store/context";
import { McpClientDialog } from "./McpClientDialog";
import { useFitSoon } from "./useFitSoon";

/** Connection form, health, and the workspace and history commands. */
export function Header() {
  const s = useAppStore(
    useShallow((st) => ({
      baseUrl: st.baseUrl,
      apiKey: st.apiKey,
      connection: st.connection,
      connectionError: st.connectionError,
      health: st.health,
      lost: st.lost,
      agents: st.liveRows.length,
      canUndo: st.history.past.length > 0,
      canRedo: st.history.future.length > 0,
      connect: st.connect,
      disconnect: st.disconnect,
      undo: st.undo,
      redo: st.redo,
      exportYaml: st.exportYaml,
      notify: st.notify,
      importYaml: st.importYaml,
      refresh: st.refresh,
      openBuilder: st.openBuilder,
      restoreOnMaster: st.restoreOnMaster,
      restoring: st.restore.phase === "running",
      openApprovals: st.setApprovalsPanelOpen,
      pendingApprovals: st.pendingApprovals.length,
      identity: st.identity,
      admin: st.isAdmin(),
      canQuery: st.canQuery(),
      openKeys: st.openKeys,
    })),
  );
  const [url, setUrl] = useState(s.baseUrl || window.location.origin);
  const [key, setKey] = useState(s.apiKey);
  const [mcpOpen, setMcpOpen] = useState(false);
  const fileInput = useRef<HTMLInputElement>(null);
  const fitSoon = useFitSoon();
  const store = useAppStoreApi();
  const connected = s.connection === "connected";

  const submit = (event: FormEvent) => {
    event.preventDefault();
    void s.connect(url.trim(), key);
  };
  const download = () => {
    const blob = new Blob([s.exportYaml()], { type: "application/yaml" });
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = "workspace.yaml";
    link.click();
    URL.revokeObjectURL(link.href);
    const { nodes, edges } = store.getState();
    const agents = nodes.filter(isAgentNode).length;
    const links = linkedAgentIds(edges).length;
    const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
    s.notify("info", `Exported workspace.yaml: ${plural(agents, "agent")}, ${plural(links, "link")}`);
  };
  const upload = async (files: FileList | null) => {
    const file = files?.[0];
    if (file && s.importYaml(await file.text())) fitSoon();
    if (fileInput.current) fileInput.current.value = "";
  };

  return (
    <header className="header">
      <h1 className="brand">OpenAgent</h1>
      <form className="connect" onSubmit={submit} aria-label="Connect to master">
        <label className="field inline">
          <span>Master URL</span>
          <input value={url} onChange={(e) => setUrl(e.target.value)} disabled={connected} spellCheck={false} />
        </label>
        <label className="field inline">
          <span>API key</span>
          <input
            type="password"
            value={key}
            onChange={(e) => setKey(e.target.value)}
            disabled={connected}
            autoComplete="off"
          />
        </label>
        {/* Distinct keys: reusing one <button> would turn the Disconnect click into a submit (reconnect). */}
        {connected ? (
          <button key="disconnect" type="button" onClick={() => s.disconnect()}>
            Disconnect
          </button>
        ) : (
          <button key="connect" type="submit" disabled={s.connection === "connecting"}>
            {s.connection === "connecting" ? "Connecting…" : "Connect"}
          </button>
        )}
      </form>
      <div className="health" role="status" aria-label="Master status">
        {connected && !s.lost ? (
          <span className="status status-online">
            Connected · health {String(s.health?.status ?? "?")} · {s.agents} agent{s.agents === 1 ? "" : "s"}
          </span>
        ) : connected && s.lost ? (
          <span className="status status-DOWN">
            Lost connection — retrying{" "}
            <button type="button" className="small" onClick={() => void s.refresh()}>
              Retry
            </button>
          </span>
        ) : (
          <span className="status status-offline">{s.connection === "connecting" ? "Connecting…" : "Not connected"}</span>
        )}
      </div>
      {connected && s.identity ? (
        <div className="identity" role="status" aria-label="Signed in as">
          {s.identity.name} · <strong>{s.identity.role}</strong> · tenant {s.identity.tenant}
        </div>
      ) : null}
      {s.connection === "error" && s.connectionError ? (
        <div className="connect-error" role="alert">
          {s.connectionError}
        </div>
      ) : null}
      <div className="toolbar" role="toolbar" aria-label="Workspace">
        <button type="button" onClick={s.undo} disabled={!s.canUndo} title="Ctrl+Z">
          Undo
        </button>
        <button type="button" onClick={s.redo} disabled={!s.canRedo} title="Ctrl+Shift+Z">
          Redo
        </button>
        <button type="button" onClick={download}>
          Export YAML
        </button>
        {s.canQuery ? (
          <button
            type="button"
            onClick={() => s.openApprovals(true)}
            disabled={!connected}
            title="GET /approvals: tool calls of every session waiting for a person"
          >
            Approvals{s.pendingApprovals ? ` (${s.pendingApprovals})` : ""}
          </button>
        ) : null}
        {s.admin ? (
          <>
            <button
              type="button"
              onClick={() => void s.restoreOnMaster()}
              disabled={!connected || s.restoring}
              title="POST /internal/workspace/restore with this canvas's workspace"
            >
              Restore on master
            </button>
            <button type="button" onClick={() => void s.openBuilder()} title="Generate an agent with the master's LLM">
              Agent builder
            </button>
          </>
        ) : null}
        {connected && s.admin ? (
          <button type="button" onClick={() => void s.openKeys()} title="Create, list and revoke API keys">
            Keys
          </button>
        ) : null}
        <button type="button" onClick={() => setMcpOpen(true)} title="The master's /mcp URL and client configuration snippets">
          Connect an MCP client
        </button>
        <label className="button">
          Import YAML
          <input
            ref={fileInput}
            type="file"
            accept=".yaml,.yml,application/yaml,text/yaml"
            className="visually-hidden"
            onChange={(e) => void upload(e.target.files)}
          />
        </label>
      </div>
      <McpClientDialog
        open={mcpOpen}
        onClose={() => setMcpOpen(false)}
        baseUrl={s.baseUrl || url}
        withKey={Boolean(s.apiKey || key)}
      />
    </header>
  );
}
