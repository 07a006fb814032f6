import { expect, test, type Page } from '@playwright/test';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { readdirSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { baseURL, mailDir } from '../playwright.config';
import { hydrated, signIn } from './helpers';

/** A real HTTP receiver on loopback that records every POST and answers 204. */
async function receiver() {
  const got: { headers: IncomingHttpHeaders; body: string }[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      got.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/tenantry`, got, close: () => server.close() };
}

/** Checks `X-Tenantry-Signature: t=<t>,v1=<hex>` the way docs/using.md tells a receiver to. */
function verify(secret: string, header: string, body: string): boolean {
  const parts = Object.fromEntries(header.split(',').map((p) => p.split('=') as [string, string]));
  if (Math.abs(Date.now() / 1000 - Number(parts.t)) > 300) return false;
  const expected = createHmac('sha256', secret).update(`${parts.t}.${body}`).digest();
  const given = Buffer.from(parts.v1 ?? '', 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The messages the test SMTP server saved, as raw text. */
function mails(): string[] {
  try {
    return readdirSync(mailDir)
      .filter((n) => n.endsWith('.eml'))
      .sort()
      .map((n) => readFileSync(`${mailDir}/${n}`, 'utf8'));
  } catch {
    return [];
  }
}

const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);

async function api(page: Page, method: 'post' | 'patch', path: string, data: unknown) {
  const response = await page.request.fetch(path, { method, data, headers: { Origin: baseURL } });
  return { status: response.status(), body: await response.json() };
}

test('a lead chooses e-mail notices, registers a webhook and sees a signed test delivery', async ({ page }) => {
  const hook = await receiver();
  await signIn(page, 'lead@acme.example');
  await page.getByTestId('notification-settings-link').click();
  await expect(page).toHaveURL(/\/settings\/notifications$/);
  await hydrated(page);
  // "Booking scheduled" is not e-mailed by default; the lead turns it on, and it stays on.
  const scheduled = page.getByTestId('email-booking_scheduled');
  await expect(scheduled).not.toBeChecked();
  await scheduled.check();
  await expect(page.getByTestId('email-choices')).not.toContainText('Booking scheduled(default)');
  await page.reload();
  await hydrated(page);
  await expect(page.getByTestId('email-booking_scheduled')).toBeChecked();
  await expect(page.getByTestId('email-off')).toHaveCount(0);

  // The cloud metadata address is inside the operator's network: refused, naming the rule, and
  // nothing is registered.
  await page.getByTestId('webhook-url').fill('http://169.254.169.254/latest/meta-data/');
  await page.getByTestId('webhook-register').click();
  await expect(page.getByRole('alert')).toContainText("inside the operator's network");
  await expect(page.getByRole('alert')).toContainText('link-local');
  await expect(page.getByTestId('webhook-target')).toHaveCount(0);

  // The portal under test allows loopback (TENANTRY_WEBHOOK_ALLOW_NETWORKS), where the receiver is.
  await page.getByTestId('webhook-url').fill(hook.url);
  await page.getByTestId('webhook-register').click();
  const secret = (await page.getByTestId('webhook-secret').textContent())!.trim();
  expect(secret).toMatch(/^[0-9a-f]{64}$/);
  await expect(page.getByTestId('webhook-target')).toHaveText(hook.url);
  await page.getByTestId('webhook-test').click();
  await expect.poll(() => hook.got.length).toBe(1);
  const [delivery] = hook.got;
  expect(verify(secret, String(delivery.headers['x-tenantry-signature']), delivery.body)).toBe(true);
  expect(JSON.parse(delivery.body)).toMatchObject({ kind: 'test', team: 'acme' });
  await expect(async () => {
    await page.getByTestId('webhook-refresh').click();
    await expect(page.getByTestId('delivery').first()).toHaveAttribute('data-status', '204', { timeout: 1000 });
  }).toPass();
  await expect(page.getByTestId('delivery').first()).toContainText('Test delivery');

  // A booking now reaches the webhook, signed, and the lead's mailbox.
  const before = mails().length;
  const booked = await api(page, 'post', '/api/v1/reservations', {
    offering: 'l40s-gpu',
    quantity: 1,
    start: `${day(5)}T06:00:00Z`,
    end: `${day(5)}T07:00:00Z`,
  });
  expect(booked.status).toBe(201);
  await expect.poll(() => hook.got.length).toBe(2);
  const told = JSON.parse(hook.got[1].body);
  expect(told).toMatchObject({ kind: 'booking_scheduled', reservation_id: booked.body.id });
  expect(verify(secret, String(hook.got[1].headers['x-tenantry-signature']), hook.got[1].body)).toBe(true);
  await expect.poll(() => mails().length).toBe(before + 1);
  const mail = mails()[before];
  expect(mail).toContain('X-Envelope-To: lead@acme.example');
  expect(mail).toMatch(/Subject: \[Tenantry\] Booking scheduled: Reservation #\d+/);
  hook.close();
});

test('a member subscribes to the calendar feed; rotating it retires the old URL', async ({ page, playwright }) => {
  await signIn(page, 'member@acme.example');
  await page.getByTestId('calendar-link').click();
  await hydrated(page);
  const url = await page.getByTestId('personal-feed-url').inputValue();
  expect(url).toMatch(/\/calendar\/[0-9a-f]{64}\.ics$/);
  await expect(page.getByTestId('team-feed')).toHaveCount(0);
  // A calendar app has no session: a fresh client reads the feed by its URL alone.
  const app = await playwright.request.newContext();
  const feed = await app.get(url);
  expect(feed.status()).toBe(200);
  expect(feed.headers()['content-type']).toContain('text/calendar');
  const text = await feed.text();
  expect(text.startsWith('BEGIN:VCALENDAR\r\n')).toBe(true);
  expect(text).toContain('BEGIN:VEVENT');
  expect(text).toMatch(/UID:reservation-\d+@127\.0\.0\.1/);

  await page.getByTestId('personal-feed-rotate').click();
  await expect(page.getByTestId('personal-feed-url')).not.toHaveValue(url);
  expect((await app.get(url)).status()).toBe(404);
  const fresh = await page.getByTestId('personal-feed-url').inputValue();
  expect((await app.get(fresh)).status()).toBe(200);
  await app.dispose();
});

test('"why not?" explains a full window, and its suggestion books in one click', async ({ browser }) => {
  // Globex takes every H100 node free on one morning.
  const globex = await (await browser.newContext()).newPage();
  await signIn(globex, 'lead@globex.example');
  // Placement `any`, so it takes nodes of every fabric domain (compact, the default, takes one).
  const window = { start: `${day(6)}T08:00:00Z`, end: `${day(6)}T12:00:00Z`, options: { placement: 'any' } };
  const quote = await api(globex, 'post', '/api/v1/quotes', { offering: 'h100-node', quantity: 1, ...window });
  const free = quote.body.max_quantity as number;
  expect(free).toBeGreaterThan(0);
  const taken = await api(globex, 'post', '/api/v1/reservations', { offering: 'h100-node', quantity: free, ...window });
  expect(taken.status).toBe(201);

  const page = await (await browser.newContext()).newPage();
  await signIn(page, 'lead@acme.example');
  await page.goto('/availability?offering=h100-node');
  await hydrated(page);
  await page.getByTestId('start-input').fill(`${day(6)}T08:00`);
  await page.getByTestId('end-input').fill(`${day(6)}T12:00`);
  await expect(page.getByTestId('quote-fits')).toContainText('Only 0 free');
  const why = page.getByTestId('why-not');
  await expect(why.locator('[data-testid="why-not-cause"][data-kind="other_teams"]')).toContainText(
    "Other teams' reservations hold",
  );
  await expect(why).not.toContainText(/globex/i);
  const later = why.locator('[data-testid="suggestion"][data-kind="window"]');
  await expect(later).toContainText('earliest window of the same length');
  await later.click();
  await expect(page.getByTestId('quote-fits')).toContainText('Fits');
  await expect(page.getByTestId('why-not')).toHaveCount(0);
  await page.getByRole('button', { name: 'Book…' }).click();
  await page.getByRole('button', { name: 'Confirm booking' }).click();
  await expect(page).toHaveURL(/\/reservations\/\d+$/);
  await expect(page.getByTestId('reservation-state')).toHaveText('scheduled');
});

test("the advisor recommends a shape and applies it to the booking form", async ({ page }) => {
  await signIn(page, 'lead@acme.example');
  await page.goto('/availability?offering=h100-node');
  await hydrated(page);
  await page.getByTestId('advisor-toggle').click();
  await page.getByTestId('advisor-workload').selectOption('inference');
  await page.getByTestId('advisor-params').fill('7');
  await page.getByTestId('advisor-precision').selectOption('bf16');
  await page.getByTestId('advisor-submit').click();
  const shape = page.getByTestId('advisor-recommendation');
  await expect(shape).toContainText('Recommended:');
  const offering = (await shape.getAttribute('data-offering'))!;
  const quantity = (await shape.getAttribute('data-quantity'))!;
  expect(offering).not.toBe('h100-node');
  await expect(page.getByTestId('advisor-reason').first()).toBeVisible();
  await page.getByTestId('advisor-apply').click();
  await expect(page.getByTestId('advisor-applied')).toContainText(`Applied: ${quantity} ×`);
  await expect(page.getByTestId('quantity-input')).toHaveValue(quantity);
  await expect(page.getByTestId('offering-select')).toHaveValue(offering);
  await page.getByTestId('start-input').fill(`${day(7)}T09:00`);
  await page.getByTestId('end-input').fill(`${day(7)}T11:00`);
  await expect(page.getByTestId('quote-fits')).toContainText('Fits');
});
