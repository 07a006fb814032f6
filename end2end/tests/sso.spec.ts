import { expect, test } from '@playwright/test';
import { oidcIssuer, signInWithSso } from './helpers';

// Single sign-on through a real OpenID provider (oidc/provider.mjs), whose `groups` claim the
// portal maps to a tenant role or to platform admin (OIDC_GROUP_MAP in playwright.config.ts).
// Each test gets its own browser context through the `page` fixture, so no provider session
// or remembered consent carries over.

test('a team lead signs in through the company identity provider and out again', async ({ page, baseURL }) => {
  await signInWithSso(page, 'sso-lead@acme.example');
  await expect(page).toHaveURL(`${baseURL}/`);
  await expect(page.getByTestId('signed-in-as')).toHaveText('sso-lead@acme.example');
  const nav = page.getByRole('navigation', { name: 'Main' });
  await expect(nav.getByRole('link', { name: 'Availability' })).toBeVisible();
  await expect(nav.getByRole('link', { name: 'Admin' })).toHaveCount(0);

  const me = await page.request.get('/api/v1/me');
  expect(me.status()).toBe(200);
  const identity = await me.json();
  expect(identity.role).toBe('lead');
  expect(identity.tenant?.slug).toBe('acme');

  // Signing out ends the provider's session too: its end_session page asks to confirm.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(new RegExp(`^${oidcIssuer}/session/end`));
  await page.getByRole('button', { name: 'Yes, sign me out' }).click();
  await expect(page).toHaveURL(new RegExp(`^${baseURL}/sign-in(\\?|$)`));
  expect((await page.request.get('/api/v1/me')).status()).toBe(401);
});

test('a platform admin signs in and sees the admin area', async ({ page, baseURL }) => {
  await signInWithSso(page, 'sso-admin@tenantry.example');
  await expect(page).toHaveURL(`${baseURL}/`);
  await expect(page.getByTestId('signed-in-as')).toHaveText('sso-admin@tenantry.example');
  const nav = page.getByRole('navigation', { name: 'Main' });
  await nav.getByRole('link', { name: 'Admin' }).click();
  await expect(page.getByRole('heading', { name: 'Fleet', level: 1 })).toBeVisible();
});

test('a user without a mapped group is told to ask their admin', async ({ page, baseURL }) => {
  await signInWithSso(page, 'nobody@acme.example');
  await expect(page).toHaveURL(new RegExp(`^${baseURL}/`));
  await expect(page.getByRole('heading', { name: 'Ask your admin for access' })).toBeVisible();
  expect((await page.request.get('/api/v1/me')).status()).toBe(401);
});
