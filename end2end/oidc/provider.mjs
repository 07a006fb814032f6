// A real OpenID Connect provider for the end-to-end tests of single sign-on: panva's
// oidc-provider on http://127.0.0.1:3300 with its development-only login and consent pages
// (any non-empty password works; the login name picks the account below). Playwright's
// webServer starts it before the portal. Never use this configuration outside tests.
import Provider from 'oidc-provider';

const port = 3300;
const issuer = `http://127.0.0.1:${port}`;
// The portals under test (the demo one and the fresh install); playwright.config.ts passes their
// URLs, comma-separated, whose ports may be changed.
const portals = (process.env.OIDC_PORTAL_URLS ?? 'http://127.0.0.1:3100').split(',');

// Keyed by the login name typed in the form. Any other name maps to no account: the provider
// then stops at its own error page (server_error) and never calls the portal back.
const accounts = {
  'sso-lead@acme.example': { name: 'Sso Lead', groups: ['acme-leads'] },
  'sso-admin@tenantry.example': { name: 'Sso Admin', groups: ['platform-admins'] },
  'nobody@acme.example': { name: 'No Body', groups: ['unrelated'] },
  // The fresh install's first platform admin and a lead of a team that does not exist yet.
  'first-admin@corp.example': { name: 'First Admin', groups: ['platform-admins'] },
  'ml-lead@corp.example': { name: 'Mel Lead', groups: ['ml-leads'] },
};

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'tenantry',
      client_secret: 'tenantry-secret',
      redirect_uris: portals.map((portal) => `${portal}/auth/callback`),
      post_logout_redirect_uris: portals.map((portal) => `${portal}/sign-in`),
      response_types: ['code'],
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  async findAccount(ctx, id) {
    const account = accounts[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: id, email_verified: true, name: account.name, groups: account.groups };
      },
    };
  },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
  scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
  // As by default (and as many real providers do), the ID token carries only `sub` when an
  // access token is issued: the portal must read e-mail, name and groups from userinfo.
  // PKCE stays as by default: S256 only, accepted but not required of a confidential client.
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  // Signed cookies, not Secure: they travel over plain http on the loopback.
  cookies: { keys: ['tenantry-e2e-cookie-key'] },
});

// Rejected requests show up in Playwright's output as [WebServer] lines on stderr.
for (const event of ['server_error', 'authorization.error', 'grant.error', 'userinfo.error', 'end_session.error']) {
  provider.on(event, (ctx, err) => console.error(`oidc provider ${event}: ${err.message} ${err.error_description ?? ''}`));
}

provider.listen(port, '127.0.0.1', () => {
  console.log(`oidc provider listening on ${issuer}`);
});
