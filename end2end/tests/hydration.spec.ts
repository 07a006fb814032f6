import { expect, test, type Page } from '@playwright/test';
import { hydrated, signIn } from './helpers';

// Every page, loaded cold (a full document load and hydration) several times, must hydrate
// without a panic or a hydration error: a mismatch between the server's HTML and what the
// browser builds is an unrecoverable panic that leaves the page dead.
const PAGES = [
  '/',
  '/sign-in',
  '/availability',
  '/availability?view=month',
  '/reservations',
  '/chargeback',
  '/notifications',
  '/settings/tokens',
  '/settings/notifications',
  '/settings/calendar',
  '/admin/fleet',
  '/admin/approvals',
  '/admin/tenants',
  '/admin/reports',
  '/admin/users',
  '/admin/audit',
  '/no-such-page',
];
const COLD_LOADS = Number(process.env.TENANTRY_E2E_COLD_LOADS ?? 4);

/** Collects page errors and console errors that speak of a panic or hydration, by page address. */
function watch(page: Page): { url: string; text: string }[] {
  const problems: { url: string; text: string }[] = [];
  page.on('pageerror', (error) => problems.push({ url: page.url(), text: `page error: ${error.message}` }));
  page.on('console', (message) => {
    if (message.type() === 'error' && /panic|hydrat/i.test(message.text())) {
      problems.push({ url: page.url(), text: `console: ${message.text()}` });
    }
  });
  return problems;
}

/** Loads `path` cold several times; fails on any problem of that page (not of the page that
 * sign-in landed on, which has its own test). */
async function loadCold(page: Page, path: string, problems: { url: string; text: string }[]) {
  const here = (url: string) => {
    const u = new URL(url);
    return u.pathname + u.search === path;
  };
  const mine = () => problems.filter((p) => here(p.url)).map((p) => p.text);
  for (let i = 0; i < COLD_LOADS; i++) {
    await page.goto(path);
    // A panic leaves the page unhydrated: say why rather than only that the wait timed out.
    await hydrated(page).catch((error) => {
      throw new Error(`cold load ${i + 1} of ${path} did not hydrate: ${mine().join('\n') || error}`);
    });
    // A late mismatch (a part that hydrates after its data arrives) shows up just after.
    await page.waitForTimeout(250);
    expect(mine(), `cold load ${i + 1} of ${path}`).toEqual([]);
  }
}

for (const email of ['lead@acme.example', 'admin@tenantry.example']) {
  test.describe(`cold loads as ${email}`, () => {
    for (const path of PAGES) {
      test(`${path} hydrates cleanly`, async ({ page }) => {
        test.setTimeout(20_000 + COLD_LOADS * 5_000);
        await signIn(page, email);
        await loadCold(page, path, watch(page));
      });
    }
  });
}

test('reservation pages hydrate cleanly, cold', async ({ page }) => {
  test.setTimeout(30_000 + COLD_LOADS * 15_000);
  await signIn(page, 'lead@acme.example');
  const problems = watch(page);
  await page.goto('/reservations');
  const links = page.locator('main a[href^="/reservations/"]');
  await expect(links.first()).toBeVisible();
  const hrefs = [...new Set(await links.evaluateAll((all) => all.map((a) => a.getAttribute('href')!)))].slice(0, 3);
  for (const href of hrefs) {
    await loadCold(page, href, problems);
  }
});
