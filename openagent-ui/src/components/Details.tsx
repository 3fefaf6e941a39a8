import { useShallow } from "zustand/react/shallow";
import { TRANSPORT_LABEL } from "../lib/agents";
import { hasLink, isAgentNode } from "../lib/graph";
import { useAppStore } from "../store/context";
import { SandboxBadge } from "./SandboxBadge";

function short(value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/** The selected agent: status, tools, how to start it, link/unlink, and its last tool calls. */
export function Details() {
  const agentId = useAppStore((s) => {
    const node = s.nodes.find((n) => n.selected && isAgentNode(n));
    return node && isAgentNode(node) ? node.data.agentId : null;
  });
  const { entry, linked, note, logs, link, unlink, startInMaster, connected, openLogs, stopDeployment, admin } = useAppStore(
    useShallow((s) => ({
      entry: agentId ? s.catalogById[agentId] : undefined,
      linked: agentId ? hasLink(s.edges, agentId) : false,
      note: agentId ? s.linkNotes[agentId] : undefined,
      logs: agentId ? s.callLogs[agentId] : undefined,
      link: s.link,
      unlink: s.unlink,
      startInMaster: s.startInMaster,
      connected: s.connection === "connected",
      openLogs: s.openSandboxLogs,
      stopDeployment: s.stopDeployment,
      admin: s.isAdmin(),
    })),
  );
  if (!agentId) {
    return (
      <aside className="details" aria-label="Node details">
        <h2>Details</h2>
        <p className="hint">Select an agent on the canvas to see its tools, status and last calls.</p>
        <p className="hint">
          Keys: Delete removes the selection, Ctrl/Shift-click selects several, Ctrl+Z / Ctrl+Shift+Z undo and redo.
        </p>
      </aside>
    );
  }
  return (
    <aside className="details" aria-label="Node details">
      <h2>{entry?.label ?? agentId}</h2>
      <dl>
        <dt>Agent id</dt>
        <dd>{agentId}</dd>
        <dt>Status</dt>
        <dd>
          <span className={`status status-${entry?.status ?? "offline"}`}>{entry?.status ?? "unknown"}</span>
          {entry?.lastError ? ` — ${entry.lastError}` : ""}
        </dd>
        <dt>Transport</dt>
        <dd>
          {TRANSPORT_LABEL[entry?.transport ?? "websocket"]}
          {entry?.transport === "invocation" && entry.invocationBaseUrl ? ` ${entry.invocationBaseUrl}` : ""}
          {entry?.remoteUrl ? ` ${entry.remoteUrl}` : ""}
        </dd>
        {entry?.module ? (
          <>
            <dt>Module</dt>
            <dd>{entry.module}</dd>
          </>
        ) : null}
        {entry?.sandbox ? (
          <>
            <dt>Sandbox</dt>
            <dd>
              <SandboxBadge agentId={agentId} field={entry.sandbox} />
              {entry.sandbox.pod ? <div className="hint">Pod {entry.sandbox.pod}{entry.sandbox.namespace ? ` in ${entry.sandbox.namespace}` : ""}</div> : null}
              {entry.sandbox.error ? <div className="node-error">{entry.sandbox.error}</div> : null}
              <button type="button" className="small" onClick={() => void openLogs(agentId)}>
                Show logs
              </button>{" "}
              {admin ? (
                <button type="button" className="small" onClick={() => void stopDeployment(agentId)}>
                  Stop deployment
                </button>
              ) : null}
            </dd>
          </>
        ) : null}
      </dl>
      {linked ? (
        <button type="button" onClick={() => unlink(agentId)}>
          Unlink from orchestrator
        </button>
      ) : (
        <button type="button" onClick={() => void link(agentId)}>
          Link to orchestrator
        </button>
      )}
      {note ? (
        <div className={`link-note link-note-${note.kind}`} role={note.kind === "error" ? "alert" : "status"}>
          {note.kind === "start" ? (
            <>
              <p>Start it on the master's machine:</p>
              <code className="command">{note.text}</code>
              <button type="button" className="small" onClick={() => void navigator.clipboard?.writeText(note.text)}>
                Copy command
              </button>{" "}
              {connected && admin && (entry?.handler ?? entry?.module) ? (
                <button
                  type="button"
                  className="small"
                  title="POST /internal/yaml-agents/start: run it inside the master's process"
                  onClick={() => void startInMaster(agentId)}
                >
                  Start in master
                </button>
              ) : null}
            </>
          ) : (
            note.text
          )}
        </div>
      ) : null}
      <h3>Tools</h3>
      <ul className="tool-list">
        {(entry?.tools ?? []).map((tool) => (
          <li key={tool.name}>
            <strong>{tool.name}</strong> {tool.description}
          </li>
        ))}
      </ul>
      <h3>Last calls</h3>
      {logs && logs.length ? (
        <ol className="call-log" aria-label={`Last calls of ${agentId}`}>
          {[...logs].reverse().map((log, i) => (
            <li key={`${log.callId ?? "x"}-${i}`} className={`call call-${log.state}`}>
              <div>
                <strong>{log.toolName}</strong>({short(log.arguments)}) — {log.state}
              </div>
              {log.state === "ok" ? <div className="call-result">{short(log.result)}</div> : null}
              {log.error ? <div className="node-error">{log.error}</div> : null}
            </li>
          ))}
        </ol>
      ) : (
        <p className="hint">No call yet.</p>
      )}
    </aside>
  );
}
