import { defineConfig } from "@playwright/test";

// Debian's Chromium (apt-get install chromium); Playwright's own browser download is not used.
const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export default defineConfig({
  testDir: "e2e",
  timeout: 90_000,
  expect: { timeout: 20_000 },
  workers: 1,
  fullyParallel: false,
  retries: 0,
  outputDir: "test-results/artifacts",
  reporter: [["list"]],
  globalSetup: "./e2e/global-setup.ts",
  use: {
    browserName: "chromium",
    viewport: { width: 1440, height: 900 },
    screenshot: "only-on-failure",
    trace: "retain-on-failure",
    launchOptions: { executablePath, args: ["--no-sandbox", "--disable-dev-shm-usage"] },
  },
});
