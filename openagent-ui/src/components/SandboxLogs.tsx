import { useShallow } from "zustand/react/shallow";
import { useAppStore } from "../store/context";
import { Dialog } from "./Dialog";

/** An agent's sandbox log tail (`GET /internal/sandbox-agent/logs`), or the master's reason for not giving it. */
export function SandboxLogs() {
  const { logs, close, reload } = useAppStore(
    useShallow((s) => ({ logs: s.sandboxLogs, close: s.closeSandboxLogs, reload: s.openSandboxLogs })),
  );
  const title = `Logs of ${logs.agentId ?? "agent"}`;
  return (
    <Dialog open={logs.open} title={title} onClose={close} className="sandbox-logs">
      {logs.podName ? <p className="hint">Pod {logs.podName}: the last lines of its agent container (the previous run's while it crash-loops).</p> : null}
      {logs.phase === "loading" ? (
        <p role="status" aria-live="polite">
          Loading…
        </p>
      ) : null}
      {logs.phase === "error" && logs.error ? (
        <div className="node-error panel-error" role="alert">
          {logs.error}
        </div>
      ) : null}
      {logs.phase === "done" ? (
        logs.lines.length ? (
          <pre className="log-lines" aria-label={`Log lines of ${logs.agentId}`} tabIndex={0}>
            {logs.lines.join("\n")}
          </pre>
        ) : (
          <p className="hint">The log is empty.</p>
        )
      ) : null}
      <div className="row">
        <span className="spacer" />
        <button type="button" onClick={() => logs.agentId && void reload(logs.agentId)} disabled={logs.phase === "loading"}>
          Reload
        </button>
        <button type="button" onClick={close}>
          Close
        </button>
      </div>
    </Dialog>
  );
}
