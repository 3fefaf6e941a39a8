import { useEffect, useRef, useState, type FormEvent, type KeyboardEvent } from "react";
import { useShallow } from "zustand/react/shallow";
import type { Attachment, PromptProfile } from "../api/types";
import { attachmentProblem, formatBytes, type AssistantEntry, type ChatEntry, type SessionFile, type ToolStep } from "../lib/chat";
import { linkedAgentIds } from "../lib/graph";
import { modelLabel } from "../lib/models";
import { useAppStore } from "../store/context";
import { ApprovalCard } from "./ApprovalCard";
import { ChatResizer } from "./ChatResizer";
import { CrossIcon } from "./Icons";
import { PlanEditor } from "./PlanEditor";
import { RolesChecklist } from "./RolesChecklist";

function text(value: unknown): string {
  const s = typeof value === "string" ? value : JSON.stringify(value);
  return s.length > 400 ? `${s.slice(0, 400)}…` : s;
}

function Step({ step }: { step: ToolStep }) {
  return (
    <li className={`step step-${step.state}`} aria-label={`Tool call ${step.agentId ?? "master"} ${step.toolName}`}>
      <div>
        <strong>{step.agentId ?? "master"}</strong> · {step.toolName}
        <code>({text(step.arguments)})</code> <span className="step-state">{step.state === "running" ? "running…" : step.state}</span>
      </div>
      {step.progress && step.state === "running" ? (
        <div className="progress">
          {step.progress.progress !== null ? <progress value={step.progress.progress} max={1} aria-label="Tool progress" /> : null}{" "}
          {step.progress.message}
        </div>
      ) : null}
      {step.state === "ok" ? <div className="call-result">→ {text(step.result)}</div> : null}
      {step.state === "error" ? <div className="node-error"><CrossIcon /> {step.error}</div> : null}
    </li>
  );
}

function Assistant({ entry }: { entry: AssistantEntry }) {
  return (
    <li className={`msg msg-assistant msg-${entry.state}`} aria-label="Orchestrator answer" aria-busy={entry.state === "streaming"}>
      {entry.checklist?.length ? <RolesChecklist items={entry.checklist} /> : null}
      {entry.steps.length ? (
        <ol className="steps" aria-label="Tool calls">
          {entry.steps.map((step, i) => (
            <Step key={`${step.callId ?? "x"}-${i}`} step={step} />
          ))}
        </ol>
      ) : null}
      {entry.text ? <div className="answer">{entry.text}</div> : entry.state === "streaming" ? <div className="hint">Thinking…</div> : null}
      {entry.state === "error" ? (
        <div className="node-error" role="alert">
          {entry.error}
          {entry.errorCode ? ` (${entry.errorCode})` : ""}
        </div>
      ) : null}
      {entry.stoppedBy ? <div className="hint">Stopped by {entry.stoppedBy}</div> : null}
      {entry.state === "done" && !entry.plan && !entry.approvalIds ? (
        <div className="hint">{entry.agentsUsed?.length ? `Used: ${entry.agentsUsed.join(", ")}` : "Answered directly by the orchestrator"}</div>
      ) : null}
      {entry.plan ? <PlanEditor entryId={entry.id} plan={entry.plan} state={entry.planState} /> : null}
      {entry.approvalIds?.map((id) => <ApprovalCard key={id} approvalId={id} />)}
    </li>
  );
}

function Transcript({ entries }: { entries: ChatEntry[] }) {
  const end = useRef<HTMLLIElement>(null);
  useEffect(() => {
    // Braces: recent Chromium returns a promise from scrollIntoView, which must not be the effect cleanup.
    void end.current?.scrollIntoView?.({ block: "end" });
  }, [entries]);
  return (
    <div className="transcript" role="log" aria-label="Transcript" aria-live="polite">
      <ol className="transcript-list">
      {entries.map((entry) =>
        entry.kind === "user" ? (
          <li key={entry.id} className="msg msg-user" aria-label="Your message">
            {entry.text}
            {entry.attachments.length ? <div className="hint">Attached: {entry.attachments.join(", ")}</div> : null}
          </li>
        ) : (
          <Assistant key={entry.id} entry={entry} />
        ),
      )}
        <li ref={end} aria-hidden="true" />
      </ol>
    </div>
  );
}

async function toAttachment(file: File): Promise<Attachment> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return { filename: file.name, mime_type: file.type || "application/octet-stream", content_base64: btoa(binary) };
}

function SessionFiles({ files }: { files: SessionFile[] }) {
  if (!files.length) return null;
  return (
    <div className="hint session-files">
      <span id="session-files-label">Files in this session:</span>{" "}
      <ul className="inline-list" aria-labelledby="session-files-label">
        {files.map((f) => (
          <li key={f.ref} title={f.error ?? undefined}>
            {f.filename} ({formatBytes(f.size)}, {f.status}
            {f.chunks !== null ? `, ${f.chunks} chunk${f.chunks === 1 ? "" : "s"}` : ""}
            {f.error ? `: ${f.error}` : ""})
          </li>
        ))}
      </ul>
    </div>
  );
}

/** The orchestrator chat: streamed answers, tool steps, plans, options and sessions. */
export function Chat() {
  const s = useAppStore(
    useShallow((st) => ({
      transcript: st.transcript,
      busy: st.busy,
      sessionId: st.sessionId,
      models: st.models,
      model: st.model,
      profiles: st.profiles,
      profile: st.profile,
      autoMode: st.autoMode,
      requirePlan: st.requirePlan,
      connected: st.connection === "connected",
      canQuery: st.canQuery(),
      role: st.identity?.role ?? null,
      linked: linkedAgentIds(st.edges).join(", "),
      maxBytes: st.maxAttachmentBytes,
      maxFiles: st.maxAttachments,
      attachmentError: st.attachmentError,
      sessionFiles: st.sessionFiles,
      setAttachmentError: st.setAttachmentError,
      hasQuery: st.lastQuery !== null,
      send: st.send,
      newSession: st.newSession,
      setModel: st.setModel,
      setProfile: st.setProfile,
      setAutoMode: st.setAutoMode,
      setRequirePlan: st.setRequirePlan,
      curl: st.curl,
      notify: st.notify,
    })),
  );
  const [draft, setDraft] = useState("");
  const [files, setFiles] = useState<File[]>([]);
  const [curlText, setCurlText] = useState<string | null>(null);

  const submit = async (event?: FormEvent) => {
    event?.preventDefault();
    if (!draft.trim() || s.busy) return;
    const problem = attachmentProblem(files, { maxBytes: s.maxBytes, maxCount: s.maxFiles });
    if (problem) {
      s.setAttachmentError(problem);
      s.notify("error", problem);
      return;
    }
    const attachments = files.length ? await Promise.all(files.map(toAttachment)) : undefined;
    const question = draft;
    const kept = files;
    setDraft("");
    setFiles([]);
    const accepted = await s.send(question, attachments);
    if (!accepted) {
      // Refused for its files (413/400): give the question and the files back to fix and resend.
      setDraft(question);
      setFiles(kept);
    }
  };
  const pick = (picked: File[]) => {
    setFiles(picked);
    s.setAttachmentError(picked.length ? attachmentProblem(picked, { maxBytes: s.maxBytes, maxCount: s.maxFiles }) : null);
  };
  const remove = (index: number) => pick(files.filter((_, i) => i !== index));
  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      void submit();
    }
  };
  const copyCurl = async () => {
    const command = s.curl();
    if (!command) return;
    setCurlText(command);
    try {
      await navigator.clipboard.writeText(command);
    } catch {
      /* shown below for manual copy */
    }
  };

  if (!s.canQuery) {
    // A viewer (read-only) or agent key lacks the master's query permission: nothing here would work.
    return (
      <section className="chat" aria-label="Chat">
        <p className="hint" role="note">
          This key's role ({s.role}) is read-only here: asking questions and deciding approvals need a key with the role
          client or admin.
        </p>
      </section>
    );
  }

  return (
    <section className="chat" aria-label="Chat">
      <ChatResizer />
      <div className="chat-options">
        <label className="field inline">
          <span>Model</span>
          <select value={s.model ?? ""} onChange={(e) => s.setModel(e.target.value || null)}>
            {s.models.length === 0 ? <option value="">default</option> : null}
            {s.models.map((m) => (
              <option key={m} value={m}>
                {modelLabel(m)}
              </option>
            ))}
          </select>
        </label>
        <label className="field inline">
          <span>Prompt profile</span>
          <select value={s.profile} onChange={(e) => s.setProfile(e.target.value as PromptProfile)}>
            {s.profiles.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <label className="check">
          <input type="checkbox" checked={s.autoMode} onChange={(e) => s.setAutoMode(e.target.checked)} /> Auto mode
        </label>
        <label className="check">
          <input
            type="checkbox"
            checked={s.requirePlan}
            disabled={!s.autoMode}
            onChange={(e) => s.setRequirePlan(e.target.checked)}
          />{" "}
          Require plan approval
        </label>
        <span className="hint">Scope: {s.linked || "no linked agent (direct answers)"}</span>
        <span className="spacer" />
        <span className="hint" aria-label="Session">
          {s.sessionId ? `Session ${s.sessionId.slice(0, 12)}` : "No session yet"}
        </span>
        <button type="button" onClick={() => void s.newSession()} disabled={s.busy}>
          New session
        </button>
        <button type="button" onClick={() => void copyCurl()} disabled={!s.hasQuery}>
          Copy as curl
        </button>
      </div>
      {curlText ? (
        <div className="curl">
          <label className="field">
            <span>Last query as curl</span>
            <textarea readOnly rows={4} value={curlText} />
          </label>
          <button type="button" className="small" onClick={() => setCurlText(null)}>
            Close
          </button>
        </div>
      ) : null}
      <Transcript entries={s.transcript} />
      <form className="composer" onSubmit={(e) => void submit(e)}>
        <label className="field grow">
          <span className="visually-hidden">Message</span>
          <textarea
            rows={2}
            value={draft}
            onChange={(e) => setDraft(e.target.value)}
            onKeyDown={onKeyDown}
            placeholder={s.connected ? "Ask the orchestrator… (Enter sends, Shift+Enter new line)" : "Connect to a master first"}
            aria-label="Message"
          />
        </label>
        <label className="button" title={`Up to ${s.maxFiles} files, ${formatBytes(s.maxBytes)} each`}>
          Attach files
          <input
            type="file"
            multiple
            className="visually-hidden"
            onChange={(e) => {
              pick([...(e.target.files ?? [])]);
              e.target.value = "";
            }}
          />
        </label>
        <button type="submit" disabled={!s.connected || s.busy || !draft.trim()}>
          {s.busy ? "Answering…" : "Send"}
        </button>
      </form>
      {files.length ? (
        <ul className="attachments inline-list" aria-label="Files to send">
          {files.map((f, i) => (
            <li key={`${f.name}-${i}`} className={f.size > s.maxBytes ? "too-big" : undefined}>
              {f.name} ({formatBytes(f.size)}){" "}
              <button type="button" className="small" aria-label={`Remove ${f.name}`} onClick={() => remove(i)}>
                ×
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      {s.attachmentError ? (
        <div className="node-error" role="alert" aria-label="Attachment error">
          {s.attachmentError}
        </div>
      ) : null}
      <div className="hint">{`Attachments: up to ${s.maxFiles} files, ${formatBytes(s.maxBytes)} each (read by the RAG agents when they are linked)`}</div>
      <SessionFiles files={s.sessionFiles} />
    </section>
  );
}
