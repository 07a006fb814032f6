import { expect, test } from '@playwright/test';
import { hydrated, signIn } from './helpers';

test('the availability page fits a phone: the heatmap scrolls inside its card', async ({ page }) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await signIn(page, 'lead@acme.example');
  await page.goto('/availability');
  await hydrated(page);
  await expect(page.getByTestId('heatmap')).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  // The heatmap is wider than the phone; its card scrolls instead.
  const card = page.getByTestId('heatmap').locator('..');
  expect(await card.evaluate((el) => el.scrollWidth > el.clientWidth)).toBe(true);
});

// Every page fits a phone, the header's account links included: what is wider (a table, the
// heatmap) scrolls inside its own card, never the page sideways.
for (const [who, paths] of [
  [
    'lead@acme.example',
    ['/', '/reservations', '/chargeback', '/notifications', '/settings/notifications', '/settings/calendar', '/settings/tokens'],
  ],
  [
    'admin@tenantry.example',
    ['/admin/fleet', '/admin/approvals', '/admin/tenants', '/admin/reports', '/admin/users', '/admin/audit', '/admin/offerings', '/admin/setup'],
  ],
] as const) {
  test(`pages fit a phone, as ${who}`, async ({ page }) => {
    await page.setViewportSize({ width: 390, height: 844 });
    await signIn(page, who);
    for (const path of paths) {
      await page.goto(path);
      await hydrated(page);
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      expect(width, `${path} is ${width} px wide on a 390 px phone`).toBeLessThanOrEqual(390);
    }
  });
}

test('pages have a favicon, and loading one logs no failed request', async ({ page }) => {
  const failed: string[] = [];
  page.on('response', (response) => {
    if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`);
  });
  await page.goto('/sign-in');
  await hydrated(page);
  const href = await page.locator('head link[rel="icon"]').getAttribute('href');
  expect(href).toBe('/favicon.svg');
  const icon = await page.request.get(href!);
  expect(icon.status()).toBe(200);
  expect(icon.headers()['content-type']).toContain('image/svg+xml');
  expect(failed).toEqual([]);
});

test('a demo reservation under way shows how it was provisioned', async ({ page }) => {
  for (const email of ['lead@acme.example', 'lead@globex.example']) {
    await page.context().clearCookies();
    await signIn(page, email);
    const answer = await page.request.get('/api/v1/reservations?state=active');
    expect(answer.ok()).toBe(true);
    const active = ((await answer.json()) as { items: { id: number }[] }).items;
    if (active.length === 0) continue;
    await page.goto(`/reservations/${active[0].id}`);
    await hydrated(page);
    await expect(page.getByTestId('timeline-empty')).toHaveCount(0);
    const step = (name: string) => page.locator(`[data-testid="timeline-step"][data-step="${name}"]`);
    await expect(step('claim_nodes')).toHaveAttribute('data-status', 'done');
    await expect(step('acceptance')).toContainText('passed');
    await expect(step('activate')).toHaveAttribute('data-status', 'done');
    return;
  }
  throw new Error('the demo has no active reservation in either team');
});
