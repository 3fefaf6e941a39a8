import { useReactFlow } from "@xyflow/react";
import { useCallback } from "react";

/** Fit the canvas to its nodes once React Flow has measured the ones just added. */
export function useFitSoon(): () => void {
  const { fitView } = useReactFlow();
  return useCallback(() => {
    setTimeout(() => void fitView({ padding: 0.3, maxZoom: 1.2, duration: 200 }), 50);
  }, [fitView]);
}
