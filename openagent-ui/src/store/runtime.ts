/**
 * What every slice shares: the store's options resolved to their defaults (timers, clock,
 * storage, polling), the slice creator type, and small helpers for URLs and failures.
 */
import type { StateCreator } from "zustand";
import { ApiError, type FetchLike } from "../api/client";
import type { AppState } from "./store";

export interface StoreOptions {
  fetch?: FetchLike;
  storage?: Pick<Storage, "getItem" | "setItem" | "removeItem"> | null;
  /** Milliseconds between `GET /agents` refreshes; 0 turns polling off. */
  pollMs?: number;
  /** Refresh discovery every this many polls. */
  discoverEvery?: number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
  now?: () => number;
  defaultBaseUrl?: string;
}

/** The options with their defaults filled in, handed to every slice creator. */
export interface Runtime {
  fetch: FetchLike | undefined;
  storage: Pick<Storage, "getItem" | "setItem" | "removeItem"> | null;
  pollMs: number;
  discoverEvery: number;
  setTimer: (fn: () => void, ms: number) => unknown;
  clearTimer: (handle: unknown) => void;
  now: () => number;
  defaultBaseUrl: string | undefined;
}

/** One slice of {@link AppState}: Zustand's documented slices pattern. */
export type SliceCreator<Slice> = StateCreator<AppState, [], [], Slice>;

export function runtimeOf(options: StoreOptions): Runtime {
  return {
    fetch: options.fetch,
    storage: options.storage === undefined ? (typeof sessionStorage !== "undefined" ? sessionStorage : null) : options.storage,
    pollMs: options.pollMs ?? 3000,
    discoverEvery: options.discoverEvery ?? 10,
    setTimer: options.setTimer ?? ((fn, ms) => setTimeout(fn, ms)),
    clearTimer: options.clearTimer ?? ((h) => clearTimeout(h as ReturnType<typeof setTimeout>)),
    now: options.now ?? (() => Date.now()),
    defaultBaseUrl: options.defaultBaseUrl,
  };
}

/** The master's base URL, the page's own origin when empty (served by the master under /ui/). */
export function baseOf(baseUrl: string, fallback = "http://127.0.0.1:8000"): string {
  return baseUrl || (typeof window !== "undefined" ? window.location.origin : fallback);
}

export function wsUrlOf(baseUrl: string): string {
  return `${baseOf(baseUrl).replace(/^http/, "ws").replace(/\/+$/, "")}/ws`;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A failure as the panels show it: the HTTP status (0 when there was none) and the message. */
export function failureOf(error: unknown): { status: number; message: string } {
  return { status: error instanceof ApiError ? error.status : 0, message: messageOf(error) };
}
