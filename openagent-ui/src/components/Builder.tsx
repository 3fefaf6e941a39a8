import { memo, type FormEvent } from "react";
import { useShallow } from "zustand/react/shallow";
import { moduleNameProblem, type Check, type Generated } from "../lib/builder";
import { modelLabel } from "../lib/models";
import { useAppStore } from "../store/context";
import { Dialog } from "./Dialog";
import { CheckIcon, CrossIcon } from "./Icons";
import { useFitSoon } from "./useFitSoon";

/** Read-only code with line numbers (a focusable, scrollable region). */
const CodeView = memo(function CodeView({ source }: { source: string }) {
  const lines = source.replace(/\n$/, "").split("\n");
  return (
    <pre className="code-view" tabIndex={0} aria-label="Generated code" role="region">
      <code>
        {lines.map((line, i) => (
          <span className="code-line" key={i}>
            <span className="code-gutter" aria-hidden="true">
              {i + 1}
            </span>
            {line || " "}
            {"\n"}
          </span>
        ))}
      </code>
    </pre>
  );
});

function Checks({ checks }: { checks: Check[] }) {
  return (
    <ul className="checks" aria-label="Checks">
      {checks.map((check) => (
        <li key={check.name} className={check.passed ? "check-ok" : "check-failed"} aria-label={`${check.name} ${check.passed ? "passed" : "failed"}`}>
          {check.passed ? <CheckIcon /> : <CrossIcon />} <strong>{check.name}</strong>{" "}
          <span className="check-state">{check.passed ? "passed" : "failed"}</span>
          {check.detail ? <div className="check-detail">{check.detail}</div> : null}
        </li>
      ))}
    </ul>
  );
}

function verdict(generated: Generated): string {
  const failed = generated.checks.filter((c) => !c.passed).length;
  if (failed === 0) {
    const tries = generated.attempts && generated.attempts > 1 ? ` (after ${generated.attempts} attempts)` : "";
    return `All ${generated.checks.length} checks passed${tries}`;
  }
  return `${failed} of ${generated.checks.length} checks failed`;
}

/** The agent builder: describe, generate (`POST /generate-agent`), read the code and checks, name, save. */
export function Builder() {
  const s = useAppStore(
    useShallow((st) => ({
      b: st.builder,
      connected: st.connection === "connected",
      close: st.closeBuilder,
      setForm: st.setBuilderForm,
      setModule: st.setBuilderModule,
      generate: st.generateAgent,
      save: st.saveAgent,
      cancelOverwrite: st.cancelOverwrite,
      addAgent: st.addAgent,
    })),
  );
  const fitSoon = useFitSoon();
  const { b } = s;
  const form = b.form;
  const busy = b.phase !== "idle";
  const moduleProblem = b.generated ? moduleNameProblem(b.module) : null;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    void s.generate();
  };
  const models = b.models?.allowed_models ?? [];

  return (
    <Dialog open={b.open} title="Agent builder" onClose={s.close} className="builder">
      <div className="builder-body">
        <form className="builder-form" onSubmit={submit} aria-label="Describe the agent">
          <label className="field">
            <span>Name</span>
            <input value={form.name} onChange={(e) => s.setForm({ name: e.target.value })} placeholder="Unit converter" maxLength={100} />
          </label>
          <label className="field">
            <span>Description</span>
            <textarea
              rows={5}
              value={form.description}
              onChange={(e) => s.setForm({ description: e.target.value })}
              placeholder="What it does, its tools and their arguments…"
              maxLength={8000}
            />
          </label>
          <label className="field">
            <span>Tools (optional)</span>
            <input value={form.tools} onChange={(e) => s.setForm({ tools: e.target.value })} placeholder="convert, list_units" spellCheck={false} />
          </label>
          <div className="row">
            <label className="field inline">
              <span>Transport</span>
              <select
                value={form.transport}
                onChange={(e) => {
                  const transport = e.target.value === "invocation" ? "invocation" : "websocket";
                  s.setForm(transport === "invocation" ? { transport, requiresCollaboration: false } : { transport });
                }}
              >
                <option value="websocket">WebSocket</option>
                <option value="invocation">HTTP invocation</option>
              </select>
            </label>
            <label className="check">
              <input
                type="checkbox"
                checked={form.requiresCollaboration}
                disabled={form.transport !== "websocket"}
                onChange={(e) => s.setForm({ requiresCollaboration: e.target.checked })}
              />
              Collaboration
            </label>
          </div>
          <label className="field">
            <span>Model</span>
            <select
              value={form.model ?? ""}
              onChange={(e) => s.setForm({ model: e.target.value || null })}
              disabled={models.length === 0}
            >
              {models.length === 0 ? <option value="">{b.phase === "loading" ? "Loading…" : "the generator's default"}</option> : null}
              {models.map((m) => (
                <option key={m} value={m}>
                  {modelLabel(m)}
                  {m === b.models?.default_model ? " (default)" : ""}
                </option>
              ))}
            </select>
          </label>
          {b.unavailable ? (
            <div className="node-error panel-error" role="alert">
              {b.unavailable}
            </div>
          ) : null}
          <div className="row">
            <button type="submit" disabled={busy || !s.connected || b.unavailable !== null}>
              {b.phase === "generating" ? "Generating…" : "Generate"}
            </button>
            {b.phase === "generating" ? (
              <span className="hint" role="status">
                The master's LLM is writing the module, then it is checked (parse, import, smoke run)…
              </span>
            ) : null}
          </div>
        </form>

        <section className="builder-result" aria-label="Generated agent">
          {b.error ? (
            <div className="node-error panel-error" role="alert" aria-label="Builder error">
              {b.error.message}
            </div>
          ) : null}
          {!b.generated && !b.error ? (
            <p className="hint">
              Describe the agent and press Generate. The code appears here with the checks it passed; name the module
              and save it to <code>agents/</code> on the master. It is then listed in the sidebar, ready to drag.
            </p>
          ) : null}
          {b.generated ? (
            <>
              <p className={b.generated.passed ? "verdict ok" : "verdict failed"} role="status" aria-label="Check verdict">
                {verdict(b.generated)}
                {b.generated.agentId ? ` · agent id ${b.generated.agentId}` : ""}
                {b.generated.model ? ` · ${modelLabel(b.generated.model)}` : ""}
              </p>
              <Checks checks={b.generated.checks} />
              <p className="hint" aria-label="What the checks are">
                The checks are a second line that catches mistakes, not a security boundary: what agent code can reach is
                bounded by the process it runs in (its own user, key and limits).
              </p>
              {b.generated.source ? <CodeView source={b.generated.source} /> : null}
              {b.generated.source ? (
                <div className="save-row">
                  <label className="field inline">
                    <span>Module name</span>
                    <input
                      value={b.module}
                      onChange={(e) => s.setModule(e.target.value)}
                      spellCheck={false}
                      aria-invalid={moduleProblem !== null}
                      aria-describedby="module-hint"
                    />
                  </label>
                  <span id="module-hint" className={moduleProblem ? "node-error" : "hint"}>
                    {moduleProblem ?? `agents/${b.module}.py`}
                  </span>
                  <span className="spacer" />
                  <button type="button" onClick={() => void s.save(false)} disabled={busy || moduleProblem !== null}>
                    {b.phase === "saving" ? "Saving…" : b.generated.passed ? "Save" : "Save anyway"}
                  </button>
                </div>
              ) : null}
              {b.confirmOverwrite ? (
                <div className="confirm" role="group" aria-label="Overwrite the existing module?">
                  <p role="alert">{b.confirmOverwrite}</p>
                  <button type="button" onClick={() => void s.save(true)} disabled={busy}>
                    Overwrite agents/{b.module}.py
                  </button>
                  <button type="button" onClick={s.cancelOverwrite}>
                    Keep the existing file
                  </button>
                </div>
              ) : null}
              {b.saved ? (
                <div className="saved" role="status" aria-label="Saved agent">
                  Saved <code>{b.saved.file}</code> ({b.saved.handler}).{" "}
                  {b.saved.agentId ? (
                    <>
                      <strong>{b.saved.agentId}</strong> is listed in the sidebar, ready to drag onto the canvas.{" "}
                      <button
                        type="button"
                        className="small"
                        onClick={() => {
                          s.addAgent(b.saved!.agentId!);
                          s.close();
                          fitSoon();
                        }}
                      >
                        Add to canvas
                      </button>
                    </>
                  ) : (
                    "Discovery does not list it: see the sidebar's discovery problems."
                  )}
                </div>
              ) : null}
            </>
          ) : null}
        </section>
      </div>
    </Dialog>
  );
}
