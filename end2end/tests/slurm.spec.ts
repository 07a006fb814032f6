import { expect, test, type Page } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { slurmConf, slurmURL } from '../playwright.config';
import { hydrated, signIn } from './helpers';

// The portal on the real Slurm (playwright.config.ts: TENANTRY_FLEET=slurm, prefix `e2e`, the
// demo world): a lead books a GPU in the browser, follows it to the hand-over, submits a job as
// the team's Unix user with the command the hand-over shows, and finds the job's GPU in the
// reservation's utilization on Chargeback. Slurm runs where scripts/slurm.sh started it; CI must
// have it, a developer without it is told how to get it.
test.use({ baseURL: slurmURL });
test.skip(
  !slurmConf && !process.env.CI,
  'SLURM_CONF is not set: start Slurm with scripts/slurm.sh start, then eval "$(scripts/slurm.sh env)"',
);

/** Runs a Slurm tool (or `runuser`) with this process's environment, SLURM_CONF included. */
function slurm(command: string, args: string[]): string {
  return execFileSync(command, args, { encoding: 'utf8', env: process.env, timeout: 30_000 });
}

/** The current minute as the booking form's UTC `YYYY-MM-DDTHH:MM`, `minutes` later. */
const minute = (at: Date, minutes = 0) => new Date(at.getTime() + minutes * 60_000).toISOString().slice(0, 16);

/** The reservation's utilization on Chargeback ("12.5 %"), or NaN while it has none. */
async function utilization(page: Page, id: string): Promise<number> {
  const row = page
    .getByTestId('reservation-costs')
    .locator('tbody tr')
    .filter({ has: page.getByRole('link', { name: `#${id} (` }) });
  // Not waiting for a row that is not there yet.
  const [text] = await row.locator('td').last().allTextContents();
  return Number.parseFloat((text ?? '').replace('%', '').trim());
}

test('a lead books a GPU on Slurm, submits a job with the hand-over command and sees its utilization', async ({
  page,
}) => {
  expect(slurmConf, 'CI runs this against a real Slurm: scripts/test.sh exports SLURM_CONF').toBeTruthy();
  test.setTimeout(240_000);
  await signIn(page, 'lead@acme.example');
  await page.goto('/availability?offering=h100-gpu');
  await hydrated(page);

  // One GPU from this minute for an hour (a minute about to end would be past by the confirm).
  const secondsLeft = 60 - new Date().getUTCSeconds();
  if (secondsLeft < 15) await page.waitForTimeout(secondsLeft * 1000 + 500);
  const now = new Date();
  await page.getByTestId('start-input').fill(minute(now));
  await page.getByTestId('end-input').fill(minute(now, 60));
  await page.getByTestId('quantity-input').fill('1');
  await expect(page.getByTestId('quote-fits')).toContainText('Fits');
  await page.getByRole('button', { name: 'Book…' }).click();
  await page.getByRole('button', { name: 'Confirm booking' }).click();
  await expect(page).toHaveURL(/\/reservations\/\d+$/);
  const id = page.url().split('/').pop()!;
  await hydrated(page);

  // The timeline follows provisioning on Slurm to the hand-over: the reservation is made in
  // Slurm, the acceptance check runs as a job inside it.
  const step = (name: string) => page.locator(`[data-testid="timeline-step"][data-step="${name}"]`);
  await expect(step('orchestrator')).toHaveAttribute('data-status', 'done', { timeout: 60_000 });
  await expect(step('orchestrator')).toContainText(`Slurm reservation e2e-r${id}`);
  await expect(step('activate')).toHaveAttribute('data-status', 'done', { timeout: 60_000 });
  await expect(page.getByTestId('reservation-state')).toHaveText('active');
  const credentials = page.getByTestId('credentials');
  await expect(credentials).toContainText('Credentials (slurm)');
  await credentials.getByText('Show the secret').click();
  const submit = `sbatch -A e2e-r${id} --reservation=e2e-r${id}`;
  await expect(credentials.locator('pre')).toContainText(submit);
  await expect(credentials.locator('pre')).toContainText('login.example');

  // Ada (the lead's Unix user) submits with that command; the job may write only /tmp.
  const submitted = slurm('runuser', [
    '-u',
    'ada',
    '--',
    'sbatch',
    '--chdir=/tmp',
    '--output=/dev/null',
    '-A',
    `e2e-r${id}`,
    `--reservation=e2e-r${id}`,
    '--gres=gpu:1',
    '-n1',
    '-t3',
    '--wrap',
    'sleep 170',
  ]);
  const job = submitted.match(/Submitted batch job (\d+)/)?.[1];
  expect(job, submitted).toBeTruthy();
  try {
    // Slurm starts it inside the reservation (a failure here is Slurm's: its state and reason).
    const fields = 'StateCompact:|,Reason:|,Reservation:|,NodeList:|';
    const state = () => slurm('squeue', ['-h', '-j', job!, '-O', fields]);
    await expect
      .poll(state, { timeout: 60_000, intervals: [1_000] })
      .toMatch(new RegExp(`^R\\|.*\\|e2e-r${id}\\|`));
    // The sampler reads Slurm's running jobs every 5 seconds: the job's GPU is busy.
    await page.goto('/chargeback');
    await expect
      .poll(
        async () => {
          await page.reload();
          return utilization(page, id);
        },
        { timeout: 60_000, intervals: [2_000] },
      )
      .toBeGreaterThan(0);
  } finally {
    slurm('scancel', [job!]);
  }

  // Cancelling gives the GPU back: the release cancels the team's jobs and removes the Slurm
  // reservation, so the nodes are free for the next run.
  await page.goto(`/reservations/${id}`);
  await hydrated(page);
  await page.getByRole('button', { name: 'Cancel reservation…' }).click();
  await page.getByRole('button', { name: 'Confirm' }).click();
  await expect(page.getByTestId('reservation-state')).toHaveText(/cancelled|releasing/);
  await expect
    .poll(() => slurm('scontrol', ['-o', 'show', 'reservation']), { timeout: 30_000 })
    .not.toContain(`ReservationName=e2e-r${id} `);

  // Admins see the last sync on Admin → Fleet; the page stays live once hydrated.
  const admin = await (await page.context().browser()!.newContext({ baseURL: slurmURL })).newPage();
  const errors: Error[] = [];
  admin.on('pageerror', (e) => errors.push(e));
  await signIn(admin, 'admin@tenantry.example');
  await admin.goto('/admin/fleet');
  await hydrated(admin);
  await expect(admin.getByTestId('slurm-panel')).toContainText('Slurm');
  await expect(admin.getByTestId('slurm-sync-outcome')).toContainText(/Last sync at .*: ok/);
  expect(errors).toEqual([]);
});
