import { expect, test, type Browser, type Page } from '@playwright/test';
import { installURL } from '../playwright.config';
import { hydrated, signInWithSso } from './helpers';

// A fresh install (playwright.config.ts: its own empty PostgreSQL database, no demo data, single
// sign-on only, the simulated fleet of fixtures/install-fleet.toml): the first admin makes the
// fleet bookable with the portal alone, and a team lead books with a priced option and finds its
// line in the quote and in chargeback. One journey, in order: each step needs the one before.
test.describe.configure({ mode: 'serial' });
test.use({ baseURL: installURL });

/** A fresh browser context on the install, signed in through the identity provider. */
async function signedIn(browser: Browser, login: string): Promise<Page> {
  const page = await (await browser.newContext({ baseURL: installURL })).newPage();
  await signInWithSso(page, login);
  await expect(page).toHaveURL(`${installURL}/`);
  await expect(page.getByTestId('signed-in-as')).toHaveText(login);
  return page;
}

/** The checklist step's state on the start page. */
const step = (page: Page, kind: string) => page.locator(`[data-step="${kind}"]`);

test('from an empty database the first admin makes the fleet bookable and a lead books a priced option', async ({
  browser,
}) => {
  test.setTimeout(120_000);

  // Before anything is set up, a lead is told plainly that nothing is bookable yet.
  const early = await signedIn(browser, 'ml-lead@corp.example');
  await expect(early.getByTestId('nothing-bookable')).toContainText('Nothing is bookable yet');
  await early.goto('/availability');
  await expect(early.getByTestId('nothing-bookable')).toBeVisible();
  await expect(early.getByTestId('heatmap')).toHaveCount(0);
  await early.context().close();

  // The first admin lands on the setup checklist.
  const admin = await signedIn(browser, 'first-admin@corp.example');
  await expect(admin.getByTestId('setup-checklist')).toBeVisible();
  await expect(step(admin, 'nodes_admitted')).toHaveAttribute('data-done', 'false');
  await expect(step(admin, 'offering')).toHaveAttribute('data-done', 'false');

  // Fleet: read the simulated inventory, then admit every enrolled node.
  await admin.goto('/admin/fleet');
  await hydrated(admin);
  await admin.getByTestId('fleet-reconcile').click();
  await expect(admin.getByTestId('last-reconcile')).toContainText('3 reported');
  await expect(admin.getByTestId('enrolled-node')).toHaveCount(3);
  await admin.getByTestId('admit-all').click();
  await expect(admin.getByTestId('enrolled-node')).toHaveCount(0);

  // Offerings: an H100 GPU offering with a priced storage option, and a MIG offering.
  await admin.goto('/admin/offerings');
  await hydrated(admin);
  await createOffering(admin, { id: 'h100-gpu', name: 'H100 GPU', grain: 'gpu', model: 'H100-SXM-80GB' }, 300, 450);
  const h100 = admin.getByTestId('offering-h100-gpu');
  await addChoice(h100, 'storage_tb', '1', 'free', '');
  await addChoice(h100, 'storage_tb', '2', 'per_unit_hour', '40');
  await expect(h100.getByTestId('choice-storage_tb-2')).toContainText('$0.40');
  await createOffering(
    admin,
    { id: 'a100-1g', name: 'A100 1g.10gb', grain: 'mig', model: 'A100-80GB', profile: '1g.10gb' },
    25,
    40,
  );
  const mig = admin.getByTestId('offering-a100-1g');
  await addChoice(mig, 'orchestrator', 'kubernetes', 'free', '');
  await addChoice(mig, 'orchestrator', 'slurm', 'per_reservation', '500');
  await expect(mig.getByTestId('choice-orchestrator-slurm')).toContainText('$5.00');

  // The default policy, reviewed and saved.
  await admin.goto('/admin/tenants');
  await hydrated(admin);
  await admin.getByTestId('policy-default').getByRole('button', { name: 'Save the default' }).click();
  await expect(admin.getByRole('status')).toContainText('Saved');

  // The checklist is done: the start page no longer shows it.
  await admin.goto('/admin/setup');
  for (const kind of ['fleet_reconciled', 'nodes_admitted', 'offering', 'prices', 'default_policy']) {
    await expect(step(admin, kind)).toHaveAttribute('data-done', 'true');
  }
  await admin.goto('/');
  await expect(admin.getByRole('heading', { name: 'Welcome, First Admin' })).toBeVisible();
  await expect(admin.getByTestId('setup-checklist')).toHaveCount(0);

  // A lead books two GPUs with 2 TB of storage: the option's line is in the quote and the bill.
  const lead = await signedIn(browser, 'ml-lead@corp.example');
  await expect(lead.getByTestId('nothing-bookable')).toHaveCount(0);
  await lead.goto('/availability?offering=h100-gpu');
  await hydrated(lead);
  const day = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
  await lead.getByTestId('start-input').fill(`${day}T08:00`);
  await lead.getByTestId('end-input').fill(`${day}T10:00`);
  await lead.getByTestId('quantity-input').fill('2');
  await lead.getByText('Options', { exact: true }).click();
  await lead.getByTestId('option-storage_tb').selectOption('2');
  // 2 GPUs × 2 h × ($3.00 + $0.40 for 2 TB) = $13.60, of which the storage is $1.60.
  await expect(lead.getByTestId('quote-price')).toHaveText('$13.60');
  await expect(lead.getByTestId('quote-line').filter({ hasText: 'storage' })).toBeVisible();
  await expect(lead.getByTestId('quote-fits')).toContainText('Fits');
  // The 1 TB node is left out, and the quote says why.
  await expect(lead.getByTestId('quote-options-note')).toContainText('1 node(s) have less than 2 TB of local storage');
  await lead.getByRole('button', { name: 'Book…' }).click();
  await lead.getByRole('button', { name: 'Confirm booking' }).click();
  await expect(lead).toHaveURL(/\/reservations\/\d+$/);
  await expect(lead.getByTestId('reservation-price')).toHaveText('$13.60');

  // Chargeback: the reservation costs the locked total, and this month's statement lists the
  // storage as a line of its own (2 GPUs × 2 h × $0.40).
  await lead.goto('/chargeback');
  await hydrated(lead);
  await expect(lead.getByRole('row', { name: /2 × h100-gpu/ })).toContainText('$13.60');
  await expect(lead.getByText('Option: storage_tb 2 TB (per unit-hour)')).toBeVisible();
  const month = new Date().toISOString().slice(0, 7);
  const [download] = await Promise.all([
    lead.waitForEvent('download'),
    lead.getByRole('link', { name: `Download ${month} (CSV)` }).click(),
  ]);
  const csv = await (await import('node:fs/promises')).readFile(await download.path(), 'utf8');
  const storage = csv.split('\n').find((line) => line.includes('storage_tb 2 TB'));
  expect(storage, csv).toBeDefined();
  expect(storage).toContain(',option,');
  expect(storage).toContain(',160,');
});

type OfferingShape = { id: string; name: string; grain: string; model: string; profile?: string };

async function createOffering(page: Page, o: OfferingShape, reserved: number, onDemand: number) {
  const form = page.getByTestId('create-offering');
  await form.getByTestId('offering-id').fill(o.id);
  await form.getByTestId('offering-name').fill(o.name);
  await form.getByTestId('offering-grain').selectOption(o.grain);
  await form.getByTestId('offering-model').selectOption(o.model);
  if (o.profile) await form.getByTestId('offering-profile').selectOption(o.profile);
  await form.getByTestId('offering-reserved').fill(String(reserved));
  await form.getByTestId('offering-on-demand').fill(String(onDemand));
  await form.getByTestId('create-offering-submit').click();
  await expect(page.getByTestId(`offering-${o.id}`)).toBeVisible();
}

async function addChoice(
  offering: ReturnType<Page['getByTestId']>,
  kind: string,
  value: string,
  basis: string,
  cents: string,
) {
  await offering.getByTestId('choice-kind').selectOption(kind);
  await offering.getByTestId('choice-value').fill(value);
  await offering.getByTestId('choice-basis').selectOption(basis);
  if (cents) await offering.getByTestId('choice-cents').fill(cents);
  await offering.getByTestId('add-choice').click();
  await expect(offering.getByTestId(`choice-${kind}-${value}`)).toBeVisible();
}
