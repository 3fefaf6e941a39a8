import { useState } from "react";
import type { Plan, PlanStep } from "../api/types";
import { parseArguments } from "../lib/chat";
import { useAppStore } from "../store/context";

interface Draft {
  agent_id: string;
  tool_name: string;
  intent: string;
  args: string;
}

/** A proposed plan as editable steps; Execute sends them back as `auto_plan_execute`. */
export function PlanEditor({ entryId, plan, state }: { entryId: string; plan: Plan; state: string | undefined }) {
  const executePlan = useAppStore((s) => s.executePlan);
  const discardPlan = useAppStore((s) => s.discardPlan);
  const busy = useAppStore((s) => s.busy);
  const [drafts, setDrafts] = useState<Draft[]>(() =>
    plan.steps.map((step) => ({
      agent_id: step.agent_id,
      tool_name: step.tool_name,
      intent: step.intent ?? "",
      args: JSON.stringify(step.arguments ?? {}),
    })),
  );
  const [error, setError] = useState<string | null>(null);
  const editable = state === "pending";
  const change = (index: number, field: keyof Draft, value: string) =>
    setDrafts(drafts.map((d, i) => (i === index ? { ...d, [field]: value } : d)));

  const execute = () => {
    try {
      const steps: PlanStep[] = drafts.map((d, i) => ({
        agent_id: d.agent_id.trim(),
        tool_name: d.tool_name.trim(),
        intent: d.intent,
        arguments: parseArguments(d.args, i + 1),
      }));
      if (steps.length === 0) throw new Error("the plan has no step left");
      setError(null);
      void executePlan(entryId, steps);
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return (
    <fieldset className="plan" aria-label={`Plan ${plan.plan_id}`} disabled={!editable || busy}>
      <legend>
        Proposed plan{plan.summary ? `: ${plan.summary}` : ""} <span className="plan-state">({state})</span>
      </legend>
      <ol>
        {drafts.map((d, i) => (
          <li key={i} className="plan-step">
            <label className="field inline">
              <span>Step {i + 1} agent</span>
              <input value={d.agent_id} onChange={(e) => change(i, "agent_id", e.target.value)} />
            </label>
            <label className="field inline">
              <span>Step {i + 1} tool</span>
              <input value={d.tool_name} onChange={(e) => change(i, "tool_name", e.target.value)} />
            </label>
            <label className="field inline">
              <span>Step {i + 1} intent</span>
              <input value={d.intent} onChange={(e) => change(i, "intent", e.target.value)} />
            </label>
            <label className="field">
              <span>Step {i + 1} arguments (JSON)</span>
              <textarea rows={2} value={d.args} onChange={(e) => change(i, "args", e.target.value)} spellCheck={false} />
            </label>
            <button type="button" className="small" onClick={() => setDrafts(drafts.filter((_, j) => j !== i))}>
              Remove step {i + 1}
            </button>
          </li>
        ))}
      </ol>
      {error ? (
        <div className="node-error" role="alert">
          {error}
        </div>
      ) : null}
      <div className="row">
        <button type="button" onClick={execute}>
          Execute plan
        </button>
        <button type="button" onClick={() => discardPlan(entryId)}>
          Discard plan
        </button>
      </div>
    </fieldset>
  );
}
