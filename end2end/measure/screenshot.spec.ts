import { expect, test } from '@playwright/test';

// The README's screenshot: the availability calendar of the demo world, signed in as a team
// lead, hydrated. Run by hand (scripts/screenshot.sh); writes docs/images/calendar.png.
test('the calendar, for the README', async ({ page }) => {
  await page.setViewportSize({ width: 1280, height: 860 });
  await page.goto('/sign-in');
  await page.getByRole('button', { name: 'Sign in as lead@acme.example' }).click();
  await expect(page.getByTestId('signed-in-as')).toHaveText('lead@acme.example');
  await page.goto('/availability');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByTestId('heatmap')).toBeVisible();
  await page.screenshot({ path: '../docs/images/calendar.png' });
});
