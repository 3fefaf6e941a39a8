import { Handle, Position, type NodeProps } from "@xyflow/react";
import { memo } from "react";
import { useShallow } from "zustand/react/shallow";
import { TRANSPORT_LABEL } from "../../lib/agents";
import { awaitingTools } from "../../lib/approvals";
import type { AgentNode } from "../../lib/graph";
import { hasLink } from "../../lib/graph";
import { useAppStore } from "../../store/context";
import { LockIcon, PauseIcon } from "../Icons";
import { SandboxBadge } from "../SandboxBadge";
import { useGlow } from "./useGlow";

function since(epochSeconds: number | null | undefined): string | null {
  if (!epochSeconds) return null;
  const seconds = Math.max(0, Math.round(Date.now() / 1000 - epochSeconds));
  return seconds < 60 ? `${seconds}s ago` : `${Math.round(seconds / 60)}m ago`;
}

export const AgentNodeView = memo(function AgentNodeView({ id, data }: NodeProps<AgentNode>) {
  const { key, ...glow } = useGlow(id);
  const { entry, linked, openLogs, awaitingText } = useAppStore(
    useShallow((s) => ({
      entry: s.catalogById[data.agentId],
      linked: hasLink(s.edges, data.agentId),
      openLogs: s.openSandboxLogs,
      // A string, not a fresh array, so the shallow comparison holds between renders.
      awaitingText: awaitingTools(s.approvalCards, data.agentId).join("\n"),
    })),
  );
  const awaiting = awaitingText ? awaitingText.split("\n") : [];
  const sandbox = entry?.sandbox;
  const status = entry?.status ?? "offline";
  const lastCheck = since(entry?.lastCheck);
  return (
    <div className={`node node-agent${linked ? " linked" : ""}${awaiting.length ? " awaiting" : ""}`} key={key} {...glow}>
      <Handle type="source" position={Position.Left} title={`Link ${data.agentId}`} />
      <div className="node-title">{entry?.label ?? data.agentId}</div>
      <div className="node-meta">
        <span className={`status status-${status}`}>{status === "online" ? "connected" : status}</span>{" "}
        {TRANSPORT_LABEL[entry?.transport ?? "websocket"]}
        {lastCheck ? ` · checked ${lastCheck}` : ""}
      </div>
      {entry?.lastError && status === "DOWN" ? <div className="node-error">{entry.lastError}</div> : null}
      {sandbox ? (
        <div className="node-sandbox">
          <SandboxBadge agentId={data.agentId} field={sandbox} />
          <button
            type="button"
            className="small nodrag"
            onClick={() => void openLogs(data.agentId)}
            aria-label={`Logs of ${data.agentId}`}
            title="GET /internal/sandbox-agent/logs: the agent container's log tail"
          >
            Logs
          </button>
        </div>
      ) : null}
      {sandbox?.log_tail?.length ? (
        <pre className="node-log-tail" aria-label={`Log tail of ${data.agentId}`}>
          {sandbox.log_tail.slice(-2).join("\n")}
        </pre>
      ) : null}
      {awaiting.length ? (
        <div className="node-awaiting" role="status" aria-label={`Approval awaited by ${data.agentId}`}>
          <PauseIcon /> {awaiting.join(", ")} awaits approval
        </div>
      ) : null}
      <ul className="node-tools" aria-label={`Tools of ${data.agentId}`}>
        {(entry?.tools ?? []).slice(0, 4).map((tool) => (
          <li key={tool.name} className={awaiting.includes(tool.name) ? "tool-awaiting" : undefined}>
            {tool.name}
            {tool.requires_approval ? <LockIcon className="tool-lock" title="requires approval" /> : null}
          </li>
        ))}
        {(entry?.tools.length ?? 0) > 4 ? <li>+{(entry?.tools.length ?? 0) - 4} more</li> : null}
      </ul>
    </div>
  );
});
