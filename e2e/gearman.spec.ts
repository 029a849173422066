/**
 * The dashboard's Gearman section: functions, workers and queued jobs appear live as Gearman
 * clients and workers come and go on the server's Gearman port; a queued job's data is shown and
 * it can be cancelled (two clicks), after which it never reaches a worker.
 */
import { PACKET } from '../server/protocol/gearman/packets.js';
import { GearmanTestClient } from '../test/support/gearman-client.js';
import { gearmanPortFromLog } from '../test/support/gearman-server.js';
import { expect, expectLive, test } from './fixtures.js';
import { expectOnlyJobLeft } from './gearman-steps.js';

test.use({ serverArgs: ['--gearman-listen', '127.0.0.1', '--gearman-port', '0'] });


test('functions, workers and queued jobs show live; a queued job is cancelled and never runs', async ({ page, server }) => {
  const port = await gearmanPortFromLog(() => server.stderr());
  await page.goto('/gearman');
  await expectLive(page);

  const client = await GearmanTestClient.connect(port);
  const handles: string[] = [];
  for (const data of ['{"n":1}', '{"n":2}']) {
    client.request(PACKET.SUBMIT_JOB_BG, 'resize', `u-${data}`, data);
    const [, handle] = await client.args(1);
    handles.push(handle!);
  }
  const worker = await GearmanTestClient.connect(port);
  worker.request(PACKET.SET_CLIENT_ID, 'thumbnailer');
  worker.request(PACKET.CAN_DO, 'resize');
  worker.request(PACKET.ECHO_REQ, 'sync');
  await worker.packet();

  // The overview counts them too.
  await page.goto('/');
  await expect(page.getByTestId('gearman-queued-count')).toHaveText('2');
  await page.getByRole('link', { name: 'Gearman' }).first().click();
  const row = page.getByTestId('gearman-fn-resize');
  await expect(row).toContainText('2');
  await expect(page.getByTestId('gearman-workers')).toContainText('thumbnailer');

  await row.getByRole('link', { name: 'resize' }).click();
  const first = page.getByTestId(`gearman-job-${handles[0]}`);
  await expect(first).toContainText('u-{"n":1}');
  await first.getByRole('button', { name: /bytes|B$/ }).click();
  await expect(first.getByTestId('gearman-body')).toHaveText('{"n":1}');

  await first.getByTestId('gearman-cancel').click();
  await first.getByTestId('gearman-cancel-confirm').click();
  await expect(first).toHaveCount(0);

  // The worker gets the other job, and then nothing: the cancelled one is gone.
  await expectOnlyJobLeft(page, worker, handles[1]!);
  client.destroy();
  worker.destroy();
});

test('filter a function’s queued jobs by their data, cancel every match at once, then one picked by hand', async ({ page, server }) => {
  const port = await gearmanPortFromLog(() => server.stderr());
  const client = await GearmanTestClient.connect(port);
  const handles: string[] = [];
  for (let i = 0; i < 9; i++) {
    const data = `{"order":${i},"currency":"${i % 3 === 0 ? 'XYZ' : 'EUR'}"}`;
    client.request(PACKET.SUBMIT_JOB_BG, 'charge', '', data);
    const [, handle] = await client.args(1);
    handles.push(handle!);
  }
  const bad = handles.filter((_, i) => i % 3 === 0);

  await page.goto('/gearman/functions/charge');
  await expectLive(page);
  await expect(page.locator('[data-testid^="gearman-job-"]')).toHaveCount(9);
  await page.getByTestId('gearman-filter').fill('"currency":"xyz"');
  await page.getByTestId('gearman-filter-apply').click();
  await expect(page.getByTestId('gearman-search-status')).toHaveAttribute('data-matched', String(bad.length));
  await expect(page.locator('[data-testid^="gearman-job-"]')).toHaveCount(bad.length);

  await page.getByTestId('gearman-select-page').check();
  await page.getByTestId('gearman-bulk-cancel').click();
  await expect(page.getByTestId('gearman-bulk-confirm-text')).toContainText(`Cancel ${bad.length} jobs?`);
  await page.getByTestId('gearman-bulk-confirm').click();
  await expect(page.getByText(`Cancelled ${bad.length} jobs.`)).toBeVisible();
  await expect(page.getByTestId('gearman-empty')).toHaveText('No job matches.');

  // Back to the whole list: six left; cancel one by hand.
  await page.getByTestId('gearman-filter-clear').click();
  await expect(page.locator('[data-testid^="gearman-job-"]')).toHaveCount(6);
  await page.getByTestId(`gearman-select-${handles[1]}`).check();
  await page.getByTestId('gearman-bulk-cancel').click();
  await page.getByTestId('gearman-bulk-confirm').click();
  await expect(page.getByText('Cancelled 1 job.')).toBeVisible();
  await expect(page.locator('[data-testid^="gearman-job-"]')).toHaveCount(5);

  // A worker gets exactly the five left, in order.
  const worker = await GearmanTestClient.connect(port);
  worker.request(PACKET.CAN_DO, 'charge');
  const got: string[] = [];
  for (;;) {
    worker.request(PACKET.GRAB_JOB);
    const [type, handle] = await worker.args(3);
    if (type === PACKET.NO_JOB) break;
    got.push(handle!);
  }
  expect(got).toEqual(handles.filter((h, i) => i % 3 !== 0 && h !== handles[1]));
  client.destroy();
  worker.destroy();
});
