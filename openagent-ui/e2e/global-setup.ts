/**
 * Starts e2e/stack.py (scripted LLM, master serving the built UI, the sample agent) once
 * for the whole run and hands its URLs to the tests through e2e/.stack/stack.json.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
export const STACK_FILE = path.join(here, ".stack", "stack.json");

export default async function globalSetup(): Promise<() => Promise<void>> {
  if (!existsSync(path.join(root, "openagent-ui", "dist", "index.html"))) {
    throw new Error("openagent-ui/dist is missing: run 'npm run build' first (scripts/test.sh does)");
  }
  const python = process.env.PYTHON ?? path.join(root, ".venv", "bin", "python");
  const child = spawn(python, [path.join(here, "stack.py")], { cwd: root, stdio: ["pipe", "pipe", "inherit"] });
  const line = await new Promise<string>((resolve, reject) => {
    let buffer = "";
    const timer = setTimeout(() => reject(new Error("the e2e stack did not start within 120 s")), 120_000);
    child.stdout.on("data", (chunk: Buffer) => {
      buffer += chunk.toString();
      const newline = buffer.indexOf("\n");
      if (newline !== -1) {
        clearTimeout(timer);
        resolve(buffer.slice(0, newline));
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the e2e stack exited with ${code} before it was ready`));
    });
  });
  mkdirSync(path.dirname(STACK_FILE), { recursive: true });
  writeFileSync(STACK_FILE, line);
  return async () => {
    child.stdin.end();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        child.kill("SIGTERM");
        resolve();
      }, 15_000);
      child.on("exit", () => {
        clearTimeout(timer);
        resolve();
      });
    });
  };
}
