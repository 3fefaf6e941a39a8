import {
  Background,
  ConnectionMode,
  ControlButton,
  Controls,
  MiniMap,
  ReactFlow,
  useReactFlow,
  type IsValidConnection,
} from "@xyflow/react";
import { useCallback, useState, type DragEvent } from "react";
import { useShallow } from "zustand/react/shallow";
import { linkedAgentOf } from "../lib/graph";
import { useAppStore } from "../store/context";
import { edgeTypes } from "./FloatingEdge";
import { nodeTypes } from "./nodes";
import { FIT_MIN_ZOOM, FIT_VIEW_OPTIONS, MINIMAP } from "./useFitSoon";

export const DRAG_TYPE = "application/x-openagent-agent";

const isValidConnection: IsValidConnection = (connection) => linkedAgentOf(connection) !== null;

const MINIMAP_KEY = "openagent.ui.minimap";

/** The minimap is shown unless the user hid it (remembered in local storage). */
function useMinimapShown(): [boolean, () => void] {
  const [shown, setShown] = useState(() => {
    try {
      return localStorage.getItem(MINIMAP_KEY) !== "hidden";
    } catch {
      return true;
    }
  });
  const toggle = useCallback(() => {
    setShown((was) => {
      try {
        localStorage.setItem(MINIMAP_KEY, was ? "hidden" : "shown");
      } catch {
        /* not remembered */
      }
      return !was;
    });
  }, []);
  return [shown, toggle];
}

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
  const [minimapShown, toggleMinimap] = useMinimapShown();

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
        edgeTypes={edgeTypes}
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
        fitViewOptions={FIT_VIEW_OPTIONS}
        minZoom={FIT_MIN_ZOOM / 2}
        panOnScroll
        proOptions={{ hideAttribution: true }}
        onlyRenderVisibleElements
      >
        <Background gap={24} color="#2c3242" />
        <Controls showInteractive={false} fitViewOptions={FIT_VIEW_OPTIONS}>
          <ControlButton
            onClick={toggleMinimap}
            aria-label={minimapShown ? "Hide minimap" : "Show minimap"}
            title={minimapShown ? "Hide minimap" : "Show minimap"}
            aria-pressed={minimapShown}
          >
            <svg viewBox="0 0 16 16" aria-hidden="true" style={{ fill: "none" }}>
              <path d="M1 3l4.5-2 5 2L15 1v12l-4.5 2-5-2L1 15zM5.5 2.8v10.1M10.5 3.1v10.1" fill="none" stroke="currentColor" strokeWidth="1.4" />
            </svg>
          </ControlButton>
        </Controls>
        {minimapShown ? (
          <MiniMap
            pannable
            zoomable
            ariaLabel="Minimap"
            style={{ width: MINIMAP.width, height: MINIMAP.height, margin: MINIMAP.margin }}
            bgColor="#171a23"
            maskColor="rgba(15, 17, 23, 0.55)"
            maskStrokeColor="#8b5cf6"
            maskStrokeWidth={1}
            nodeColor={(n) => (n.type === "agent" ? "#6d5bd0" : n.type === "orchestrator" ? "#8b5cf6" : "#3b4357")}
            nodeStrokeColor="#0f1117"
            nodeBorderRadius={6}
          />
        ) : null}
      </ReactFlow>
    </section>
  );
}
