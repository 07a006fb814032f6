import { expect, test, type APIRequestContext } from '@playwright/test';
import { hydrated, signIn } from './helpers';

const member = 'member@acme.example';

/** Lets the member sign in again whatever happened above, so later specs find them enabled. */
async function enableMember(admin: APIRequestContext, baseURL: string) {
  const users = await (await admin.get('/api/v1/admin/users')).json();
  const id = users.items.find((u: { email: string }) => u.email === member)?.id;
  // A browser session's writes must come from the portal's own origin (CSRF).
  const answer = await admin.post(`/api/v1/admin/users/${id}/enable`, { headers: { Origin: baseURL } });
  expect([200, 409]).toContain(answer.status());
}

test('an admin revokes a member token, disables the member (their open session ends) and enables them again', async ({
  browser,
  baseURL,
}) => {
  // The member is signed in and has an API token.
  const memberPage = await (await browser.newContext()).newPage();
  await signIn(memberPage, member);
  await memberPage.getByRole('link', { name: 'API tokens' }).click();
  await hydrated(memberPage);
  await memberPage.getByTestId('token-name').fill('member-ci');
  await memberPage.getByRole('button', { name: 'Create token' }).click();
  const secret = (await memberPage.getByTestId('new-token').textContent())?.trim() ?? '';
  expect(secret).toMatch(/^tnt_/);
  const bearer = { Authorization: `Bearer ${secret}` };
  const api = (await browser.newContext()).request;
  expect((await api.get('/api/v1/me', { headers: bearer })).status()).toBe(200);
  expect((await memberPage.request.get('/api/v1/me')).status()).toBe(200);

  const admin = await (await browser.newContext()).newPage();
  await signIn(admin, 'admin@tenantry.example');
  try {
    await admin.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Users', exact: true }).click();
    await expect(admin.getByRole('heading', { name: 'Users', level: 1 })).toBeVisible();
    await hydrated(admin);
    const row = admin.locator(`[data-testid="user-row"][data-email="${member}"]`);
    const tokens = admin.locator(`[data-testid="user-tokens"][data-email="${member}"]`);
    await expect(row.getByTestId('user-status')).toHaveText('active');
    await expect(tokens.getByTestId('user-token').filter({ hasText: 'member-ci' })).toContainText('expires');

    // Revoking one token stops it and nothing else.
    await admin.getByRole('button', { name: `Revoke token member-ci of ${member}` }).click();
    await expect(tokens.getByTestId('user-token').filter({ hasText: 'member-ci' })).toContainText('revoked');
    expect((await api.get('/api/v1/me', { headers: bearer })).status()).toBe(401);
    expect((await memberPage.request.get('/api/v1/me')).status()).toBe(200);

    // Disabling ends the member's open session.
    await admin.getByRole('button', { name: `Disable ${member}` }).click();
    await expect(row.getByTestId('user-status')).toContainText('disabled');
    await expect(row.getByTestId('user-live-tokens')).toHaveText('0');
    expect((await memberPage.request.get('/api/v1/me')).status()).toBe(401);
    await memberPage.reload();
    await expect(memberPage.getByTestId('signed-in-as')).toHaveCount(0);

    // The audit log has it.
    await admin.goto('/admin/audit?action=user.disabled');
    await expect(admin.getByTestId('audit-row').first()).toContainText(member);

    // Enabling works before the page is hydrated too: a browser without JavaScript posts the form.
    const plain = await (await browser.newContext({ javaScriptEnabled: false })).newPage();
    await signIn(plain, 'admin@tenantry.example');
    await plain.goto('/admin/users');
    await plain.getByRole('button', { name: `Enable ${member}` }).click();
    await expect(plain).toHaveURL(/\/admin\/users/);
    await expect(plain.locator(`[data-testid="user-row"][data-email="${member}"]`).getByTestId('user-status')).toHaveText(
      'active',
    );

    // The member signs in again; the revoked token stays revoked.
    await signIn(memberPage, member);
    expect((await memberPage.request.get('/api/v1/me')).status()).toBe(200);
    expect((await api.get('/api/v1/me', { headers: bearer })).status()).toBe(401);
  } finally {
    await enableMember(admin.request, baseURL ?? '');
  }
});
