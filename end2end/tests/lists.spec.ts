import { expect, test } from '@playwright/test';
import { hydrated, signIn } from './helpers';

test('notifications and users come a page at a time, with and without the script', async ({
  page,
  browser,
  baseURL,
}) => {
  // Two bookings tell acme's lead twice.
  await signIn(page, 'lead@acme.example');
  const day = new Date(Date.now() + 6 * 86_400_000).toISOString().slice(0, 10);
  for (const hour of [2, 4]) {
    const at = (h: number) => `${day}T${String(h).padStart(2, '0')}:00:00Z`;
    const response = await page.request.post('/api/v1/reservations', {
      data: { offering: 'l40s-gpu', quantity: 1, start: at(hour), end: at(hour + 1) },
      headers: { Origin: new URL(baseURL!).origin },
    });
    expect(response.status(), await response.text()).toBe(201);
  }
  const notices = page.getByTestId('notification');
  await page.goto('/notifications?limit=1');
  await expect(notices).toHaveCount(1);
  const newest = await notices.first().textContent();
  await expect(page.getByTestId('notifications-first-page')).toHaveCount(0);
  await hydrated(page);
  await page.getByTestId('notifications-next-page').click();
  await expect(page).toHaveURL(/limit=1.*after=/);
  await expect(notices).toHaveCount(1);
  await expect(notices.first()).not.toHaveText(newest ?? '');
  await page.getByTestId('notifications-first-page').click();
  await expect(notices.first()).toHaveText(newest ?? '');

  // Admin → Users, two a page: the pages read every user once, without the script too.
  const plain = await browser.newContext({ javaScriptEnabled: false });
  const p = await plain.newPage();
  await p.goto('/sign-in');
  await p.getByRole('button', { name: 'Sign in as admin@tenantry.example' }).click();
  await p.goto('/admin/users?limit=2');
  const seen: string[] = [];
  for (let pages = 0; pages < 50; pages++) {
    const rows = p.getByTestId('user-row');
    expect(await rows.count()).toBeLessThanOrEqual(2);
    for (const email of await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-email') ?? ''))) {
      seen.push(email);
    }
    const next = p.getByTestId('users-next-page');
    if ((await next.count()) === 0) break;
    await next.click();
    await expect(p).toHaveURL(/limit=2.*after=/);
  }
  const everyone = (await (await p.request.get('/api/v1/admin/users?limit=1000')).json()).items.map(
    (u: { email: string }) => u.email,
  );
  await plain.close();
  expect(seen).toEqual(everyone);
  expect(seen).toContain('lead@acme.example');
  // A lead cannot list users at all.
  expect((await page.request.get('/api/v1/admin/users?limit=1')).status()).toBe(403);
});

test("the team's reservations come a page at a time, latest start first", async ({ page }) => {
  await signIn(page, 'lead@acme.example');
  const rows = page.locator('main tbody tr');
  await page.goto('/reservations?limit=2');
  await expect(rows).toHaveCount(2);
  const first = await rows.first().locator('a').textContent();
  await hydrated(page);
  await page.getByTestId('reservations-next-page').click();
  await expect(page).toHaveURL(/limit=2.*after=/);
  await expect(rows).toHaveCount(2);
  await expect(rows.first().locator('a')).not.toHaveText(first ?? '');
  await page.getByTestId('reservations-first-page').click();
  await expect(rows.first().locator('a')).toHaveText(first ?? '');
});
