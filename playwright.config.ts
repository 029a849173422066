import { defineConfig } from '@playwright/test';

// End-to-end tests drive the real dashboard in Debian's Chromium (no browser downloads).
// Each test starts its own server (e2e/fixtures.ts); build first (`npm run build`).
// e2e/screenshots.spec.ts writes docs/screenshots/*.png and runs only with SCREENSHOTS=1
// (`npm run screenshots`).
export default defineConfig({
  testDir: 'e2e',
  testIgnore: process.env.SCREENSHOTS === '1' ? [] : ['**/screenshots.spec.ts'],
  timeout: 60_000,
  expect: { timeout: 5_000 },
  workers: 1,
  fullyParallel: false,
  forbidOnly: process.env.CI !== undefined,
  reporter: [['list']],
  use: {
    headless: true,
    viewport: { width: 1280, height: 800 },
    colorScheme: 'light',
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    },
  },
});
