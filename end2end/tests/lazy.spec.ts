import { expect, test, type Page } from '@playwright/test';
import { hydrated, signIn } from './helpers';

// The site is built split per route (`cargo leptos build --split`, app/src/routes.rs): the
// calendar's code is in the main wasm module, every other page's in a chunk of its own that the
// browser fetches when the page is first shown.

/** The wasm files the page fetches, by name, in order. */
function wasmFetches(page: Page): string[] {
  const names: string[] = [];
  page.on('request', (request) => {
    const path = new URL(request.url()).pathname;
    if (path.endsWith('.wasm')) names.push(path.slice(path.lastIndexOf('/') + 1));
  });
  return names;
}

const pageChunk = (names: string[], view: string) => names.some((n) => n.startsWith(`split___${view}_view_`));

/** Marks the window, so a later check can tell that no full document load happened since. */
async function markWindow(page: Page) {
  await page.evaluate(() => ((window as unknown as { __sameDocument: boolean }).__sameDocument = true));
}
async function sameDocument(page: Page) {
  return page.evaluate(() => (window as unknown as { __sameDocument?: boolean }).__sameDocument === true);
}

test('the calendar loads no other page code; a page opened from it fetches its own and works', async ({ page }) => {
  await signIn(page, 'admin@tenantry.example');
  // The page sign-in lands on (lazy too) has what it needs before the watch starts.
  await hydrated(page);
  const fetched = wasmFetches(page);
  await page.goto('/availability');
  await hydrated(page);
  expect(fetched).toContain('tenantry.wasm');
  expect(fetched.filter((n) => n.startsWith('split_')), 'page chunks fetched by a cold calendar load').toEqual([]);

  // Client-side navigation to Chargeback: the router fetches that page's chunk, in this document.
  await markWindow(page);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Chargeback', exact: true }).click();
  await expect(page).toHaveURL(/\/chargeback$/);
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Chargeback');
  expect(pageChunk(fetched, 'chargeback'), `wasm fetched: ${fetched.join(', ')}`).toBe(true);
  expect(await sameDocument(page)).toBe(true);

  // From the lazily loaded page, the navigation still works in the browser, to another lazily
  // loaded page (Approvals, one of the admin links) with its own chunk.
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Approvals', exact: true }).click();
  await expect(page).toHaveURL(/\/admin\/approvals$/);
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Approvals');
  expect(pageChunk(fetched, 'approvals')).toBe(true);
  expect(await sameDocument(page)).toBe(true);

  // And back to the calendar, which needs nothing more.
  const before = fetched.length;
  await page.goBack();
  await page.goBack();
  await expect(page).toHaveURL(/\/availability$/);
  await expect(page.getByTestId('offering-summary')).toBeVisible();
  expect(fetched.length).toBe(before);
  expect(await sameDocument(page)).toBe(true);
});

test('a lazily loaded page loaded cold fetches its chunk, hydrates and stays live', async ({ page }) => {
  await signIn(page, 'lead@acme.example');
  await hydrated(page);
  const fetched = wasmFetches(page);
  await page.goto('/reservations');
  await hydrated(page);
  expect(pageChunk(fetched, 'reservations'), `wasm fetched: ${fetched.join(', ')}`).toBe(true);
  expect(pageChunk(fetched, 'chargeback')).toBe(false);

  // A reservation's page, opened from the list, comes in its own chunk without a document load.
  await markWindow(page);
  await page.locator('main a[href^="/reservations/"]').first().click();
  await expect(page).toHaveURL(/\/reservations\/\d+$/);
  expect(await sameDocument(page)).toBe(true);
  await expect.poll(() => pageChunk(fetched, 'reservation')).toBe(true);
});
