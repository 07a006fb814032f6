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

/** Where the test identity provider (oidc/provider.mjs) runs; playwright.config.ts starts it. */
export const oidcIssuer = 'http://127.0.0.1:3300';

/**
 * Signs in through the company identity provider: the portal's single sign-on link, then the
 * provider's development login and consent pages (any non-empty password is accepted). Ends
 * where the portal's callback leaves the browser; the caller checks what it shows. Needs a
 * fresh browser context, since a remembered consent skips the consent page.
 */
export async function signInWithSso(page: Page, login: string) {
  // The provider's pages import a web font; there is no network to fetch it from.
  await page.route(/^https:\/\/fonts\.(googleapis|gstatic)\.com\//, (route) => route.abort());
  await page.goto('/sign-in');
  await page.getByRole('link', { name: 'Sign in with your company account' }).click();

  await expect(page).toHaveURL(new RegExp(`^${oidcIssuer}/interaction/`));
  await expect(page.getByRole('heading', { name: 'Sign-in', level: 1 })).toBeVisible();
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill('any password will do');
  await page.getByRole('button', { name: 'Sign-in', exact: true }).click();

  await expect(page.getByRole('heading', { name: 'Authorize', level: 1 })).toBeVisible();
  await page.getByRole('button', { name: 'Continue', exact: true }).click();
}
