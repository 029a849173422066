/**
 * After a restart with a binlog: jobs come back, counters start again from zero, and the
 * dashboard says which counts are "since start" so a full tube does not read as empty.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startAdminServer } from '../test/support/admin-server.js';
import { RawClient } from '../test/support/raw-client.js';
import { Beanstalk, expect, expectLive, test } from './fixtures.js';

test('a tube whose jobs came back from the binlog shows them, and its restarted counters say “since start”', async ({ page }) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'beanpole-restart-'));
  try {
    const first = await startAdminServer(['-b', dir]);
    const producer = new Beanstalk(await RawClient.connect(first.port));
    await producer.use('restored');
    for (let i = 0; i < 12; i++) await producer.put(`{"n":${i}}`);
    producer.close();
    await first.stop();

    const second = await startAdminServer(['-b', dir]);
    try {
      await page.goto(new URL('tubes/restored', second.url).href);
      await expectLive(page);
      await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '12');
      const total = page.getByTestId('count-total');
      await expect(total).toHaveAttribute('data-value', '0');
      await expect(total.locator('xpath=..').getByTestId('since-start')).toHaveText('since start');

      await page.goto(second.url);
      await expectLive(page);
      await expect(page.getByTestId('stat-total-jobs').locator('xpath=..').getByTestId('since-start')).toBeVisible();
      await page.goto(new URL('tubes', second.url).href);
      await expect(page.getByTestId('sort-total')).toContainText('since start');
    } finally {
      await second.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
