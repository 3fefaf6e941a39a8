/**
 * "Connect an MCP client": the master's MCP endpoint and the configuration snippets that
 * Claude Desktop, Cursor and VS Code expect. Pure functions only.
 *
 * The snippets never hold the API key itself: a placeholder (Cursor, Claude Desktop) or a
 * prompt (VS Code) stands in for it, and without a key (a master without auth) no header
 * is written at all.
 */

export const KEY_PLACEHOLDER = "YOUR_OPENAGENT_API_KEY";
const SERVER_NAME = "openagent";

export interface McpClientSnippet {
  /** The client's name, as shown. */
  client: "Claude Desktop" | "Cursor" | "VS Code";
  /** Where the snippet goes. */
  file: string;
  /** The JSON to put there (merged with what the file already holds). */
  json: string;
  note: string;
}

/** `http://host:8000` → `http://host:8000/mcp` (trailing slashes dropped). */
export function mcpEndpoint(baseUrl: string): string {
  return `${baseUrl.trim().replace(/\/+$/, "")}/mcp`;
}

const pretty = (value: unknown): string => JSON.stringify(value, null, 2);

/** The three clients' snippets for the master at `baseUrl`; `withKey` when it asks for an API key. */
export function mcpClientSnippets(baseUrl: string, withKey: boolean): McpClientSnippet[] {
  const url = mcpEndpoint(baseUrl);
  const bearer = `Bearer ${KEY_PLACEHOLDER}`;
  // Claude Desktop starts local (stdio) servers: mcp-remote bridges it to the master's HTTP endpoint.
  // The header travels through an environment variable (no spaces in args, as mcp-remote advises).
  const claudeArgs = ["-y", "mcp-remote", url, ...(withKey ? ["--header", "Authorization:${OPENAGENT_AUTH}"] : [])];
  const claude = {
    mcpServers: {
      [SERVER_NAME]: {
        command: "npx",
        args: claudeArgs,
        ...(withKey ? { env: { OPENAGENT_AUTH: bearer } } : {}),
      },
    },
  };
  const cursor = {
    mcpServers: { [SERVER_NAME]: { url, ...(withKey ? { headers: { Authorization: bearer } } : {}) } },
  };
  const vscode = {
    ...(withKey
      ? {
          inputs: [
            { type: "promptString", id: "openagent-api-key", description: "OpenAgent API key", password: true },
          ],
        }
      : {}),
    servers: {
      [SERVER_NAME]: {
        type: "http",
        url,
        ...(withKey ? { headers: { Authorization: "Bearer ${input:openagent-api-key}" } } : {}),
      },
    },
  };
  const key = withKey ? ` Replace ${KEY_PLACEHOLDER} with the master's API key.` : "";
  return [
    {
      client: "Claude Desktop",
      file: "claude_desktop_config.json (Settings → Developer → Edit Config)",
      json: pretty(claude),
      note: `Needs Node.js (npx runs mcp-remote, which connects Claude Desktop to ${url}).${key}`,
    },
    {
      client: "Cursor",
      file: "~/.cursor/mcp.json, or .cursor/mcp.json in a project",
      json: pretty(cursor),
      note: `Cursor connects to ${url} over Streamable HTTP.${key}`,
    },
    {
      client: "VS Code",
      file: ".vscode/mcp.json in the workspace (or MCP: Open User Configuration)",
      json: pretty(vscode),
      note: withKey ? "VS Code asks for the API key once and keeps it in its secret storage." : `VS Code connects to ${url}.`,
    },
  ];
}
