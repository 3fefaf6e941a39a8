/** Undo/redo stacks of canvas snapshots (pure; the store owns one). */

export interface History<T> {
  past: T[];
  future: T[];
}

export const HISTORY_LIMIT = 100;

export function emptyHistory<T>(): History<T> {
  return { past: [], future: [] };
}

/** Record `before` (the state an edit is about to change); a new edit clears the redo stack. */
export function record<T>(history: History<T>, before: T, limit = HISTORY_LIMIT): History<T> {
  const past = [...history.past, before];
  return { past: past.length > limit ? past.slice(past.length - limit) : past, future: [] };
}

/** Step back: the snapshot to restore, and the history with `current` on the redo stack. */
export function undo<T>(history: History<T>, current: T): { history: History<T>; snapshot: T } | null {
  const snapshot = history.past[history.past.length - 1];
  if (snapshot === undefined) return null;
  return { history: { past: history.past.slice(0, -1), future: [current, ...history.future] }, snapshot };
}

export function redo<T>(history: History<T>, current: T): { history: History<T>; snapshot: T } | null {
  const snapshot = history.future[0];
  if (snapshot === undefined) return null;
  return { history: { past: [...history.past, current], future: history.future.slice(1) }, snapshot };
}
