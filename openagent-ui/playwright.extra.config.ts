/** Screenshots (`npm run screenshots`) and the browser benchmark (`npm run bench`): not tests. */
import { defineConfig } from "@playwright/test";
import base from "./playwright.config";

// The stack's second (sandbox) master is for e2e/sandbox.spec.ts only: keep it out of the benchmark's
// machine and the screenshots (e2e/global-setup.ts hands this environment to e2e/stack.py).
process.env.OPENAGENT_E2E_SANDBOX ??= "0";

export default defineConfig({
  ...base,
  testDir: ".",
  testMatch: ["e2e/*.screens.ts", "bench/*.bench.ts"],
  outputDir: "test-results/extra",
});
