import { Handle, Position, type NodeProps } from "@xyflow/react";
import { memo } from "react";
import { useShallow } from "zustand/react/shallow";
import type { OrchestratorNode } from "../../lib/graph";
import { linkedAgentIds } from "../../lib/graph";
import { modelLabel } from "../../lib/models";
import { useAppStore } from "../../store/context";
import { useGlow } from "./useGlow";

export const OrchestratorNodeView = memo(function OrchestratorNodeView({ id, data }: NodeProps<OrchestratorNode>) {
  const { key, ...glow } = useGlow(id);
  const { model, linked, connected } = useAppStore(
    useShallow((s) => ({ model: s.model, linked: linkedAgentIds(s.edges).length, connected: s.connection === "connected" })),
  );
  return (
    <div className="node node-orchestrator" key={key} {...glow}>
      <Handle type="target" position={Position.Right} id="agents" />
      <Handle type="target" position={Position.Left} id="client" />
      <Handle type="target" position={Position.Top} id="top" />
      <Handle type="target" position={Position.Bottom} id="bottom" />
      <div className="node-title">{data.label}</div>
      <div className="node-meta">{connected ? (model ? modelLabel(model) : "default model") : "not connected"}</div>
      <div className="node-meta">
        {linked} linked agent{linked === 1 ? "" : "s"}
      </div>
    </div>
  );
});
