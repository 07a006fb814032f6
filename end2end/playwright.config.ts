import { defineConfig } from '@playwright/test';

// The portal under test: the debug build that `cargo leptos build --split` made, on a fresh SQLite
// database with the demo world, on its own port so a dev server on :3000 does not interfere,
// signing people in through the OpenID provider that starts first (demo sign-in stays on).
const port = Number(process.env.TENANTRY_E2E_PORT ?? 3100);
export const baseURL = `http://127.0.0.1:${port}`;
// The test identity provider that oidc/provider.mjs starts; its port is fixed.
export const oidcIssuer = 'http://127.0.0.1:3300';
// A second portal: a fresh install on an empty PostgreSQL database, no demo data, single sign-on
// only, over the small simulated fleet in fixtures/install-fleet.toml (install.spec.ts).
const installPort = Number(process.env.TENANTRY_E2E_INSTALL_PORT ?? 3101);
export const installURL = `http://127.0.0.1:${installPort}`;
const postgresURL = process.env.TENANTRY_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const installDatabase = 'tenantry_e2e_install';
const installDatabaseURL = postgresURL.replace(/\/[^/?]*(\?|$)/, `/${installDatabase}$1`);
// A third portal driving the real Slurm that scripts/slurm.sh runs on this machine (its tools find
// it through SLURM_CONF, which scripts/test.sh exports): the demo world seeded into an empty
// SQLite database, the nodes Slurm reports admitted, every Slurm object it makes named `e2e-…`
// (slurm.spec.ts). Without SLURM_CONF it is not started, and slurm.spec.ts says why it cannot run.
const slurmPort = Number(process.env.TENANTRY_E2E_SLURM_PORT ?? 3102);
export const slurmURL = `http://127.0.0.1:${slurmPort}`;
export const slurmConf = process.env.SLURM_CONF;

// A real SMTP server (scripts/smtp-sink.py, aiosmtpd) the demo portal e-mails its notices to; it
// saves each message under .tmp-mail, where planning.spec.ts reads them.
export const mailPort = Number(process.env.TENANTRY_E2E_MAIL_PORT ?? 3325);
export const mailDir = '.tmp-mail';

// Single sign-on settings every portal shares.
const sso = {
  OIDC_ISSUER_URL: oidcIssuer,
  OIDC_CLIENT_ID: 'tenantry',
  OIDC_CLIENT_SECRET: 'tenantry-secret',
  OIDC_SCOPES: 'openid email profile groups',
  OIDC_GROUPS_CLAIM: 'groups',
};

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
      env: { OIDC_PORTAL_URLS: `${baseURL},${installURL},${slurmURL}` },
    },
    {
      command: `rm -rf ${mailDir} && exec python3 ../scripts/smtp-sink.py --dir ${mailDir} --port ${mailPort}`,
      port: mailPort,
      reuseExistingServer: false,
      timeout: 30_000,
      stdout: 'ignore',
      stderr: 'pipe',
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
        // The demo seed writes the simulated fleet it made here, beside the database.
        TENANTRY_SIM_FLEET: '.tmp/sim-fleet.toml',
        TENANTRY_DEMO: '1',
        TENANTRY_ADDR: `127.0.0.1:${port}`,
        LEPTOS_SITE_ROOT: '../target/site',
        RUST_LOG: 'warn',
        // Provisioning takes seconds, not minutes: a 5-minute driver install runs in 1.5 s.
        TENANTRY_SIM_SPEED: '200',
        TENANTRY_SMTP_URL: `smtp://127.0.0.1:${mailPort}`,
        TENANTRY_MAIL_FROM: 'Tenantry <noreply@tenantry.example>',
        // The tests' webhook receivers listen on loopback.
        TENANTRY_WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8',
        ...sso,
        OIDC_REDIRECT_URL: `${baseURL}/auth/callback`,
        OIDC_GROUP_MAP: 'acme-leads=acme:lead,acme-members=acme:member,globex-leads=globex:lead,platform-admins=admin',
        TENANTRY_POST_LOGOUT_REDIRECT_URL: `${baseURL}/sign-in`,
      },
    },
    {
      // The fresh install: its database is dropped and made again empty, so every run starts
      // from nothing, as a platform team's first `tenantry serve` does.
      command:
        `psql "${postgresURL}" -qc 'drop database if exists ${installDatabase}' -c 'create database ${installDatabase}'` +
        ' && exec ../target/debug/tenantry serve',
      url: `${installURL}/readyz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: 'pipe',
      stderr: 'pipe',
      env: {
        DATABASE_URL: installDatabaseURL,
        TENANTRY_ADDR: `127.0.0.1:${installPort}`,
        TENANTRY_FLEET: 'sim',
        TENANTRY_SIM_FLEET: 'fixtures/install-fleet.toml',
        TENANTRY_SIM_SPEED: '200',
        LEPTOS_SITE_ROOT: '../target/site',
        RUST_LOG: 'warn',
        ...sso,
        OIDC_REDIRECT_URL: `${installURL}/auth/callback`,
        OIDC_GROUP_MAP: 'platform-admins=admin,ml-leads=ml:lead',
        TENANTRY_POST_LOGOUT_REDIRECT_URL: `${installURL}/sign-in`,
      },
    },
    ...(slurmConf
      ? [
          {
            command: 'rm -rf .tmp-slurm && mkdir -p .tmp-slurm && exec ../target/debug/tenantry serve',
            url: `${slurmURL}/readyz`,
            reuseExistingServer: false,
            // Seeding reads Slurm's inventory and the first sync makes its accounts.
            timeout: 90_000,
            stdout: 'pipe' as const,
            stderr: 'pipe' as const,
            env: {
              DATABASE_URL: 'sqlite://.tmp-slurm/e2e.db',
              TENANTRY_FLEET: 'slurm',
              // Every account and reservation this portal makes in Slurm is `e2e-…`; anything
              // else there (other tests' objects) it reports and leaves alone.
              TENANTRY_SLURM_PREFIX: 'e2e',
              // The demo's teams, people (Slurm users ada, max, grace, pat) and offerings, and
              // the nodes Slurm reports, admitted.
              TENANTRY_DEMO: '1',
              // The default check runs nvidia-smi, which the emulated nodes lack.
              TENANTRY_SLURM_CHECK: 'true',
              TENANTRY_SAMPLE_SECONDS: '5',
              TENANTRY_SLURM_SYNC_SECONDS: '5',
              TENANTRY_SLURM_LOGIN_HOST: 'login.example',
              SLURM_CONF: slurmConf,
              PATH: process.env.PATH ?? '/usr/bin:/bin',
              TENANTRY_ADDR: `127.0.0.1:${slurmPort}`,
              LEPTOS_SITE_ROOT: '../target/site',
              RUST_LOG: 'warn',
              ...sso,
              OIDC_REDIRECT_URL: `${slurmURL}/auth/callback`,
              OIDC_GROUP_MAP:
                'acme-leads=acme:lead,acme-members=acme:member,globex-leads=globex:lead,platform-admins=admin',
              TENANTRY_POST_LOGOUT_REDIRECT_URL: `${slurmURL}/sign-in`,
            },
          },
        ]
      : []),
  ],
});
