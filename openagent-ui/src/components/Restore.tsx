import { useShallow } from "zustand/react/shallow";
import { restoreSummary } from "../lib/builder";
import { useAppStore } from "../store/context";
import { Dialog } from "./Dialog";

/** "Restore on master": the canvas's workspace sent to `POST /internal/workspace/restore`, and each agent's outcome. */
export function Restore() {
  const { restore, close, again, baseUrl } = useAppStore(
    useShallow((s) => ({ restore: s.restore, close: s.closeRestore, again: s.restoreOnMaster, baseUrl: s.api?.baseUrl ?? "" })),
  );
  return (
    <Dialog open={restore.open} title="Restore on master" onClose={close} className="restore">
      <p className="hint">
        The canvas's workspace went to {baseUrl || "this master"}: its HTTP agents are registered as{" "}
        <code>POST /register</code> does (health-checked); WebSocket agents connect by themselves and are skipped.
      </p>
      {restore.phase === "running" ? (
        <p role="status" aria-live="polite">
          Restoring…
        </p>
      ) : null}
      {restore.phase === "error" && restore.error ? (
        <div className="node-error panel-error" role="alert">
          {restore.error}
        </div>
      ) : null}
      {restore.phase === "done" ? (
        <>
          <p role="status" aria-label="Restore summary">
            {restoreSummary(restore.outcomes)}
          </p>
          {restore.outcomes.length ? (
            <table className="outcomes" aria-label="Restore outcome per agent">
              <thead>
                <tr>
                  <th scope="col">Agent</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">Reason</th>
                </tr>
              </thead>
              <tbody>
                {restore.outcomes.map((o) => (
                  <tr key={o.agent_id} aria-label={`${o.agent_id} ${o.status}`}>
                    <th scope="row">{o.agent_id}</th>
                    <td>
                      <span className={`status outcome-${o.status}`}>{o.status}</span>
                    </td>
                    <td className="reason">{o.reason ?? ""}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : null}
        </>
      ) : null}
      <div className="row">
        <span className="spacer" />
        <button type="button" onClick={() => void again()} disabled={restore.phase === "running"}>
          Restore again
        </button>
        <button type="button" onClick={close}>
          Close
        </button>
      </div>
    </Dialog>
  );
}
