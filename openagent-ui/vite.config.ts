/// <reference types="vitest/config" />
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// The master's routes the UI calls; `npm run dev` and `npm run preview` proxy them to
// OPENAGENT_MASTER_URL (default http://127.0.0.1:8000) so the page is same-origin.
const MASTER = process.env.OPENAGENT_MASTER_URL ?? "http://127.0.0.1:8000";
const ROUTES = [
  "/health",
  "/agents",
  "/query",
  "/register",
  "/unregister",
  "/refresh",
  "/sessions",
  "/internal",
  "/generate-agent",
  "/save-agent",
  "/agent-source",
  "/tool_progress",
  "/openapi.json",
];
const proxy = Object.fromEntries([
  ...ROUTES.map((route) => [route, { target: MASTER, changeOrigin: true }]),
  ["/ws", { target: MASTER.replace(/^http/, "ws"), ws: true }],
]);

export default defineConfig({
  // Served by the master under /ui/.
  base: "/ui/",
  plugins: [react()],
  build: { chunkSizeWarningLimit: 1024 },
  server: { proxy },
  preview: { proxy },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});
