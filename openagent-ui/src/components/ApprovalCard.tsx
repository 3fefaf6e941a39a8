import { useEffect, useMemo, useState } from "react";
import { useShallow } from "zustand/react/shallow";
import { argumentsOf, draftOf, fieldsOf, timeLeft, toolOf, type ArgDraft, type ArgField } from "../lib/approvals";
import { useAppStore } from "../store/context";

/** The clock, ticking every `ms` (for the time left). */
function useNow(ms = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return now;
}

function FieldInput({ field, value, onChange }: { field: ArgField; value: ArgDraft[string]; onChange(v: string | boolean): void }) {
  const label = `${field.name}${field.required ? " *" : ""}`;
  if (field.kind === "boolean") {
    return (
      <label className="check" title={field.description || undefined}>
        <input type="checkbox" checked={value === true} onChange={(e) => onChange(e.target.checked)} /> {field.name}
      </label>
    );
  }
  const text = typeof value === "string" ? value : "";
  return (
    <label className="field" title={field.description || undefined}>
      <span>
        {label}
        {field.kind === "json" ? " (JSON)" : ""}
      </span>
      {field.kind === "enum" ? (
        <select aria-label={field.name} value={text} onChange={(e) => onChange(e.target.value)}>
          {field.required ? null : <option value="">—</option>}
          {field.options.map((o) => (
            <option key={o} value={o}>
              {o}
            </option>
          ))}
        </select>
      ) : field.kind === "json" ? (
        <textarea aria-label={field.name} rows={2} value={text} spellCheck={false} onChange={(e) => onChange(e.target.value)} />
      ) : (
        <input
          aria-label={field.name}
          inputMode={field.kind === "string" ? undefined : "decimal"}
          value={text}
          spellCheck={false}
          onChange={(e) => onChange(e.target.value)}
        />
      )}
    </label>
  );
}

const DECIDED_LABEL: Record<string, string> = {
  approved: "Approved",
  rejected: "Rejected",
  expired: "Expired: no one decided in time",
  pending: "Pending",
};

/**
 * A tool call waiting for a person: agent, tool, the arguments as a form built from the tool's
 * JSON schema (from `GET /agents`), Approve, Reject with a reason, "always in this session" and
 * the time left until `expires_at`.
 */
export function ApprovalCard({ approvalId, showSession = false }: { approvalId: string; showSession?: boolean }) {
  const { card, pending, catalog, decide } = useAppStore(
    useShallow((s) => ({
      card: s.approvalCards[approvalId],
      pending: s.pendingApprovals.find((a) => a.approval_id === approvalId),
      catalog: s.catalog,
      decide: s.decideApproval,
    })),
  );
  const approval = card?.approval ?? pending;
  const tool = approval ? toolOf(catalog, approval.agent_id, approval.tool_name) : null;
  const fields = useMemo(() => (approval ? fieldsOf(tool?.parameters, approval.arguments) : []), [approval, tool]);
  const [draft, setDraft] = useState<ArgDraft>(() => (approval ? draftOf(fields, approval.arguments) : {}));
  const [reason, setReason] = useState("");
  const [remember, setRemember] = useState(false);
  const [problems, setProblems] = useState<string[]>([]);
  const now = useNow();
  useEffect(() => {
    // The tool's schema may arrive after the card (GET /agents): keep edits, add new fields.
    if (approval) setDraft((d) => ({ ...draftOf(fields, approval.arguments), ...d }));
  }, [fields, approval]);
  if (!approval) return null;

  const phase = card?.phase ?? "pending";
  const status = approval.status ?? "pending";
  const left = timeLeft(approval.expires_at, now);
  const open = phase !== "decided" && status === "pending" && left !== "expired";
  const title = `${approval.agent_id} · ${approval.tool_name}`;

  const approve = () => {
    const read = argumentsOf(fields, draft, approval.arguments);
    setProblems(read.problems);
    if (read.problems.length === 0) void decide(approvalId, { decision: "approve", arguments: read.arguments, rememberSession: remember });
  };
  const reject = () => {
    setProblems([]);
    void decide(approvalId, { decision: "reject", message: reason });
  };

  return (
    <section className={`approval approval-${open ? "open" : "closed"}`} aria-label={`Approval ${title}`}>
      <div className="approval-head">
        <strong>Approval needed</strong> <span className="approval-tool">{title}</span>
        <span className="spacer" />
        {open ? (
          <span className="approval-time" aria-label="Time left">
            {left} left
          </span>
        ) : (
          <span className={`approval-status approval-${status}`} role="status" aria-label="Decision">
            {phase === "sending" ? "Sending…" : DECIDED_LABEL[status === "pending" && left === "expired" ? "expired" : status] ?? status}
          </span>
        )}
      </div>
      {showSession ? <div className="hint">Session {approval.session_id.slice(0, 12)}</div> : null}
      {tool?.description ? <div className="hint">{tool.description}</div> : null}
      <fieldset className="approval-args" disabled={!open || phase === "sending"} aria-label="Arguments">
        <legend>Arguments{tool ? "" : " (the tool's schema is not listed by GET /agents)"}</legend>
        {fields.length === 0 ? <div className="hint">No arguments</div> : null}
        {fields.map((field) => (
          <FieldInput key={field.name} field={field} value={draft[field.name] ?? ""} onChange={(v) => setDraft({ ...draft, [field.name]: v })} />
        ))}
      </fieldset>
      {open ? (
        <div className="approval-actions">
          <label className="check">
            <input type="checkbox" checked={remember} onChange={(e) => setRemember(e.target.checked)} /> Always in this session
          </label>
          <button type="button" className="primary" onClick={approve} disabled={phase === "sending"}>
            Approve
          </button>
          <label className="field inline grow">
            <span>Reason</span>
            <input value={reason} onChange={(e) => setReason(e.target.value)} placeholder="told to the model" />
          </label>
          <button type="button" onClick={reject} disabled={phase === "sending"}>
            Reject
          </button>
        </div>
      ) : null}
      {problems.length ? (
        <div className="node-error" role="alert">
          {problems.join("; ")}
        </div>
      ) : null}
      {card?.error ? (
        <div className="node-error" role="alert" aria-label="Approval error">
          {card.error}
        </div>
      ) : null}
    </section>
  );
}
