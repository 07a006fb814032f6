import { defineConfig } from '@playwright/test';

// The portal under test: the debug build that `cargo leptos build` made, on a fresh SQLite
// database with the demo world, on its own port so a dev server on :3000 does not interfere.
const port = Number(process.env.TENANTRY_E2E_PORT ?? 3100);
export const baseURL = `http://127.0.0.1:${port}`;

export default defineConfig({
  testDir: './tests',
  timeout: 30_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  forbidOnly: !!process.env.CI,
  retries: 0,
  reporter: [['list']],
  use: {
    baseURL,
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        '--disable-quic',
      ],
    },
  },
  webServer: {
    command: 'rm -rf .tmp && mkdir -p .tmp && exec ../target/debug/tenantry serve',
    url: `${baseURL}/readyz`,
    reuseExistingServer: false,
    timeout: 60_000,
    stdout: 'pipe',
    stderr: 'pipe',
    env: {
      DATABASE_URL: 'sqlite://.tmp/e2e.db',
      TENANTRY_DEMO: '1',
      TENANTRY_ADDR: `127.0.0.1:${port}`,
      LEPTOS_SITE_ROOT: '../target/site',
      RUST_LOG: 'warn',
    },
  },
});
