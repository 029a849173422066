/** Steps the Gearman dashboard specs share. */
import { expect, type Page } from '@playwright/test';
import { PACKET } from '../server/protocol/gearman/packets.js';
import type { GearmanTestClient } from '../test/support/gearman-client.js';

/**
 * `worker` (registered for the function) is handed `handle` and then nothing more, and the
 * function's Running tab shows the job.
 */
export async function expectOnlyJobLeft(page: Page, worker: GearmanTestClient, handle: string): Promise<void> {
  worker.request(PACKET.GRAB_JOB_UNIQ);
  const [type, handed] = await worker.args(4);
  expect([type, handed]).toEqual([PACKET.JOB_ASSIGN_UNIQ, handle]);
  worker.request(PACKET.GRAB_JOB);
  expect((await worker.packet()).type).toBe(PACKET.NO_JOB);
  await page.getByTestId('gearman-tab-running').click();
  await expect(page.getByTestId(`gearman-job-${handle}`)).toBeVisible();
}
