/**
 * The activity slice: what the nodes show while a query runs. An agent's node glows while
 * its tool runs and fades out {@link GLOW_FADE_MS} after the result; each agent keeps a log
 * of its last {@link CALL_LOG_LIMIT} calls for the details panel.
 */
import type { ToolCallEvent, ToolResultEvent } from "../api/types";
import type { Runtime, SliceCreator } from "./runtime";

export const GLOW_FADE_MS = 4000;
export const CALL_LOG_LIMIT = 20;

export interface Glow {
  phase: "active" | "fading";
  seq: number;
}

export interface CallLogEntry {
  callId: string | null;
  toolName: string;
  arguments: unknown;
  state: "running" | "ok" | "error";
  result?: unknown;
  error?: string;
  at: number;
}

export interface ActivitySlice {
  glow: Record<string, Glow>;
  callLogs: Record<string, CallLogEntry[]>;

  /** Light a node (`active`), or start its fade-out (`fading`, gone after {@link GLOW_FADE_MS}). */
  glowNode(nodeId: string, phase: Glow["phase"]): void;
  /** Log a streamed `tool_call` or `tool_result` event of one agent. */
  logCall(agentId: string, event: ToolCallEvent | ToolResultEvent): void;
}

export function createActivitySlice({ setTimer, clearTimer, now }: Runtime): SliceCreator<ActivitySlice> {
  return (set, get) => {
    let glowSeq = 0;
    const glowTimers = new Map<string, unknown>();

    return {
      glow: {},
      callLogs: {},

      glowNode(nodeId, phase) {
        const seq = ++glowSeq;
        set({ glow: { ...get().glow, [nodeId]: { phase, seq } } });
        const old = glowTimers.get(nodeId);
        if (old !== undefined) clearTimer(old);
        glowTimers.delete(nodeId);
        if (phase === "fading") {
          glowTimers.set(
            nodeId,
            setTimer(() => {
              glowTimers.delete(nodeId);
              if (get().glow[nodeId]?.seq !== seq) return;
              const { [nodeId]: _gone, ...rest } = get().glow;
              set({ glow: rest });
            }, GLOW_FADE_MS),
          );
        }
      },

      logCall(agentId, event) {
        const logs = get().callLogs[agentId] ?? [];
        const callId = event.call_id ?? null;
        const toolName = event.tool_name ?? "?";
        let next: CallLogEntry[];
        if (event.type === "tool_call") {
          next = [...logs, { callId, toolName, arguments: event.arguments ?? {}, state: "running", at: now() }];
        } else {
          let index = -1;
          for (let i = logs.length - 1; i >= 0; i--) {
            const l = logs[i]!;
            if ((callId !== null && l.callId === callId) || (l.state === "running" && l.toolName === toolName)) {
              index = i;
              break;
            }
          }
          const done: Partial<CallLogEntry> = event.success
            ? { state: "ok", result: event.result }
            : { state: "error", error: event.error ?? "failed" };
          next =
            index === -1
              ? [...logs, { callId, toolName, arguments: {}, at: now(), ...done } as CallLogEntry]
              : logs.map((l, i) => (i === index ? { ...l, ...done } : l));
        }
        set({ callLogs: { ...get().callLogs, [agentId]: next.slice(-CALL_LOG_LIMIT) } });
      },
    };
  };
}
