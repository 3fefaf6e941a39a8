import {
  Background,
  ConnectionMode,
  Controls,
  MiniMap,
  ReactFlow,
  useReactFlow,
  type IsValidConnection,
} from "@xyflow/react";
import { useCallback, type DragEvent } from "react";
import { useShallow } from "zustand/react/shallow";
import { linkedAgentOf } from "../lib/graph";
import { useAppStore } from "../store/context";
import { nodeTypes } from "./nodes";

export const DRAG_TYPE = "application/x-openagent-agent";

const isValidConnection: IsValidConnection = (connection) => linkedAgentOf(connection) !== null;

export function Canvas() {
  const { nodes, edges, onNodesChange, onEdgesChange, onConnect, onDelete, beginDrag, addAgent } = useAppStore(
    useShallow((s) => ({
      nodes: s.nodes,
      edges: s.edges,
      onNodesChange: s.onNodesChange,
      onEdgesChange: s.onEdgesChange,
      onConnect: s.onConnect,
      onDelete: s.onDelete,
      beginDrag: s.beginDrag,
      addAgent: s.addAgent,
    })),
  );
  const { screenToFlowPosition } = useReactFlow();

  const onDragOver = useCallback((event: DragEvent) => {
    if (event.dataTransfer.types.includes(DRAG_TYPE)) {
      event.preventDefault();
      event.dataTransfer.dropEffect = "copy";
    }
  }, []);
  const onDrop = useCallback(
    (event: DragEvent) => {
      const agentId = event.dataTransfer.getData(DRAG_TYPE);
      if (!agentId) return;
      event.preventDefault();
      const position = screenToFlowPosition({ x: event.clientX, y: event.clientY });
      addAgent(agentId, { x: position.x - 90, y: position.y - 30 });
    },
    [addAgent, screenToFlowPosition],
  );

  return (
    <section className="canvas" aria-label="Canvas" onDragOver={onDragOver} onDrop={onDrop}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onConnect={onConnect}
        onDelete={onDelete}
        onNodeDragStart={beginDrag}
        onSelectionDragStart={beginDrag}
        isValidConnection={isValidConnection}
        connectionMode={ConnectionMode.Loose}
        deleteKeyCode={["Delete", "Backspace"]}
        multiSelectionKeyCode={["Control", "Meta", "Shift"]}
        fitView
        fitViewOptions={{ padding: 0.3, maxZoom: 1.2 }}
        minZoom={0.05}
        proOptions={{ hideAttribution: true }}
        onlyRenderVisibleElements
      >
        <Background gap={24} />
        <Controls showInteractive={false} />
        <MiniMap pannable zoomable ariaLabel="Minimap" nodeColor={(n) => (n.type === "agent" ? "#7c3aed" : "#0ea5e9")} />
      </ReactFlow>
    </section>
  );
}
