import { expect, test } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { hydrated, signIn } from './helpers';

test('the Chargeback page shows its charts with their data and downloads a statement as CSV', async ({ page }) => {
  await signIn(page, 'lead@acme.example');
  await page.goto('/chargeback');
  await hydrated(page);

  // This month against the demo budget, with the chart and its figures.
  const budget = page.getByTestId('budget');
  await expect(budget.getByRole('heading')).toContainText('against a budget of $40,000.00');
  await expect(budget.locator('svg title')).toHaveText(/against the budget/);
  await expect(budget.getByText('Forecast', { exact: true })).toBeVisible();

  // Spend by week: a drawn chart (bars and labelled axes) and the same weeks as table rows.
  const weeks = page.getByTestId('chart-weeks');
  await expect(weeks.locator('svg title')).toHaveText('Spend by week, reserved and on-demand');
  expect(await weeks.locator('svg rect').count()).toBeGreaterThan(5);
  await expect(weeks.locator('tbody tr')).toHaveCount(13);
  await expect(weeks.locator('svg')).toContainText('On-demand');

  const offerings = page.getByTestId('chart-offerings');
  await expect(offerings.locator('svg title')).toHaveText('Spend this month by offering');
  expect(await offerings.locator('tbody tr').count()).toBeGreaterThan(0);

  // Reservations carry a measured utilization from the demo's utilization history.
  const costs = page.getByTestId('reservation-costs');
  await expect(costs.locator('tbody tr').first()).toBeVisible();
  await expect(costs.getByText(/^\d+\.\d %$/).first()).toBeVisible();

  // Chart text follows the page's colour scheme.
  const fill = async () =>
    weeks.locator('svg text').first().evaluate((el) => getComputedStyle(el).fill);
  await page.emulateMedia({ colorScheme: 'light' });
  const light = await fill();
  await page.emulateMedia({ colorScheme: 'dark' });
  const dark = await fill();
  expect(light).not.toEqual(dark);

  // The statement downloads as the API's CSV.
  const month = new Date().toISOString().slice(0, 7);
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('link', { name: `Download ${month} (CSV)` }).click(),
  ]);
  expect(download.suggestedFilename()).toBe(`statement-acme-${month}-draft.csv`);
  const csv = readFileSync(await download.path(), 'utf8');
  const [header, ...rows] = csv.trim().split('\r\n');
  expect(header).toBe(
    'reservation_id,tenant,kind,offering,gpu_model,quantity,start,end,status,gpu_hours,rate_cents_per_hour,accrued_cents,committed_cents,amount_cents,description',
  );
  expect(rows.length).toBeGreaterThan(0);
  for (const row of rows) expect(row.split(',')[1]).toBe('acme');
});

test('a budget the forecast crosses raises an alert; admins read the fleet reports', async ({ browser }) => {
  const admin = await (await browser.newContext()).newPage();
  await signIn(admin, 'admin@tenantry.example');
  await admin.goto('/admin/tenants');
  await hydrated(admin);
  const form = admin.getByTestId('policy-globex');
  await form.getByLabel('Monthly budget (dollars)').fill('1');
  await form.getByRole('button', { name: 'Save globex' }).click();
  await expect(admin.getByText('Saved the policy of Globex')).toBeVisible();

  const lead = await (await browser.newContext()).newPage();
  await signIn(lead, 'lead@globex.example');
  // Spend this month, whatever day of the month it is: a two-hour burst at $1.49 an hour.
  await lead.goto('/availability?offering=l40s-gpu');
  await hydrated(lead);
  await lead.getByTestId('burst-quantity').fill('1');
  await lead.getByTestId('burst-hours').fill('2');
  await lead.getByRole('button', { name: 'Burst now' }).click();
  await expect(lead).toHaveURL(/\/reservations\/\d+$/);
  await lead.goto('/chargeback');
  await expect(lead.getByTestId('budget').getByRole('alert')).toContainText(/Over budget|crosses the \$1\.00 budget/);

  await admin.goto('/admin/reports');
  await hydrated(admin);
  const tenants = admin.getByTestId('report-tenants');
  await expect(tenants.locator('svg title')).toHaveText('Revenue by tenant');
  await expect(tenants.locator('tbody')).toContainText('acme');
  await expect(tenants.locator('tbody')).toContainText('globex');
  const heat = admin.getByTestId('report-heatmap');
  await expect(heat.locator('svg title')).toHaveText('Fleet utilization by day and hour (UTC)');
  await expect(heat.locator('tbody tr')).toHaveCount(14);
  // Shared GPUs: the demo's MIG A100s and its time-sliced L40S node, each with its idle share;
  // over 30 days, the demo's MIG slices (held two to four weeks ago) among the holders, each
  // with its own use (a seat booked by another journey may come first: the least busy do).
  const shared = admin.getByTestId('report-shared').locator('tbody').first();
  await expect(shared).toContainText('L40S-48GB, 4 seats a GPU');
  await expect(shared).toContainText(/A100-80GB, MIG.*\d+\.\d % \(\d+\.\d % unsold\)/);
  await expect(shared).not.toContainText('-0.0');
  await admin.getByRole('button', { name: 'Last 30 days' }).click();
  const holders = admin.getByTestId('report-shared-holders').locator('tbody tr');
  await expect(holders.filter({ hasText: 'A100-80GB, MIG' }).first()).toContainText(/#\d+.*a100-(1g\.10gb|3g\.40gb)/);
  await admin.getByRole('button', { name: 'Last 7 days' }).click();
  await expect(heat.locator('tbody tr')).toHaveCount(7);
});

test("this month's reservations on the Chargeback page come a page at a time", async ({ page }) => {
  await signIn(page, 'lead@acme.example');
  await page.goto('/chargeback?limit=3');
  const costs = page.getByTestId('reservation-costs');
  const ids = () => costs.locator('tbody tr a').allTextContents();
  const first = await ids();
  expect(first).toHaveLength(3);
  const count = Number(
    (await page.getByRole('heading', { name: /reservations this month/ }).textContent())?.match(/^(\d+) /)?.[1],
  );
  expect(count).toBeGreaterThan(3);
  await expect(page.getByTestId('reservation-costs-first-page')).toHaveCount(0);
  await hydrated(page);
  await page.getByTestId('reservation-costs-next-page').click();
  await expect(page).toHaveURL(/limit=3.*after=/);
  await expect(costs.locator('tbody tr a').first()).not.toHaveText(first[0]);
  const second = await ids();
  expect(second.length).toBeGreaterThan(0);
  expect(second.filter((id) => first.includes(id))).toEqual([]);
  // The budget and the charts still cover the whole month on every page.
  await expect(page.getByTestId('budget')).toBeVisible();
  await page.getByTestId('reservation-costs-first-page').click();
  await expect(costs.locator('tbody tr a').first()).toHaveText(first[0]);
});
