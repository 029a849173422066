/**
 * The dashboard's Gearman section: functions, workers and queued jobs appear live as Gearman
 * clients and workers come and go on the server's Gearman port; a queued job's data is shown and
 * it can be cancelled (two clicks), after which it never reaches a worker.
 */
import { PACKET } from '../server/protocol/gearman/packets.js';
import { GearmanTestClient } from '../test/support/gearman-client.js';
import { gearmanPortFromLog } from '../test/support/gearman-server.js';
import { expect, expectLive, test } from './fixtures.js';

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
  worker.request(PACKET.GRAB_JOB_UNIQ);
  const [type, handle] = await worker.args(4);
  expect([type, handle]).toEqual([PACKET.JOB_ASSIGN_UNIQ, handles[1]]);
  worker.request(PACKET.GRAB_JOB);
  expect((await worker.packet()).type).toBe(PACKET.NO_JOB);
  await page.getByTestId('gearman-tab-running').click();
  await expect(page.getByTestId(`gearman-job-${handles[1]}`)).toBeVisible();
  client.destroy();
  worker.destroy();
});
