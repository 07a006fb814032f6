import { defineConfig } from '@playwright/test';

// The portal under test: the debug build that `cargo leptos build` made, on a fresh SQLite
// database with the demo world, on its own port so a dev server on :3000 does not interfere,
// signing people in through the OpenID provider that starts first (demo sign-in stays on).
const port = Number(process.env.TENANTRY_E2E_PORT ?? 3100);
export const baseURL = `http://127.0.0.1:${port}`;
// The test identity provider that oidc/provider.mjs starts; its port is fixed.
export const oidcIssuer = 'http://127.0.0.1:3300';

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
  webServer: [
    {
      // A real OpenID provider for single sign-on (oidc/provider.mjs); it knows the portal's URL.
      command: 'exec node oidc/provider.mjs',
      url: `${oidcIssuer}/.well-known/openid-configuration`,
      reuseExistingServer: false,
      timeout: 30_000,
      stdout: 'ignore',
      stderr: 'pipe',
      env: { OIDC_PORTAL_URL: baseURL },
    },
    {
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
        // Provisioning takes seconds, not minutes: a 5-minute driver install runs in 1.5 s.
        TENANTRY_SIM_SPEED: '200',
        OIDC_ISSUER_URL: oidcIssuer,
        OIDC_CLIENT_ID: 'tenantry',
        OIDC_CLIENT_SECRET: 'tenantry-secret',
        OIDC_REDIRECT_URL: `${baseURL}/auth/callback`,
        OIDC_SCOPES: 'openid email profile groups',
        OIDC_GROUPS_CLAIM: 'groups',
        OIDC_GROUP_MAP: 'acme-leads=acme:lead,acme-members=acme:member,globex-leads=globex:lead,platform-admins=admin',
        TENANTRY_POST_LOGOUT_REDIRECT_URL: `${baseURL}/sign-in`,
      },
    },
  ],
});
