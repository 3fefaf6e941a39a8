import { useAppStore } from "../store/context";

/** Every failure the page meets, with the master's message; nothing goes to the console only. */
export function Notices() {
  const notices = useAppStore((s) => s.notices);
  const dismiss = useAppStore((s) => s.dismiss);
  const refresh = useAppStore((s) => s.refresh);
  return (
    <div className="notices" role="region" aria-label="Notifications">
      {notices.map((n) => (
        <div key={n.id} className={`notice notice-${n.level}`} role={n.level === "error" ? "alert" : "status"}>
          <span className="notice-text">{n.text}</span>
          {n.retry ? (
            <button type="button" className="small" onClick={() => void refresh()}>
              Retry
            </button>
          ) : null}
          <button type="button" className="small" onClick={() => dismiss(n.id)} aria-label="Dismiss notification">
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
