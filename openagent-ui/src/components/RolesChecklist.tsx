import type { ComponentType } from "react";
import type { ChecklistItem, SubtaskState } from "../lib/chat";
import { CheckIcon, CircleIcon, CrossIcon, HalfCircleIcon, RetryIcon } from "./Icons";

const MARK: Record<SubtaskState, ComponentType<{ className?: string }>> = {
  pending: CircleIcon,
  running: HalfCircleIcon,
  passed: CheckIcon,
  failed: CrossIcon,
  retried: RetryIcon,
};
const LABEL: Record<SubtaskState, string> = {
  pending: "pending",
  running: "running…",
  passed: "passed",
  failed: "failed",
  retried: "sent back for a retry",
};

/** The plan of an auto-mode run with roles: each sub-task, its state and the verdicts on it. */
export function RolesChecklist({ items }: { items: ChecklistItem[] }) {
  return (
    <ol className="roles-checklist" aria-label="Plan checklist">
      {items.map((item, i) => (
        <Subtask key={i} item={item} number={i + 1} />
      ))}
    </ol>
  );
}

function Subtask({ item, number }: { item: ChecklistItem; number: number }) {
  const Mark = MARK[item.state];
  return (
    <li className={`subtask subtask-${item.state}`} aria-label={`Sub-task ${number}: ${item.state}`}>
      <div className="subtask-head">
        <Mark className="subtask-mark" />
        <span className="subtask-task">{item.task}</span>
        <span className="subtask-state">
          {LABEL[item.state]}
          {item.attempt > 1 ? ` · attempt ${item.attempt}` : ""}
        </span>
      </div>
      {item.criteria.length ? <div className="subtask-criteria">Done when: {item.criteria.join("; ")}</div> : null}
      {item.verdicts.length ? (
        <ul className="subtask-verdicts" aria-label={`Verdicts on sub-task ${number}`}>
          {item.verdicts.map((v, j) => (
            <li key={j} className={`verdict-${v.verdict}`}>
              <strong>{v.role}</strong> · {v.verdict.replace("_", " ")}
              {v.attempt > 1 ? ` (attempt ${v.attempt})` : ""}
              {v.reason ? `: ${v.reason}` : ""}
            </li>
          ))}
        </ul>
      ) : null}
    </li>
  );
}
