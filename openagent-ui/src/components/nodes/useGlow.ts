import { useAppStore } from "../../store/context";

/** `data-glow` of a node: "active" while its call runs, "fading" for 4 s after an answer used it. */
export function useGlow(nodeId: string): { "data-glow"?: string; key: string } {
  const glow = useAppStore((s) => s.glow[nodeId]);
  // The key restarts the CSS fade animation when a new glow starts.
  return glow ? { "data-glow": glow.phase, key: `${glow.phase}-${glow.seq}` } : { key: "none" };
}
