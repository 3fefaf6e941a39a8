/**
 * The notices slice: every failure the page meets, with the master's message, and the
 * confirmations worth a glance. The last five are kept. Info and warnings go away on their
 * own ({@link NOTICE_TIMEOUT_MS}); errors stay until the user dismisses them.
 */
import type { Runtime, SliceCreator } from "./runtime";

export interface Notice {
  id: number;
  level: "error" | "warning" | "info";
  text: string;
  /** Offer a retry of the connection. */
  retry?: boolean;
}

/** How long a notice stays on screen by itself; `null`: until dismissed. */
export const NOTICE_TIMEOUT_MS: Record<Notice["level"], number | null> = { info: 6000, warning: 10000, error: null };

export interface NoticesSlice {
  notices: Notice[];

  notify(level: Notice["level"], text: string, retry?: boolean): void;
  dismiss(id: number): void;
}

export function createNoticesSlice({ setTimer }: Runtime): SliceCreator<NoticesSlice> {
  return (set, get) => {
    let noticeId = 0;
    return {
      notices: [],

      notify(level, text, retry) {
        const notice: Notice = { id: ++noticeId, level, text, ...(retry ? { retry } : {}) };
        set({ notices: [...get().notices.slice(-4), notice] });
        const timeout = NOTICE_TIMEOUT_MS[level];
        if (timeout !== null && !retry) setTimer(() => get().dismiss(notice.id), timeout);
      },
      dismiss(id) {
        set({ notices: get().notices.filter((n) => n.id !== id) });
      },
    };
  };
}
