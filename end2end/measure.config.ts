import { defineConfig } from '@playwright/test';

// Not a test suite: measurements of the front end's weight, run by hand through
// scripts/measure-frontend.sh against the release build (`cargo leptos build --release
// --split`), and reported in docs/PERFORMANCE.md ("Build and size"). The portal is the demo
// world on a fresh SQLite database, on its own port.
const port = Number(process.env.TENANTRY_MEASURE_PORT ?? 3110);
export const baseURL = `http://127.0.0.1:${port}`;

export default defineConfig({
  testDir: './measure',
  timeout: 1_800_000,
  workers: 1,
  retries: 0,
  reporter: [['list']],
  use: {
    baseURL,
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run', '--disable-quic'],
    },
  },
  webServer: {
    // TENANTRY_MEASURE_BIN: another build of the server (scripts/screenshot.sh uses the debug one).
    command: `rm -rf .tmp-measure && mkdir -p .tmp-measure && exec ${process.env.TENANTRY_MEASURE_BIN ?? '../target/release/tenantry'} serve`,
    url: `${baseURL}/readyz`,
    reuseExistingServer: false,
    timeout: 120_000,
    stdout: 'ignore',
    stderr: 'pipe',
    env: {
      DATABASE_URL: 'sqlite://.tmp-measure/measure.db',
      TENANTRY_SIM_FLEET: '.tmp-measure/sim-fleet.toml',
      TENANTRY_DEMO: '1',
      TENANTRY_ADDR: `127.0.0.1:${port}`,
      // Another build's site (e.g. an earlier commit's, to compare against) when given.
      LEPTOS_SITE_ROOT: process.env.TENANTRY_MEASURE_SITE ?? '../target/site',
      RUST_LOG: 'warn',
    },
  },
});
