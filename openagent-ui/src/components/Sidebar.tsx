import { memo, type DragEvent } from "react";
import { useShallow } from "zustand/react/shallow";
import { TRANSPORT_LABEL, filterCatalog, type CatalogEntry } from "../lib/agents";
import { agentNodeId } from "../lib/graph";
import { deployAction } from "../lib/sandbox";
import { useAppStore } from "../store/context";
import { DRAG_TYPE } from "./Canvas";
import { SandboxBadge } from "./SandboxBadge";
import { useFitSoon } from "./useFitSoon";

const SOURCE_LABEL: Record<CatalogEntry["source"], string> = {
  master: "registered",
  discover: "discovered",
  builtin: "system agent",
  workspace: "from workspace",
};

/** Deploy (or redeploy) a WebSocket agent's module to the sandbox, and stop a deployed one. */
function SandboxActions({ entry }: { entry: CatalogEntry }) {
  const { deploy, stop, busy } = useAppStore(
    useShallow((s) => ({
      deploy: s.deploy,
      stop: s.stopDeployment,
      busy: ["deploying", "stopping"].includes(s.linkNotes[entry.agentId]?.kind ?? ""),
    })),
  );
  const action = deployAction(entry);
  if (!action && !entry.sandbox) return null;
  return (
    <div className="agent-row-sandbox">
      {entry.sandbox ? <SandboxBadge agentId={entry.agentId} field={entry.sandbox} /> : null}
      {action ? (
        <button
          type="button"
          className="small"
          disabled={busy}
          onClick={() => void deploy(entry.agentId)}
          aria-label={`${action.label} ${entry.label}`}
          title={`POST /internal/sandbox-agent/start: ${action.module} in a Pod of its own${entry.sandbox ? " (replaces the deployed one)" : ""}`}
        >
          {action.label}
        </button>
      ) : null}
      {entry.sandbox ? (
        <button
          type="button"
          className="small"
          disabled={busy}
          onClick={() => void stop(entry.agentId)}
          aria-label={`Stop ${entry.label}`}
          title="POST /internal/sandbox-agent/stop: remove its Pod and ConfigMap"
        >
          Stop
        </button>
      ) : null}
    </div>
  );
}

const Row = memo(function Row({ entry, onCanvas, sandbox }: { entry: CatalogEntry; onCanvas: boolean; sandbox: boolean }) {
  const addAgent = useAppStore((s) => s.addAgent);
  const fitSoon = useFitSoon();
  const onDragStart = (event: DragEvent) => {
    event.dataTransfer.setData(DRAG_TYPE, entry.agentId);
    event.dataTransfer.effectAllowed = "copy";
  };
  return (
    <li className="agent-row" draggable onDragStart={onDragStart} aria-label={entry.label}>
      <div className="agent-row-main">
        <span className="agent-row-label">{entry.label}</span>
        <span className={`status status-${entry.status}`}>{entry.status === "online" ? "connected" : entry.status}</span>
      </div>
      <div className="agent-row-meta">
        <span className={`transport transport-${entry.transport}`} title={`transport: ${entry.transport}`}>
          {TRANSPORT_LABEL[entry.transport]}
        </span>{" "}
        ·{" "}
        {entry.sandbox && entry.status === "offline" ? "deployed, not connected" : SOURCE_LABEL[entry.source]}
        {entry.tools.length ? ` · ${entry.tools.map((t) => t.name).join(", ")}` : ""}
      </div>
      {entry.discoverError ? <div className="node-error">{entry.discoverError}</div> : null}
      {sandbox ? <SandboxActions entry={entry} /> : null}
      <button type="button" className="small" onClick={() => {
          addAgent(entry.agentId);
          fitSoon();
        }} aria-label={`Add ${entry.label} to canvas`}>
        {onCanvas ? "Show" : "Add"}
      </button>
    </li>
  );
});

export function Sidebar() {
  const { catalog, search, setSearch, nodeIds, connection, discoveryAvailable, problems, sandbox } = useAppStore(
    useShallow((s) => ({
      problems: s.discoveryErrors,
      catalog: s.catalog,
      search: s.search,
      setSearch: s.setSearch,
      nodeIds: s.nodes.map((n) => n.id).join("\n"),
      connection: s.connection,
      discoveryAvailable: s.discoveryAvailable,
      sandbox: s.sandboxEnabled && s.connection === "connected" && s.isAdmin(), // deploying is an administrator's
    })),
  );
  const rows = filterCatalog(catalog, search);
  const onCanvas = new Set(nodeIds.split("\n"));
  return (
    <aside className="sidebar" aria-label="Agents">
      <h2>Agents</h2>
      <label className="field">
        <span>Search agents</span>
        <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} placeholder="id, tool, module…" />
      </label>
      {connection !== "connected" && catalog.length === 0 ? (
        <p className="hint">Connect to a master to list its agents, or import a workspace YAML.</p>
      ) : null}
      <p className="hint">Drag an agent onto the canvas, then link it to the orchestrator.</p>
      <ul className="agent-list" aria-label="Agent list">
        {rows.map((entry) => (
          <Row key={entry.agentId} entry={entry} onCanvas={onCanvas.has(agentNodeId(entry.agentId))} sandbox={sandbox} />
        ))}
      </ul>
      {problems.length ? (
        <section className="discovery-problems" aria-label="Discovery problems">
          <h3>
            Not listed: {problems.length} file{problems.length === 1 ? "" : "s"} with problems
          </h3>
          <ul>
            {problems.map((p, i) => (
              <li key={`${p.file}-${i}`} aria-label={`Discovery problem in ${p.file}`}>
                <code>{p.file}</code>
                {p.agent_id ? ` (${p.agent_id})` : ""}
                <div className="node-error">{p.error}</div>
              </li>
            ))}
          </ul>
        </section>
      ) : null}
      {connection === "connected" && !discoveryAvailable ? (
        <p className="hint">This master has no agent discovery (GET /agents/discover).</p>
      ) : null}
    </aside>
  );
}
