import { sandboxBadge, type SandboxField } from "../lib/sandbox";

/** The Pod status of a sandboxed agent: "Pod Running · ready · 0 restarts", "CrashLoopBackOff · 5 restarts". */
export function SandboxBadge({ agentId, field }: { agentId: string; field: SandboxField }) {
  const badge = sandboxBadge(field);
  return (
    <span className={`sandbox-badge sandbox-${badge.tone}`} title={badge.title} aria-label={`Sandbox status of ${agentId}`}>
      {badge.text}
    </span>
  );
}
