/**
 * The notices slice: every failure the page meets, with the master's message, and the
 * confirmations worth a glance. The last five are kept; the user dismisses them.
 */
import type { SliceCreator } from "./runtime";

export interface Notice {
  id: number;
  level: "error" | "warning" | "info";
  text: string;
  /** Offer a retry of the connection. */
  retry?: boolean;
}

export interface NoticesSlice {
  notices: Notice[];

  notify(level: Notice["level"], text: string, retry?: boolean): void;
  dismiss(id: number): void;
}

export const createNoticesSlice: SliceCreator<NoticesSlice> = (set, get) => {
  let noticeId = 0;
  return {
    notices: [],

    notify(level, text, retry) {
      const notice: Notice = { id: ++noticeId, level, text, ...(retry ? { retry } : {}) };
      set({ notices: [...get().notices.slice(-4), notice] });
    },
    dismiss(id) {
      set({ notices: get().notices.filter((n) => n.id !== id) });
    },
  };
};
