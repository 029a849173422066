/**
 * An operator attaches Debian's stock beanstalkd from the dashboard and works on it through the
 * beanstalkd protocol: sees its tubes, peeks a buried job, kicks it, puts one, deletes one.
 */
import { RawClient } from '../test/support/raw-client.js';
import { hasBeanstalkd, startProcessServer, type ServerProcess } from '../test/support/servers.js';
import { expect, expectLive, test } from './fixtures.js';

let beanstalkd: ServerProcess | undefined;

test.beforeAll(async () => {
  if (hasBeanstalkd()) beanstalkd = await startProcessServer('beanstalkd', { tcp: true }, []);
});

test.afterAll(async () => {
  await beanstalkd?.stop();
});

test('attach a stock beanstalkd, peek its buried job, kick it, put and delete', async ({ page }) => {
  test.skip(beanstalkd === undefined, 'beanstalkd is not installed');
  const port = (beanstalkd!.address as { port: number }).port;
  const c = await RawClient.connect(port);
  try {
    await c.call('use legacy\r\n');
    await c.call('watch legacy\r\n');
    await c.call('put 0 0 60 9\r\nold-stuck\r\n');
    const reserved = await c.call('reserve-with-timeout 0\r\n');
    const id = Number(/^RESERVED (\d+)/.exec(reserved)![1]);
    expect(await c.call(`bury ${id} 0\r\n`)).toBe('BURIED\r\n');

    await page.goto('/servers');
    await expectLive(page);
    await page.getByTestId('server-address').fill(`127.0.0.1:${port}`);
    await page.getByTestId('server-add').click();
    await expect(page.getByTestId('server-status-1')).toHaveAttribute('data-value', 'up');
    await page.getByRole('link', { name: `127.0.0.1:${port}` }).click();
    await expect(page.getByTestId('external-badge')).toBeVisible();
    await expect(page.getByRole('heading', { level: 1 })).toContainText(`127.0.0.1:${port}`);
    await expect(page.getByTestId('external-stat-version')).toContainText('1.');
    const row = page.getByTestId('external-tube-legacy');
    await expect(row).toBeVisible();
    await row.getByRole('link', { name: 'legacy' }).click();
    await expect(page).toHaveURL(/\/servers\/1\?tube=legacy$/);
    // A deep link opens the same tube; every input is named by a visible label.
    await page.reload();
    await expect(page.getByTestId('external-selected')).toHaveText('legacy');
    await expect(page.getByLabel('Kick up to')).toBeVisible();
    await expect(page.getByLabel('Pause for')).toBeVisible();
    await expect(page.getByLabel('Job body')).toBeVisible();
    await page.getByTestId('external-peek-buried').click();
    await expect(page.getByTestId('external-job-id')).toHaveText(String(id));
    await expect(page.getByTestId('external-job-body')).toHaveText('old-stuck');
    await page.getByTestId('external-job-kick').click();
    await expect.poll(async () => c.call(`stats-job ${id}\r\n`)).toContain('state: ready');

    await page.getByTestId('external-put-body').fill('from the dashboard');
    await page.getByTestId('external-put').click();
    await expect(page.getByText(/^Put job \d+\.$/)).toBeVisible();
    await page.getByTestId('external-peek-ready').click();
    await expect(page.getByTestId('external-job-id')).toHaveText(String(id));
    await page.getByTestId('external-job-delete').click();
    await expect.poll(async () => c.call(`peek ${id}\r\n`)).toBe('NOT_FOUND\r\n');
    await page.getByTestId('external-peek-ready').click();
    await expect(page.getByTestId('external-job-body')).toHaveText('from the dashboard');
  } finally {
    c.destroy();
  }
});
