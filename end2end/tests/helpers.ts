import { expect, type Page } from '@playwright/test';

/** Signs in through the demo page as a seeded user. */
export async function signIn(page: Page, email: string) {
  await page.goto('/sign-in');
  await expect(page.getByTestId('demo-banner')).toBeVisible();
  await page.getByRole('button', { name: `Sign in as ${email}` }).click();
  await expect(page.getByTestId('signed-in-as')).toHaveText(email);
}

/** Waits until the wasm has hydrated the page, so client-side behaviour is live. */
export async function hydrated(page: Page) {
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
}
