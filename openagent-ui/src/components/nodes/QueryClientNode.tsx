import { Handle, Position, type NodeProps } from "@xyflow/react";
import { memo } from "react";
import type { QueryClientNode } from "../../lib/graph";
import { useAppStore } from "../../store/context";
import type { ConnectionState } from "../../store/store";

/** The page itself, asking the master: its status is the header's connection state. */
const STATUS: Record<ConnectionState | "lost", { className: string; text: string }> = {
  connected: { className: "status-online", text: "online" },
  connecting: { className: "status-UNKNOWN", text: "connecting…" },
  error: { className: "status-DOWN", text: "not connected" },
  disconnected: { className: "status-offline", text: "not connected" },
  lost: { className: "status-DOWN", text: "connection lost" },
};

export const QueryClientNodeView = memo(function QueryClientNodeView({ data }: NodeProps<QueryClientNode>) {
  const connection = useAppStore((s) => (s.connection === "connected" && s.lost ? "lost" : s.connection));
  const status = STATUS[connection];
  return (
    <div className="node node-client">
      <Handle type="source" position={Position.Right} isConnectable={false} />
      <div className="node-title">{data.label}</div>
      <div className="node-meta">
        <span className={`status ${status.className}`}>{status.text}</span> built-in
      </div>
    </div>
  );
});
