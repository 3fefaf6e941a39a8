/** Screenshots (`npm run screenshots`) and the browser benchmark (`npm run bench`): not tests. */
import { defineConfig } from "@playwright/test";
import base from "./playwright.config";

export default defineConfig({
  ...base,
  testDir: ".",
  testMatch: ["e2e/*.screens.ts", "bench/*.bench.ts"],
  outputDir: "test-results/extra",
});
