import { expect, test, type Page } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { hydrated, signIn } from './helpers';

/** The heatmap cell for tomorrow at `hour` (rows start at today's midnight, UTC). */
const tomorrowAt = (page: Page, hour: number) => page.locator(`[data-testid="heat-cell"][data-index="${24 + hour}"]`);

async function dragAcross(page: Page, fromHour: number, toHour: number) {
  const from = await tomorrowAt(page, fromHour).boundingBox();
  const to = await tomorrowAt(page, toHour).boundingBox();
  if (!from || !to) throw new Error('heatmap cells are not visible');
  await page.mouse.move(from.x + from.width / 2, from.y + from.height / 2);
  await page.mouse.down();
  await page.mouse.move(to.x + to.width / 2, to.y + to.height / 2, { steps: 8 });
  await page.mouse.up();
}

test('a lead books a node by dragging on the calendar; another team sees it go without reloading', async ({ browser }) => {
  const watcher = await (await browser.newContext()).newPage();
  await signIn(watcher, 'lead@globex.example');
  await watcher.goto('/availability?offering=h100-node');
  await hydrated(watcher);
  const watched = tomorrowAt(watcher, 10);
  const before = Number(await watched.getAttribute('data-free'));
  expect(before).toBeGreaterThan(0);

  const page = await (await browser.newContext()).newPage();
  await signIn(page, 'lead@acme.example');
  await page.goto('/availability?offering=h100-node');
  await hydrated(page);
  await dragAcross(page, 10, 12);
  await expect(page.getByTestId('start-input')).toHaveValue(/T10:00$/);
  await expect(page.getByTestId('end-input')).toHaveValue(/T13:00$/);
  // 1 node × 3 hours × $20.00.
  await expect(page.getByTestId('quote-price')).toHaveText('$60.00');
  await expect(page.getByTestId('quote-fits')).toContainText('Fits');

  await page.getByRole('button', { name: 'Book…' }).click();
  await expect(page.getByRole('alertdialog', { name: 'Confirm booking' })).toContainText('Book 1 × H100 SXM node');
  await page.getByRole('button', { name: 'Confirm booking' }).click();
  await expect(page).toHaveURL(/\/reservations\/\d+$/);
  await expect(page.getByTestId('reservation-state')).toHaveText('scheduled');
  await expect(page.getByTestId('reservation-price')).toHaveText('$60.00');
  await expect(page.getByTestId('allocations').locator('tbody tr')).toHaveCount(8);

  // The other team's calendar follows through server-sent events, with no reload.
  await expect(watched).toHaveAttribute('data-free', String(before - 1));
});

test('a lead types a window, extends it and cancels it', async ({ page }) => {
  await signIn(page, 'lead@acme.example');
  await page.goto('/availability?offering=l40s-gpu');
  await hydrated(page);
  const day = new Date(Date.now() + 2 * 86_400_000).toISOString().slice(0, 10);
  await page.getByTestId('start-input').fill(`${day}T08:00`);
  await page.getByTestId('end-input').fill(`${day}T10:00`);
  await page.getByTestId('quantity-input').fill('2');
  await expect(page.getByTestId('quote-price')).toHaveText('$3.80');
  await page.getByRole('button', { name: 'Book…' }).click();
  await page.getByRole('button', { name: 'Confirm booking' }).click();
  await expect(page).toHaveURL(/\/reservations\/\d+$/);

  await page.getByTestId('new-end').fill(`${day}T12:00`);
  await page.getByRole('button', { name: 'Change end…' }).click();
  await page.getByRole('button', { name: 'Confirm' }).click();
  await expect(page.getByTestId('reservation-end')).toHaveText(`${day} 12:00 UTC`);
  await expect(page.getByTestId('reservation-price')).toHaveText('$7.60');

  await page.getByRole('button', { name: 'Cancel reservation…' }).click();
  await page.getByRole('button', { name: 'Confirm' }).click();
  await expect(page.getByTestId('reservation-state')).toHaveText('cancelled');
});

test('bookings survive a server restart', async ({ browser }) => {
  const port = 3199;
  const start = () =>
    spawn('../target/debug/tenantry', ['serve'], {
      env: {
        ...process.env,
        DATABASE_URL: 'sqlite://.tmp/restart.db',
        TENANTRY_SIM_FLEET: '.tmp/restart-fleet.toml',
        TENANTRY_DEMO: '1',
        TENANTRY_ADDR: `127.0.0.1:${port}`,
        LEPTOS_SITE_ROOT: '../target/site',
        RUST_LOG: 'warn',
      },
      stdio: 'ignore',
    });
  const ready = async () => {
    for (let i = 0; i < 100; i++) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) return;
      } catch {}
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error('the server did not come up');
  };
  const stop = (server: ChildProcess) => new Promise((r) => { server.once('exit', r); server.kill('SIGTERM'); });

  let server = start();
  await ready();
  const context = await browser.newContext({ baseURL: `http://127.0.0.1:${port}` });
  const page = await context.newPage();
  await signIn(page, 'lead@acme.example');
  const day = new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10);
  const response = await page.request.post('/api/v1/reservations', {
    data: { offering: 'a100-1g.10gb', quantity: 3, start: `${day}T06:00:00Z`, end: `${day}T07:00:00Z` },
    headers: { Origin: `http://127.0.0.1:${port}` },
  });
  expect(response.status()).toBe(201);
  const { id } = await response.json();

  await stop(server);
  server = start();
  await ready();
  await page.goto(`/reservations/${id}`);
  await expect(page.getByTestId('reservation-state')).toHaveText('scheduled');
  await expect(page.getByTestId('allocations').locator('tbody tr')).toHaveCount(3);
  await context.close();
  await stop(server);
});

test('a lead books a preemptible GPU cheaper, told first what it risks', async ({ page }) => {
  await signIn(page, 'lead@acme.example');
  await page.goto('/availability?offering=l40s-gpu');
  await hydrated(page);
  const day = new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10);
  await page.getByTestId('start-input').fill(`${day}T08:00`);
  await page.getByTestId('end-input').fill(`${day}T12:00`);
  // Standard: 4 hours × $0.95, never cut short.
  await expect(page.getByTestId('quote-price')).toHaveText('$3.80');
  await expect(page.getByTestId('quote-class')).toContainText('never cut short');
  // Preemptible: 60 % of the rate, and the quote says it may be ended early, with notice.
  await page.getByTestId('class-input').selectOption('preemptible');
  await expect(page.getByTestId('quote-price')).toHaveText('$2.28');
  await expect(page.getByTestId('quote-class')).toContainText('may end it early, with at least 15 minutes');
  await page.getByRole('button', { name: 'Book…' }).click();
  await expect(page.getByRole('alertdialog', { name: 'Confirm booking' })).toContainText('(preemptible)');
  await page.getByRole('button', { name: 'Confirm booking' }).click();
  await expect(page).toHaveURL(/\/reservations\/\d+$/);
  await expect(page.getByTestId('reservation-class')).toHaveText('preemptible');
  await expect(page.getByTestId('reservation-price')).toHaveText('$2.28');
});

test('a lead takes a development seat, told first what a seat does not isolate, and sees its own use', async ({ page }) => {
  // Its use is sampled once a minute once it runs.
  test.setTimeout(180_000);
  await signIn(page, 'lead@acme.example');
  await page.goto('/availability?offering=l40s-seat');
  await hydrated(page);
  const notice = page.getByTestId('seat-isolation-notice');
  await expect(notice).toContainText('A seat is not isolated');
  await expect(notice).toContainText('time-sliced into 4 seats');
  await expect(notice).toContainText('for serving or training book a MIG slice, a GPU or a node');
  await expect(page.getByTestId('offering-summary')).toContainText('per seat-hour');
  // A seat now, on demand: 1 seat × 2 h × $0.45.
  await page.getByTestId('burst-quantity').fill('1');
  await page.getByTestId('burst-hours').fill('2');
  await page.getByRole('button', { name: 'Burst now' }).click();
  await expect(page).toHaveURL(/\/reservations\/\d+$/);
  const id = page.url().split('/').pop();
  await expect(page.getByTestId('reservation-state')).toHaveText('active', { timeout: 30_000 });
  await expect(page.getByTestId('reservation-price')).toHaveText('$0.90');
  await expect(page.getByTestId('allocations')).toContainText(/seat \d of 4 \(time-sliced\)/);

  // Its own use, measured on its seat, shows on the Chargeback page once sampled.
  await expect(async () => {
    // Every reservation of the month on one page: later ones come first.
    await page.goto('/chargeback?limit=1000');
    const row = page.getByTestId('reservation-costs').locator('tbody tr', { hasText: `#${id} ` });
    await expect(row).toContainText(/\d+\.\d %/, { timeout: 2_000 });
  }).toPass({ timeout: 120_000, intervals: [5_000] });
});

test('a lead takes a seat of a time-sliced MIG instance, told what the instance does and does not isolate', async ({ page }) => {
  await signIn(page, 'lead@acme.example');
  await page.goto('/availability?offering=a100-3g.40gb-seat');
  await hydrated(page);
  const notice = page.getByTestId('seat-isolation-notice');
  await expect(notice).toContainText('A seat is not isolated');
  await expect(notice).toContainText('Each 3g.40gb MIG instance is time-sliced into 4 seats');
  await expect(notice).toContainText('the instance is isolated from the rest of the GPU');
  // A seat now, on demand: 1 seat × 2 h × $0.28.
  await page.getByTestId('burst-quantity').fill('1');
  await page.getByTestId('burst-hours').fill('2');
  await page.getByRole('button', { name: 'Burst now' }).click();
  await expect(page).toHaveURL(/\/reservations\/\d+$/);
  await expect(page.getByTestId('reservation-price')).toHaveText('$0.56');
  await expect(page.getByTestId('allocations')).toContainText(
    /seat \d of 4 of the instance on MIG slices \d–\d \(time-sliced\)/,
  );
});
