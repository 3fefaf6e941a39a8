import { useShallow } from "zustand/react/shallow";
import { useAppStore } from "../store/context";
import { ApprovalCard } from "./ApprovalCard";
import { Dialog } from "./Dialog";

/** The pending approvals of every session (`GET /approvals`), each decidable here. */
export function ApprovalsPanel() {
  const s = useAppStore(
    useShallow((st) => ({
      // Never for a key without the query permission (a viewer): GET /approvals would be refused.
      open: st.approvalsPanelOpen && st.canQuery(),
      pending: st.pendingApprovals,
      // Decided here (or refused: 409): kept on screen with the outcome after they leave the pending list.
      decidedHere: Object.values(st.approvalCards)
        .filter((c) => c.approval.session_id !== st.sessionId)
        .map((c) => c.approval.approval_id)
        .join("\n"),
      error: st.approvalsError,
      sessionId: st.sessionId,
      setOpen: st.setApprovalsPanelOpen,
      reload: st.loadPendingApprovals,
    })),
  );
  const others = s.pending.filter((a) => a.session_id !== s.sessionId);
  const mine = s.pending.length - others.length;
  const ids = [...new Set([...others.map((a) => a.approval_id), ...(s.decidedHere ? s.decidedHere.split("\n") : [])])];
  return (
    <Dialog open={s.open} title="Pending approvals" onClose={() => s.setOpen(false)} className="approvals-panel">
      <div className="row">
        <span className="hint">
          {others.length} waiting in other sessions{mine ? `, ${mine} in this chat's session (shown in the chat)` : ""}
        </span>
        <span className="spacer" />
        <button type="button" className="small" onClick={() => void s.reload()}>
          Refresh
        </button>
      </div>
      {s.error ? (
        <div className="node-error" role="alert">
          {s.error}
        </div>
      ) : null}
      <ul className="approval-list" aria-label="Approvals of other sessions">
        {ids.map((id) => (
          <li key={id}>
            <ApprovalCard approvalId={id} showSession />
          </li>
        ))}
      </ul>
    </Dialog>
  );
}
