import { useState, type FormEvent } from "react";
import { useShallow } from "zustand/react/shallow";
import type { KeyRequest } from "../api/client";
import { useAppStore } from "../store/context";
import { Dialog } from "./Dialog";

const ROLES: KeyRequest["role"][] = ["client", "agent", "viewer", "admin"];

function when(seconds: number | null | undefined): string {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "never";
}

/** The administrators' key panel: the stored keys (never a secret), a new key (its secret shown once), revoke. */
export function Keys() {
  const { keys, close, create, revoke } = useAppStore(
    useShallow((s) => ({ keys: s.keys, close: s.closeKeys, create: s.createKey, revoke: s.revokeKey })),
  );
  const [name, setName] = useState("");
  const [role, setRole] = useState<KeyRequest["role"]>("client");
  const [tenant, setTenant] = useState("default");
  const [patterns, setPatterns] = useState("");

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const agent_ids = patterns.split(",").map((p) => p.trim()).filter(Boolean);
    if (await create({ name: name.trim(), role, tenant: tenant.trim() || "default", agent_ids })) setName("");
  };

  return (
    <Dialog open={keys.open} title="Access keys" onClose={close} className="keys">
      <form className="key-form" onSubmit={(e) => void submit(e)} aria-label="Create a key">
        <label className="field inline">
          <span>Name</span>
          <input value={name} onChange={(e) => setName(e.target.value)} required placeholder="e.g. ci-bot" />
        </label>
        <label className="field inline">
          <span>Role</span>
          <select value={role} onChange={(e) => setRole(e.target.value as KeyRequest["role"])}>
            {ROLES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </label>
        <label className="field inline">
          <span>Tenant</span>
          <input value={tenant} onChange={(e) => setTenant(e.target.value)} />
        </label>
        {role === "agent" ? (
          <label className="field inline">
            <span>Agent ids</span>
            <input value={patterns} onChange={(e) => setPatterns(e.target.value)} placeholder="weather-*, calc" />
          </label>
        ) : null}
        <button type="submit" disabled={keys.busy || !name.trim()}>
          Create key
        </button>
      </form>
      {keys.created ? (
        <div className="key-secret" role="status" aria-label="New key's secret">
          <p>
            Key <strong>{keys.created.name}</strong> ({keys.created.role}) created. Copy its secret now: it is not shown
            again.
          </p>
          <code>{keys.created.secret}</code>
        </div>
      ) : null}
      {keys.error ? (
        <div className="node-error panel-error" role="alert">
          {keys.error}
        </div>
      ) : null}
      <table className="outcomes" aria-label="Stored keys">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Role</th>
            <th scope="col">Tenant</th>
            <th scope="col">Agent ids</th>
            <th scope="col">Last used</th>
            <th scope="col">
              <span className="visually-hidden">Revoke</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {keys.rows.map((row) => (
            <tr key={row.key_id}>
              <td title={row.key_id}>{row.name}</td>
              <td>{row.role}</td>
              <td>{row.tenant}</td>
              <td>{row.agent_ids.join(", ") || "-"}</td>
              <td>{when(row.last_used)}</td>
              <td>
                <button
                  type="button"
                  className="small"
                  disabled={keys.busy}
                  onClick={() => void revoke(row.key_id)}
                  aria-label={`Revoke ${row.name}`}
                >
                  Revoke
                </button>
              </td>
            </tr>
          ))}
          {keys.rows.length === 0 ? (
            <tr>
              <td colSpan={6}>No stored keys yet (OPENAGENT_API_KEY is the bootstrap administrator's).</td>
            </tr>
          ) : null}
        </tbody>
      </table>
    </Dialog>
  );
}
