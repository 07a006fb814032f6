import { expect, test, type Browser, type BrowserContext } from '@playwright/test';

// Cold loads of a page in a fresh browser context (empty cache), signed in as a demo user:
// what crosses the network, by kind, and when the page becomes interactive (the moment the
// wasm has hydrated it: `<html data-hydrated="true">`, which the app sets in its first effect),
// beside when it was first painted from the server's HTML. Printed as a table for
// docs/PERFORMANCE.md; the only assertion is that each load hydrated.
const RUNS = Number(process.env.TENANTRY_MEASURE_RUNS ?? 5);
// TENANTRY_MEASURE_IDENTITY=1 asks for every file uncompressed (`Accept-Encoding: identity`), as
// the portal served them before it compressed its static files.
const IDENTITY = process.env.TENANTRY_MEASURE_IDENTITY === '1';
// A network a remote lead might have: 20 Mbit/s down, 5 up, 40 ms round trips (Chrome's
// throttling, applied per request), beside loopback.
const NETWORKS = [
  { name: 'loopback', conditions: null },
  {
    name: '20 Mbit/s, 40 ms',
    conditions: { offline: false, latency: 40, downloadThroughput: 20e6 / 8, uploadThroughput: 5e6 / 8 },
  },
];
const PAGES = [
  { path: '/availability', email: 'lead@acme.example' },
  { path: '/chargeback', email: 'lead@acme.example' },
  { path: '/admin/fleet', email: 'admin@tenantry.example' },
];

type Load = {
  bytes: Record<string, number>;
  wasmRaw: number;
  wasmFiles: number;
  paint: number;
  interactive: number;
};

async function signedInState(browser: Browser, email: string) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto('/sign-in');
  await page.getByRole('button', { name: `Sign in as ${email}` }).click();
  await expect(page.getByTestId('signed-in-as')).toHaveText(email);
  const state = await context.storageState();
  await context.close();
  return state;
}

function kind(url: string): string {
  const path = new URL(url).pathname;
  if (path.endsWith('.wasm')) return 'wasm';
  if (path.endsWith('.js')) return 'js';
  if (path.endsWith('.css')) return 'css';
  return 'document and data';
}

async function coldLoad(context: BrowserContext, path: string, conditions: object | null): Promise<Load> {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  if (conditions) await cdp.send('Network.emulateNetworkConditions', conditions as never);
  if (IDENTITY) await cdp.send('Network.setExtraHTTPHeaders', { headers: { 'Accept-Encoding': 'identity' } });
  const urls = new Map<string, string>();
  const bytes: Record<string, number> = {};
  let wasmFiles = 0;
  let wasmRaw = 0;
  cdp.on('Network.responseReceived', (e) => urls.set(e.requestId, e.response.url));
  // Decoded bytes (what the browser compiles), beside the encoded ones that crossed the wire.
  cdp.on('Network.dataReceived', (e) => {
    const url = urls.get(e.requestId);
    if (url && kind(url) === 'wasm') wasmRaw += e.dataLength;
  });
  cdp.on('Network.loadingFinished', (e) => {
    const url = urls.get(e.requestId);
    if (!url) return;
    const k = kind(url);
    if (k === 'wasm') wasmFiles++;
    bytes[k] = (bytes[k] ?? 0) + e.encodedDataLength;
  });
  // When hydration marks the document, by the page's own clock (0 = navigation start).
  await page.addInitScript(() => {
    const poll = setInterval(() => {
      if (document.documentElement?.dataset.hydrated === 'true') {
        (window as unknown as { __interactive: number }).__interactive = performance.now();
        clearInterval(poll);
      }
    }, 5);
  });
  // Not waiting for the load event: the page's live-update stream keeps a request open.
  await page.goto(path, { waitUntil: 'commit' });
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true', { timeout: 60_000 });
  const { interactive, paint } = await page.evaluate(() => ({
    interactive: (window as unknown as { __interactive: number }).__interactive,
    paint: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN,
  }));
  // Requests the hydrated page starts at once (its live-update stream) are not part of the load.
  await page.close();
  return { bytes, wasmRaw, wasmFiles, paint, interactive };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const kb = (n: number) => `${Math.round(n / 1024).toLocaleString('en')} KB`;

test('cold loads: bytes and time to interactive', async ({ browser }) => {
  const rows: string[] = [];
  for (const { path, email } of PAGES) {
    const storageState = await signedInState(browser, email);
    for (const network of NETWORKS) {
      const loads: Load[] = [];
      for (let i = 0; i < RUNS; i++) {
        const context = await browser.newContext({ storageState });
        loads.push(await coldLoad(context, path, network.conditions));
        await context.close();
      }
      const b = loads[loads.length - 1].bytes;
      const row =
        `| ${path} | ${network.name} | ${kb(b.wasm ?? 0)} (${kb(loads[loads.length - 1].wasmRaw)} raw) in ${loads[0].wasmFiles} file(s) | ${kb(b.js ?? 0)} | ` +
          `${kb((b.css ?? 0) + (b['document and data'] ?? 0))} | ` +
          `${Math.round(median(loads.map((l) => l.paint)))} ms | ` +
          `${Math.round(median(loads.map((l) => l.interactive)))} ms (${Math.round(Math.min(...loads.map((l) => l.interactive)))}–${Math.round(Math.max(...loads.map((l) => l.interactive)))}) |`;
      console.log(row);
      rows.push(row);
    }
  }
  console.log(
    [
      `cold loads, ${RUNS} each (median; min–max of time to interactive)${IDENTITY ? ', uncompressed' : ''}:`,
      '| page | network | wasm transferred (raw) | JavaScript | HTML, CSS and data | first paint | interactive |',
      '|---|---|---|---|---|---|---|',
      ...rows,
    ].join('\n'),
  );
});
