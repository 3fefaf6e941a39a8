import { useState } from "react";
import { mcpClientSnippets, mcpEndpoint } from "../lib/mcpClients";
import { Dialog } from "./Dialog";

/** A snippet with a Copy button (the clipboard may be refused outside a secure context). */
function Copyable({ label, text }: { label: string; text: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  return (
    <div className="copyable">
      <pre aria-label={label}>
        <code>{text}</code>
      </pre>
      <button type="button" className="small" onClick={() => void copy()} aria-label={`Copy ${label}`}>
        {copied ? "Copied" : "Copy"}
      </button>
    </div>
  );
}

/** "Connect an MCP client": the master's /mcp URL and the snippets Claude Desktop, Cursor and VS Code expect. */
export function McpClientDialog({
  open,
  onClose,
  baseUrl,
  withKey,
}: {
  open: boolean;
  onClose(): void;
  baseUrl: string;
  withKey: boolean;
}) {
  const url = mcpEndpoint(baseUrl);
  return (
    <Dialog open={open} title="Connect an MCP client" onClose={onClose} className="mcp-client-dialog">
      <p>
        Every tool the orchestrator can call, and <code>ask</code> (a question to the orchestrator), is served over MCP
        (Streamable HTTP) at:
      </p>
      <Copyable label="MCP endpoint URL" text={url} />
      {withKey ? (
        <p className="hint">The master asks for its API key as a bearer token; the snippets hold a placeholder, never your key.</p>
      ) : null}
      {mcpClientSnippets(baseUrl, withKey).map((snippet) => (
        <section key={snippet.client} aria-label={`${snippet.client} configuration`}>
          <h3>{snippet.client}</h3>
          <p className="hint">
            In <code>{snippet.file}</code>. {snippet.note}
          </p>
          <Copyable label={`${snippet.client} JSON`} text={snippet.json} />
        </section>
      ))}
    </Dialog>
  );
}
