import { useReactFlow, type FitViewOptions } from "@xyflow/react";
import { useCallback } from "react";

/** The smallest zoom a fit goes to: node text stays at least 10 px tall; the user scrolls to the rest. */
export const FIT_MIN_ZOOM = 0.8;

/** The minimap's size in the canvas's bottom-right corner; fitting keeps the nodes above it. */
export const MINIMAP = { width: 168, height: 104, margin: 12 };

export const FIT_VIEW_OPTIONS: FitViewOptions = {
  padding: { top: "48px", left: "48px", right: "48px", bottom: `${MINIMAP.height + 2 * MINIMAP.margin + 8}px` },
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
