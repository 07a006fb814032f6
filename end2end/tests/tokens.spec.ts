import { expect, test } from '@playwright/test';
import { hydrated, signIn } from './helpers';

test('a lead creates an API token, uses it, sees its last use, and revokes it; the admin audits it', async ({ browser }) => {
  const page = await (await browser.newContext()).newPage();
  await signIn(page, 'lead@acme.example');
  await page.getByRole('link', { name: 'API tokens' }).click();
  await expect(page.getByRole('heading', { name: 'API tokens', level: 1 })).toBeVisible();
  await hydrated(page);
  await page.getByTestId('token-name').fill('nightly-reports');
  await page.getByRole('button', { name: 'Create token' }).click();
  const secret = (await page.getByTestId('new-token').textContent())?.trim() ?? '';
  expect(secret).toMatch(/^tnt_[0-9a-f]{64}$/);
  const row = page.getByTestId('token-row').filter({ hasText: 'nightly-reports' });
  await expect(row).toContainText('never');

  // The token acts as its owner, with the owner's team and role, from a client with no cookies.
  const api = await (await browser.newContext()).request;
  const me = await api.get('/api/v1/me', { headers: { Authorization: `Bearer ${secret}` } });
  expect(me.status()).toBe(200);
  expect(await me.json()).toMatchObject({ email: 'lead@acme.example', role: 'lead', tenant: { slug: 'acme' } });

  await page.reload();
  await expect(row).not.toContainText('never');
  await hydrated(page);
  await page.getByRole('button', { name: 'Revoke nightly-reports' }).click();
  await expect(row).toContainText('revoked');
  expect((await api.get('/api/v1/me', { headers: { Authorization: `Bearer ${secret}` } })).status()).toBe(401);

  const admin = await (await browser.newContext()).newPage();
  await signIn(admin, 'admin@tenantry.example');
  await admin.getByRole('link', { name: 'Audit' }).click();
  await admin.getByLabel('Action').fill('api_token.');
  await admin.getByRole('button', { name: 'Filter' }).click();
  await expect(admin).toHaveURL(/action=api_token\./);
  const rows = admin.getByTestId('audit-row');
  await expect(rows.filter({ hasText: 'api_token.created' }).first()).toContainText('lead@acme.example');
  await expect(rows.filter({ hasText: 'api_token.revoked' }).first()).toContainText('acme');
  await expect(rows.filter({ hasText: 'reservation.' })).toHaveCount(0);
});
