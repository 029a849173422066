/**
 * The dashboard behind a reverse proxy (--admin-base-path): every link, API call and the live
 * socket.io link carry the prefix, deep links load under it, and a proxy that strips the prefix
 * works too (the server answers both).
 */
import { expect, expectLive, test } from './fixtures.js';

const BASE = '/ops/beanpole';

test.use({ serverArgs: ['--admin-base-path', `${BASE}/`] });

test('links, deep links, the API and live updates under the base path', async ({ page, server, tcp }) => {
  const origin = new URL(server.url).origin;
  expect(server.url).toBe(`${origin}${BASE}/`);
  const requests: string[] = [];
  page.on('request', (request) => requests.push(new URL(request.url()).pathname));
  const client = await tcp();
  await client.use('proxied');
  const id = await client.put('behind a proxy');

  await page.goto(server.url);
  await expectLive(page);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Tubes' }).click();
  await expect(page).toHaveURL(`${origin}${BASE}/tubes`);
  await page.getByRole('link', { name: 'proxied', exact: true }).click();
  await expect(page).toHaveURL(`${origin}${BASE}/tubes/proxied`);
  await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '1');

  // Pushed over socket.io, whose path is under the prefix too.
  await client.put('a second one');
  await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '2');

  await page.getByRole('link', { name: String(id), exact: true }).click();
  await expect(page).toHaveURL(`${origin}${BASE}/jobs/${id}`);
  await page.reload();
  await expectLive(page);
  await expect(page.getByText('behind a proxy')).toBeVisible();

  // Every request the page made went under the prefix: the proxy forwards nothing else.
  expect(requests.length).toBeGreaterThan(5);
  expect(requests.filter((p) => !p.startsWith(`${BASE}/`))).toEqual([]);
  // A proxy that strips the prefix sends the paths from the root.
  const stripped = await page.request.get(`${origin}/api/tubes/proxied`);
  expect(stripped.status()).toBe(200);
  const prefixed = await page.request.get(`${origin}${BASE}/api/tubes/proxied`);
  expect(((await prefixed.json()) as { ready: number }).ready).toBe(2);
});
