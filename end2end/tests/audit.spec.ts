import { expect, type Page, test } from '@playwright/test';
import { hydrated, signIn } from './helpers';

test('the audit log comes a page at a time, back to its oldest event, with and without the script', async ({
  page,
  browser,
  baseURL,
}) => {
  // Three bookings by acme's lead: three `reservation.created` events, the newest first.
  await signIn(page, 'lead@acme.example');
  const day = new Date(Date.now() + 5 * 86_400_000).toISOString().slice(0, 10);
  const ids: number[] = [];
  for (const hour of [1, 3, 5]) {
    const at = (h: number) => `${day}T${String(h).padStart(2, '0')}:00:00Z`;
    const response = await page.request.post('/api/v1/reservations', {
      data: { offering: 'l40s-gpu', quantity: 1, start: at(hour), end: at(hour + 1) },
      headers: { Origin: new URL(baseURL!).origin },
    });
    expect(response.status(), await response.text()).toBe(201);
    ids.push((await response.json()).id);
  }
  // The Object cell of the page's first row.
  const object = (at: Page) => at.getByTestId('audit-row').first().locator('td').nth(4);
  const path = '/admin/audit?action=reservation.created&tenant=acme&limit=1';

  await signIn(page, 'admin@tenantry.example');
  await page.goto(path);
  const rows = page.getByTestId('audit-row');
  await expect(rows).toHaveCount(1);
  await expect(object(page)).toHaveText(`reservation ${ids[2]}`);
  await expect(page.getByTestId('audit-first-page')).toHaveCount(0);
  await hydrated(page);
  await page.getByTestId('audit-next-page').click();
  await expect(page).toHaveURL(/after=/);
  await expect(object(page)).toHaveText(`reservation ${ids[1]}`);
  await page.getByTestId('audit-next-page').click();
  await expect(object(page)).toHaveText(`reservation ${ids[0]}`);
  await expect(rows).toHaveCount(1);
  await page.getByTestId('audit-first-page').click();
  await expect(object(page)).toHaveText(`reservation ${ids[2]}`);
  await expect(page).toHaveURL(/action=reservation.created/);

  // Without the script the links are plain links that keep the filter.
  const plain = await browser.newContext({ javaScriptEnabled: false });
  const p = await plain.newPage();
  await p.goto('/sign-in');
  await p.getByRole('button', { name: 'Sign in as admin@tenantry.example' }).click();
  await p.goto(path);
  await p.getByTestId('audit-next-page').click();
  await expect(p).toHaveURL(/action=reservation\.created.*after=/);
  await expect(p.getByTestId('audit-row')).toHaveCount(1);
  await expect(object(p)).toHaveText(`reservation ${ids[1]}`);
  await expect(p.getByTestId('audit-first-page')).toHaveCount(1);
  await plain.close();
});
