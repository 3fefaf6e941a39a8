import { useReactFlow, type FitViewOptions } from "@xyflow/react";
import { useCallback } from "react";

/**
 * The smallest zoom a fit goes to: low enough that Fit View shows every node of a large
 * workspace (the user zooms in to read); the canvas's own minimum zoom is below it.
 */
export const FIT_MIN_ZOOM = 0.1;

/** The minimap's size in the canvas's bottom-right corner; fitting keeps the nodes above it. */
export const MINIMAP = { width: 168, height: 104, margin: 12 };

/** The zoom buttons' column in the canvas's bottom-left corner (React Flow's Controls, 15 px from the edges). */
export const CONTROLS = { width: 28, margin: 15 };

/**
 * Fit View's room around the nodes: clear of the canvas's edges and of the notices above
 * (top), of the zoom buttons (left) and of the minimap (bottom; it sits bottom-right).
 */
export const FIT_VIEW_OPTIONS: FitViewOptions = {
  padding: {
    top: "40px",
    left: `${CONTROLS.width + 2 * CONTROLS.margin}px`,
    right: "32px",
    bottom: `${MINIMAP.height + 2 * MINIMAP.margin + 8}px`,
  },
  maxZoom: 1.2,
  minZoom: FIT_MIN_ZOOM,
};

/** Fit the canvas to its nodes once React Flow has measured the ones just added. */
export function useFitSoon(): () => void {
  const { fitView } = useReactFlow();
  return useCallback(() => {
    setTimeout(() => void fitView({ ...FIT_VIEW_OPTIONS, duration: 200 }), 50);
  }, [fitView]);
}
