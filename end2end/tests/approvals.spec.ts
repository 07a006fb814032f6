import { expect, test, type Page } from '@playwright/test';
import { hydrated, signIn } from './helpers';

test('a booking over the soft limit waits; the admin approves it on the Approvals page; the lead sees it scheduled', async ({ browser }) => {
  const lead = await (await browser.newContext()).newPage();
  await signIn(lead, 'lead@acme.example');
  await lead.goto('/availability?offering=a100-1g.10gb');
  await hydrated(lead);
  const day = new Date(Date.now() + 4 * 86_400_000).toISOString().slice(0, 10);
  await lead.getByTestId('start-input').fill(`${day}T09:00`);
  await lead.getByTestId('end-input').fill(`${day}T11:00`);
  // The default policy lets a team book 16 units without approval.
  await lead.getByTestId('quantity-input').fill('20');
  await expect(lead.getByTestId('quote-policy')).toContainText("Needs an admin's approval");
  await lead.getByRole('button', { name: 'Book…' }).click();
  await lead.getByRole('button', { name: 'Confirm booking' }).click();
  await expect(lead).toHaveURL(/\/reservations\/\d+$/);
  const id = lead.url().split('/').pop();
  await expect(lead.getByTestId('reservation-state')).toHaveText('pending_approval');
  await expect(lead.getByTestId('decision-reason')).toContainText('without approval');

  const admin = await (await browser.newContext()).newPage();
  await signIn(admin, 'admin@tenantry.example');
  await admin.getByRole('link', { name: 'Approvals' }).click();
  const item = admin.getByTestId('approval').filter({ hasText: `#${id}` });
  await expect(item).toContainText('20 × a100-1g.10gb for Acme Research');
  await expect(item).toContainText('requested by lead@acme.example');
  await hydrated(admin);
  await item.getByRole('button', { name: `Approve #${id}` }).click();
  await expect(admin.getByTestId('approval').filter({ hasText: `#${id}` })).toHaveCount(0);

  await lead.reload();
  await expect(lead.getByTestId('reservation-state')).toHaveText('scheduled');
  // The lead was told twice, unread until they look: that the booking waits, then that it was
  // approved. (Notices that time brings to the demo team's other reservations may add to the count.)
  await expect(lead.getByTestId('notifications-link')).toHaveText(/^Notifications \((\d+)\)$/);
  expect(await unread(lead)).toBeGreaterThanOrEqual(2);
  await lead.getByTestId('notifications-link').click();
  const told = lead.getByTestId('notification').filter({ hasText: `Reservation #${id}` });
  await expect(told.filter({ hasText: 'was approved' })).toContainText('· new');
  await expect(told.filter({ hasText: "waits for an admin's approval" })).toContainText('· new');
  // The newer notice comes first.
  await expect(told.first()).toContainText('was approved');
});

/** The unread count the header's notifications link shows. */
async function unread(page: Page): Promise<number> {
  const text = (await page.getByTestId('notifications-link').textContent()) ?? '';
  return Number(text.match(/\((\d+)\)/)?.[1] ?? 0);
}

test('a lead bursts to on-demand capacity, told first that it is preemptible', async ({ page }) => {
  await signIn(page, 'lead@acme.example');
  await page.goto('/availability?offering=l40s-gpu');
  await hydrated(page);
  await expect(page.getByTestId('burst-notice')).toContainText('preemptible');
  await expect(page.getByTestId('burst-notice')).toContainText('$1.49');
  await page.getByTestId('burst-quantity').fill('2');
  await page.getByTestId('burst-hours').fill('3');
  await page.getByRole('button', { name: 'Burst now' }).click();
  await expect(page).toHaveURL(/\/reservations\/\d+$/);
  // It is provisioned at once and handed over when its node passes acceptance.
  await expect(page.getByTestId('reservation-state')).toHaveText('active', { timeout: 30_000 });
  // 2 GPUs × 3 h × $1.49 on demand.
  await expect(page.getByTestId('reservation-price')).toHaveText('$8.94');
  await expect(page.getByTestId('decision-reason')).toContainText('preemptible');

  await page.goto('/availability?offering=l40s-gpu');
  await hydrated(page);
  await page.getByTestId('burst-hours').fill('100');
  await page.getByRole('button', { name: 'Burst now' }).click();
  await expect(page.getByRole('alert')).toContainText('burst limit');
});

test('an admin gives a team its own rate on the Tenants page; that team is quoted it', async ({ browser }) => {
  const admin = await (await browser.newContext()).newPage();
  await signIn(admin, 'admin@tenantry.example');
  await admin.getByRole('link', { name: 'Tenants' }).click();
  await hydrated(admin);
  const globex = admin.getByTestId('policy-globex');
  await globex.getByLabel('l40s-gpu reserved (list 95)').fill('80');
  await globex.getByLabel('l40s-gpu on demand (list 149)').fill('120');
  await globex.getByRole('button', { name: 'Save globex' }).click();
  await expect(admin.getByRole('status').filter({ hasText: 'Saved the policy' })).toContainText('Saved the policy of Globex AI');

  const lead = await (await browser.newContext()).newPage();
  await signIn(lead, 'lead@globex.example');
  await lead.goto('/availability?offering=l40s-gpu');
  await hydrated(lead);
  const day = new Date(Date.now() + 5 * 86_400_000).toISOString().slice(0, 10);
  await lead.getByTestId('start-input').fill(`${day}T08:00`);
  await lead.getByTestId('end-input').fill(`${day}T10:00`);
  await lead.getByTestId('quantity-input').fill('2');
  // 2 GPUs × 2 h × $0.80 instead of the list $0.95.
  await expect(lead.getByTestId('quote-price')).toHaveText('$3.20');
});
