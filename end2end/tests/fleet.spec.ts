import { expect, test } from '@playwright/test';
import { hydrated, signIn } from './helpers';

test('an admin signs in, opens the fleet and filters it as they type', async ({ page }) => {
  await signIn(page, 'admin@tenantry.example');
  await page.getByRole('link', { name: 'Admin' }).click();
  await expect(page).toHaveURL(/\/admin\/fleet$/);
  await expect(page.getByRole('heading', { name: 'Fleet', level: 1 })).toBeVisible();

  const rows = page.getByTestId('fleet-node');
  await expect(rows).toHaveCount(40);
  await expect(page.getByRole('heading', { name: 'Region us-east-1' })).toBeVisible();
  await expect(page.getByRole('heading', { name: 'Region eu-west-1' })).toBeVisible();
  await expect(page.getByTestId('fleet-count')).toHaveText('Showing 40 of 40 nodes');

  // Typing filters without submitting the form: only the hydrated app can do that.
  await hydrated(page);
  await page.getByTestId('fleet-search').pressSequentially('a100');
  await expect(page.getByTestId('fleet-count')).toHaveText('Showing 10 of 40 nodes');
  await expect(rows).toHaveCount(10);
  await expect(page).toHaveURL(/\/admin\/fleet$/);
  for (const host of await rows.locator('th').allTextContents()) {
    expect(host).toMatch(/^a100-/);
  }

  // The keyboard reaches the state filter and changes it.
  await page.getByTestId('fleet-search').fill('');
  await expect(page.getByTestId('fleet-count')).toHaveText('Showing 40 of 40 nodes');
  await page.getByTestId('fleet-state').focus();
  await page.getByTestId('fleet-state').selectOption('failed');
  // The server filters: wait for its answer before counting.
  await expect(page.getByTestId('fleet-count')).not.toHaveText('Showing 40 of 40 nodes');
  const failed = await rows.count();
  expect(failed).toBeLessThan(40);
  await expect(page.getByTestId('fleet-count')).toHaveText(`Showing ${failed} of 40 nodes`);
});

test('the fleet filter also works as a plain form, before any script runs', async ({ browser }) => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await page.goto('/sign-in');
  await page.getByRole('button', { name: 'Sign in as admin@tenantry.example' }).click();
  await page.goto('/admin/fleet?model=L40S-48GB');
  await expect(page.getByTestId('fleet-node')).toHaveCount(10);
  await expect(page.getByTestId('fleet-count')).toHaveText('Showing 10 of 40 nodes');
  await context.close();
});

test('a team lead sees the team pages but not the admin area', async ({ page }) => {
  await signIn(page, 'lead@acme.example');
  const nav = page.getByRole('navigation', { name: 'Main' });
  await expect(nav.getByRole('link', { name: 'Availability' })).toBeVisible();
  await expect(nav.getByRole('link', { name: 'Admin' })).toHaveCount(0);

  await nav.getByRole('link', { name: 'Reservations' }).click();
  await expect(page.getByRole('heading', { name: 'Reservations', level: 1 })).toBeVisible();
  await expect(page.getByRole('row').nth(1)).toBeVisible();

  const response = await page.goto('/admin/fleet');
  expect(response?.status()).toBe(403);
  await expect(page.getByRole('alert')).toContainText('platform admin');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/sign-in$/);
  await expect(page.getByRole('link', { name: 'Sign in', exact: true })).toBeVisible();
});

test('an admin reconciles the fleet with its inventory, and a refused retire says why', async ({ page }) => {
  await signIn(page, 'admin@tenantry.example');
  await page.goto('/admin/fleet');
  await expect(page.getByTestId('inventory-panel')).toBeVisible();
  await expect(page.getByTestId('retire-form')).toBeVisible();
  await hydrated(page);

  // Reconciling changes nothing on a demo install, whose fleet file the seed wrote; the outcome
  // and the stored last reconcile are shown either way.
  await page.getByTestId('fleet-reconcile').click();
  await expect(page.getByTestId('fleet-command-outcome')).toContainText('Reconciled: ');
  await expect(page.getByTestId('last-reconcile')).toContainText('sim driver');

  await page.getByTestId('retire-host').fill('no-such-node');
  await page.getByTestId('retire-submit').click();
  await expect(page.getByTestId('fleet-command-error')).toContainText('node not found');
  await expect(page.getByTestId('fleet-node')).toHaveCount(40);
});

test('the fleet comes a page at a time, and its links work before and after the script', async ({ page, browser }) => {
  await signIn(page, 'admin@tenantry.example');
  await page.goto('/admin/fleet?limit=15');
  const rows = page.getByTestId('fleet-node');
  const count = page.getByTestId('fleet-count');
  await expect(rows).toHaveCount(15);
  await expect(count).toHaveText('Showing 15 of 40 matching nodes (40 in all)');
  await expect(page.getByTestId('fleet-first-page')).toHaveCount(0);
  await hydrated(page);
  const hosts = async () => await rows.locator('th').allTextContents();
  const seen = await hosts();
  // Next page, twice: 15, 15, then the last 10, each node once.
  await page.getByTestId('fleet-next-page').click();
  await expect(rows.first().locator('th')).not.toHaveText(seen[0]);
  await expect(rows).toHaveCount(15);
  seen.push(...(await hosts()));
  await page.getByTestId('fleet-next-page').click();
  await expect(rows).toHaveCount(10);
  await expect(page.getByTestId('fleet-next-page')).toHaveCount(0);
  seen.push(...(await hosts()));
  expect(new Set(seen).size).toBe(40);
  await page.getByTestId('fleet-first-page').click();
  await expect(rows).toHaveCount(15);
  expect(await hosts()).toEqual(seen.slice(0, 15));
  // A filter goes back to its first page, and a filter that fits one page has no links.
  await page.getByTestId('fleet-model').selectOption('L40S-48GB');
  await expect(count).toHaveText('Showing 10 of 40 nodes');
  await expect(page.getByTestId('fleet-next-page')).toHaveCount(0);

  // Without the script the links are plain links.
  const plain = await browser.newContext({ javaScriptEnabled: false });
  const p = await plain.newPage();
  await p.goto('/sign-in');
  await p.getByRole('button', { name: 'Sign in as admin@tenantry.example' }).click();
  await p.goto('/admin/fleet?limit=15');
  await p.getByTestId('fleet-next-page').click();
  await expect(p).toHaveURL(/after=/);
  await expect(p.getByTestId('fleet-node')).toHaveCount(15);
  await expect(p.getByTestId('fleet-first-page')).toHaveCount(1);
  expect(await p.getByTestId('fleet-node').locator('th').allTextContents()).toEqual(seen.slice(15, 30));
  await plain.close();
});

test('an admin time-slices a node into seats on the Fleet page, and a wrong count is named', async ({ page }) => {
  // The demo's failed H100 node: nothing holds it, so its seats may change.
  const host = 'h100-use1-0001';
  await signIn(page, 'admin@tenantry.example');
  await page.goto(`/admin/fleet?q=${host}`);
  await hydrated(page);
  const row = page.getByTestId('fleet-node').filter({ hasText: host });
  await row.getByTestId('time-slice-node').click();
  await expect(page.getByTestId('slice-host')).toHaveValue(host);
  await page.getByTestId('slice-seats').fill('9');
  await page.getByTestId('slice-submit').click();
  await expect(page.getByTestId('fleet-command-error')).toContainText('time-slice a GPU into 2 to 7 seats');
  await page.getByTestId('slice-seats').fill('4');
  await page.getByTestId('slice-submit').click();
  await expect(page.getByTestId('fleet-command-outcome')).toContainText('8 GPU(s) time-sliced into 4 seats each');
  await expect(row).toContainText('4 seats each');
  // Blank stops it: the GPUs are whole again.
  await page.getByTestId('slice-seats').fill('');
  await page.getByTestId('slice-submit').click();
  await expect(page.getByTestId('fleet-command-outcome')).toContainText('time-slicing stopped');
  await expect(row).not.toContainText('seats each');
});

test('the Seats form shows the time-sliced MIG instances of a node and names a wrong seat count', async ({ page }) => {
  await signIn(page, 'admin@tenantry.example');
  await page.goto('/admin/fleet?q=a100&limit=1000');
  await hydrated(page);
  // The demo time-slices one A100 node's 3g.40gb instances into four seats.
  const row = page.getByTestId('fleet-node').filter({ hasText: '3g.40gb instances 4 seats each' });
  await expect(row).toHaveCount(1);
  await row.getByTestId('time-slice-node').click();
  await expect(page.getByTestId('slice-seats')).toHaveValue('4');
  await expect(page.getByTestId('slice-profile')).toHaveValue('3g.40gb');
  await page.getByTestId('slice-seats').fill('7');
  await page.getByTestId('slice-submit').click();
  await expect(page.getByTestId('fleet-command-error')).toContainText('time-slice a MIG instance into 2 to 6 seats');
  await expect(row).toContainText('3g.40gb instances 4 seats each');
});
