import { Handle, Position, type NodeProps } from "@xyflow/react";
import { memo } from "react";
import type { QueryClientNode } from "../../lib/graph";

export const QueryClientNodeView = memo(function QueryClientNodeView({ data }: NodeProps<QueryClientNode>) {
  return (
    <div className="node node-client">
      <Handle type="source" position={Position.Right} isConnectable={false} />
      <div className="node-title">{data.label}</div>
      <div className="node-meta">
        <span className="status status-online">online</span> built-in
      </div>
    </div>
  );
});
