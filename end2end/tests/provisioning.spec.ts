import { expect, test } from '@playwright/test';
import { hydrated, signIn } from './helpers';

test('a burst is provisioned live on its page, handed over with credentials, and health-checked', async ({ page }) => {
  test.setTimeout(90_000);
  await signIn(page, 'lead@globex.example');
  await page.goto('/availability?offering=l40s-gpu');
  await hydrated(page);
  await page.getByTestId('burst-quantity').fill('1');
  await page.getByTestId('burst-hours').fill('1');
  await page.getByRole('button', { name: 'Burst now' }).click();
  await expect(page).toHaveURL(/\/reservations\/\d+$/);
  await hydrated(page);

  // The timeline moves while the page is open (server-sent events): steps start, then finish.
  const step = (name: string) => page.locator(`[data-testid="timeline-step"][data-step="${name}"]`);
  await expect(step('claim_nodes')).toHaveAttribute('data-status', 'done', { timeout: 20_000 });
  await expect(step('cuda_driver')).toBeVisible();
  await expect(step('activate')).toHaveAttribute('data-status', 'done', { timeout: 40_000 });
  await expect(step('acceptance')).toContainText('passed');
  await expect(page.getByTestId('reservation-state')).toHaveText('active');
  await expect(page.getByTestId('credentials')).toContainText('Credentials (kubeconfig)');
  await page.getByTestId('credentials').getByText('Show the secret').click();
  await expect(page.getByTestId('credentials')).toContainText('kind: Config');
  await expect(page.getByTestId('node-health')).toContainText('healthy');

  await page.getByTestId('run-health-check').click();
  await expect(page.getByText('Health check queued.')).toBeVisible();
  await expect(step('health_check')).toHaveAttribute('data-status', 'done', { timeout: 20_000 });
  await expect(step('health_check')).toContainText('healthy');
});

test('an admin sees the queue and schedules maintenance only where no reservation is in the way', async ({ browser }) => {
  const lead = await (await browser.newContext()).newPage();
  await signIn(lead, 'lead@globex.example');
  await lead.goto('/availability?offering=h100-gpu');
  await hydrated(lead);
  const day = new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10);
  await lead.getByTestId('start-input').fill(`${day}T09:00`);
  await lead.getByTestId('end-input').fill(`${day}T11:00`);
  await lead.getByTestId('quantity-input').fill('1');
  await lead.getByRole('button', { name: 'Book…' }).click();
  await lead.getByRole('button', { name: 'Confirm booking' }).click();
  await expect(lead).toHaveURL(/\/reservations\/\d+$/);
  const id = lead.url().split('/').pop();
  const node = (await lead.getByTestId('allocations').locator('td').first().textContent())!.trim();

  const admin = await (await browser.newContext()).newPage();
  await signIn(admin, 'admin@tenantry.example');
  await admin.getByRole('link', { name: 'Admin' }).click();
  await hydrated(admin);
  await expect(admin.getByTestId('queue')).toContainText('Provisioning queue');
  await expect(admin.getByTestId('queue-failed')).toHaveText('0');

  await admin.getByTestId('maintenance-node').fill(node);
  await admin.getByTestId('maintenance-start').fill(`${day}T10:00`);
  await admin.getByTestId('maintenance-end').fill(`${day}T12:00`);
  await admin.getByTestId('maintenance-reason').fill('BMC firmware');
  // The node's other GPUs may be booked too; the lead's reservation is among those in the way.
  await expect(admin.getByTestId('maintenance-clashes')).toContainText('In the way:');
  await expect(admin.getByTestId('maintenance-clashes')).toContainText(`#${id} (globex`);
  await admin.getByTestId('maintenance-save').click();
  await expect(admin.getByRole('alert')).toContainText(`#${id} (globex, scheduled`);

  // Beyond the demo data's horizon, the node is free.
  const later = new Date(Date.now() + 45 * 86_400_000).toISOString().slice(0, 10);
  await admin.getByTestId('maintenance-start').fill(`${later}T14:00`);
  await admin.getByTestId('maintenance-end').fill(`${later}T16:00`);
  await expect(admin.getByTestId('maintenance-clashes')).toContainText('No reservation is in the way.');
  await admin.getByTestId('maintenance-save').click();
  await expect(admin.getByTestId('maintenance-list')).toContainText(node);
  await expect(admin.getByTestId('maintenance-list')).toContainText('BMC firmware');
});
