/**
 * The operator's story: a worker buries jobs it cannot handle; the operator watches the tube list
 * (live, no reload), opens the buried job, fixes its body and priority, saves and kicks it, and the
 * worker gets the fixed job on its next reserve.
 */
import { expect, expectLive, test } from './fixtures.js';

const TUBE = 'emails';

test('a buried job is seen live, fixed in the dashboard, kicked and reserved again by the worker', async ({ page, tcp }) => {
  const producer = await tcp();
  await producer.use(TUBE);
  const worker = await tcp();
  await worker.watchOnly(TUBE);

  const bad = ['{"to":"ops@example","subject":"broken"}', '{"to":"billing@example","subject":"also broken"}'];
  const ids = [await producer.put(bad[0]!, { priority: 100 }), await producer.put(bad[1]!, { priority: 100 })];

  await page.goto('/tubes');
  await expectLive(page);
  // A marker on window proves later that the page was never reloaded.
  await page.evaluate(() => {
    (window as unknown as Record<string, unknown>).__e2eNoReload = true;
  });
  const row = page.getByTestId(`tube-row-${TUBE}`);
  await expect(row.getByTestId('count-ready')).toHaveAttribute('data-value', '2');
  await expect(row.getByTestId('count-buried')).toHaveAttribute('data-value', '0');

  // The worker takes both jobs and buries them; the count rises live.
  for (let i = 0; i < 2; i++) {
    const job = await worker.reserve();
    expect(ids).toContain(job.id);
    await worker.bury(job.id, 100);
    await expect(row.getByTestId('count-buried')).toHaveAttribute('data-value', String(i + 1), { timeout: 5_000 });
  }
  await expect(row.getByTestId('count-buried')).toHaveText('2');
  await expect(row.getByTestId('count-ready')).toHaveAttribute('data-value', '0');
  expect(await page.evaluate(() => (window as unknown as Record<string, unknown>).__e2eNoReload)).toBe(true);

  // Open the tube, the buried tab, the first buried job.
  await row.getByRole('link', { name: TUBE }).click();
  await expect(page).toHaveURL(/\/tubes\/emails(\?|$)/);
  await expect(page.getByTestId('tube-name')).toHaveText(TUBE);
  await expect(page.getByTestId('count-buried')).toHaveAttribute('data-value', '2');
  await page.getByTestId('job-state-tab-buried').click();
  await expect(page).toHaveURL(/state=buried/);
  const id = ids[0]!;
  await expect(page.getByTestId(`job-row-${ids[1]!}`)).toBeVisible();
  await page.getByTestId(`job-row-${id}`).getByRole('link', { name: String(id) }).click();

  await expect(page).toHaveURL(new RegExp(`/jobs/${id}$`));
  await expect(page.getByTestId('job-field-id')).toHaveAttribute('data-value', String(id));
  await expect(page.getByTestId('job-field-state')).toHaveAttribute('data-value', 'buried');
  await expect(page.getByTestId('job-field-priority')).toHaveAttribute('data-value', '100');
  await expect(page.getByTestId('job-body')).toHaveAttribute('data-view', 'json');

  // Edit body and priority; save and kick.
  const fixed = '{"to":"ops@example.com","subject":"fixed ✓ — naïve café"}\nsecond line\ttab';
  await page.getByTestId('edit-job').click();
  await expect(page.getByTestId('edit-body')).toHaveAttribute('data-value', bad[0]!);
  await page.getByTestId('edit-body').locator('.cm-content').fill(fixed);
  await page.getByTestId('edit-priority').fill('7');
  await page.getByTestId('save-kick-job').click();

  await expect(page.getByTestId('edit-form')).toHaveCount(0);
  await expect(page.getByTestId('job-field-state')).toHaveAttribute('data-value', 'ready');
  await expect(page.getByTestId('job-field-priority')).toHaveAttribute('data-value', '7');
  await expect(page.getByTestId('job-field-bodyBytes')).toHaveAttribute('data-value', String(Buffer.byteLength(fixed)));
  // Exact text (toHaveText would normalise the whitespace).
  await expect(page.getByTestId('job-body').locator('pre')).toHaveJSProperty('textContent', fixed);

  // The worker gets exactly the edited bytes, under the same id, with the new priority.
  const job = await worker.reserve();
  expect(job.id).toBe(id);
  expect(job.body.equals(Buffer.from(fixed, 'utf8'))).toBe(true);
  const stats = await worker.statsJob(id);
  expect(stats.get('id')).toBe(String(id));
  expect(stats.get('pri')).toBe('7');
  expect(stats.get('state')).toBe('reserved');
  expect(stats.get('tube')).toBe(TUBE);
  expect(stats.get('kicks')).toBe('1');

  // The other job is still buried, untouched.
  const other = await worker.statsJob(ids[1]!);
  expect(other.get('state')).toBe('buried');
  expect(other.get('pri')).toBe('100');
  expect((await worker.peek(ids[1]!))?.body.toString('utf8')).toBe(bad[1]);
});

test('a job a worker holds cannot be edited; once released it can', async ({ page, tcp }) => {
  const producer = await tcp();
  await producer.use(TUBE);
  const id = await producer.put('original');
  const worker = await tcp();
  await worker.watchOnly(TUBE);
  expect((await worker.reserve()).id).toBe(id);

  await page.goto(`/jobs/${id}`);
  await expectLive(page);
  await expect(page.getByTestId('job-field-state')).toHaveAttribute('data-value', 'reserved');
  await page.getByTestId('edit-job').click();
  await expect(page.getByTestId('save-kick-job')).toHaveCount(0); // only buried or delayed jobs
  await page.getByTestId('edit-body').locator('.cm-content').fill('changed while reserved');
  await page.getByTestId('save-job').click();
  await expect(page.getByTestId('edit-error')).toContainText('Not saved');
  expect((await worker.peek(id))?.body.toString('utf8')).toBe('original');

  // The worker gives it back; the job page follows live and the same form now saves.
  await worker.release(id, 1024, 0);
  await expect(page.getByTestId('job-field-state')).toHaveAttribute('data-value', 'ready');
  await expect(page.getByTestId('edit-body')).toHaveAttribute('data-value', 'changed while reserved'); // not overwritten
  await page.getByTestId('save-job').click();
  await expect(page.getByTestId('edit-form')).toHaveCount(0);
  const job = await worker.reserve();
  expect(job.id).toBe(id);
  expect(job.body.toString('utf8')).toBe('changed while reserved');
});

test('delete a job in two steps', async ({ page, tcp }) => {
  const client = await tcp();
  await client.use(TUBE);
  const id = await client.put('delete me');

  await page.goto(`/jobs/${id}`);
  await expectLive(page);
  await page.getByTestId('delete-job').click();
  await page.getByTestId('cancel-delete-job').click();
  await expect(page.getByTestId('confirm-delete-job')).toHaveCount(0);
  expect(await client.peek(id)).not.toBeNull();

  await page.getByTestId('delete-job').click();
  await page.getByTestId('confirm-delete-job').click();
  await expect(page.getByTestId('job-deleted')).toBeVisible();
  expect(await client.peek(id)).toBeNull();
  await expect(page.getByTestId('edit-job')).toHaveCount(0);

  // A job deleted by a TCP client while its page is open is marked live.
  const other = await client.put('deleted elsewhere');
  await page.goto(`/jobs/${other}`);
  await expectLive(page);
  await expect(page.getByTestId('job-field-id')).toHaveAttribute('data-value', String(other));
  await client.delete(other);
  await expect(page.getByTestId('job-deleted')).toBeVisible();
});

test('a tube gets a dead-letter limit in the dashboard; the job it buries says why, and its history how', async ({ page, tcp }) => {
  const producer = await tcp();
  await producer.use('payments');
  const worker = await tcp();
  await worker.watchOnly('payments');
  const id = await producer.put('{"amount":"12,50"}');

  await page.goto('/tubes/payments');
  await expectLive(page);
  // Off by default, as in beanstalkd.
  await expect(page.getByTestId('dead-letter-current')).toHaveAttribute('data-value', '0');
  await page.getByTestId('dead-letter-limit').fill('2');
  await page.getByTestId('dead-letter-save').click();
  await expect(page.getByTestId('dead-letter-current')).toHaveAttribute('data-value', '2');
  await expect(page.getByTestId('dead-letter-current')).toContainText('this tube');

  // The worker fails the job twice: the second release answers BURIED.
  for (const want of ['RELEASED', 'BURIED']) {
    const job = await worker.reserve();
    expect(job.id).toBe(id);
    expect(await worker.command(`release ${id} 0 0`)).toBe(`${want}\r\n`);
  }
  await expect(page.getByTestId('count-buried')).toHaveAttribute('data-value', '1', { timeout: 5_000 });
  await page.goto(`/jobs/${id}`);
  await expect(page.getByTestId('bury-cause')).toHaveAttribute('data-value', 'dead-letter-release');
  await expect(page.getByTestId('bury-cause')).toContainText('2 releases and timeouts');
  // It leads with who made the rule fire: the release, its connection and address.
  await expect(page.getByTestId('bury-cause')).toContainText(/released by connection \d+ \(127\.0\.0\.1:\d+\)/);
  await expect(page.getByTestId('job-field-strikes')).toHaveAttribute('data-value', '2');
  // The history says how it got there, and who did it.
  const events = page.getByTestId('history-event');
  await expect(events).toHaveCount(6);
  expect(await events.evaluateAll((els) => els.map((e) => e.getAttribute('data-kind')))).toEqual([
    'put',
    'reserve',
    'release',
    'reserve',
    'release',
    'dead-letter',
  ]);
  await expect(events.nth(1)).toContainText('connection');
  // A kick from the dashboard says so in the history.
  await page.getByTestId('kick-job').click();
  await expect(events).toHaveCount(7);
  await expect(events.nth(6)).toHaveAttribute('data-kind', 'kick');
  await expect(events.nth(6).getByTestId('history-by')).toHaveText('in the dashboard');

  // Back to the server default (off): the setting goes, the button with it.
  await page.goto('/tubes/payments');
  await page.getByTestId('dead-letter-default').click();
  await expect(page.getByTestId('dead-letter-current')).toHaveAttribute('data-value', '0');
  await expect(page.getByTestId('dead-letter-default')).toHaveCount(0);
});

test('bodies are edited in a code editor that checks JSON; big JSON reads as a tree, finds text, downloads as .json', async ({ page, tcp }) => {
  const client = await tcp();
  await client.use('shop');
  const body = JSON.stringify({ order: { id: 7, lines: [{ sku: 'a-1', qty: 2 }, { sku: 'b-2', qty: 1 }] }, note: 'invalid currency' });
  const id = await client.put(body);

  await page.goto(`/jobs/${id}`);
  await expectLive(page);
  // Find in body, and the collapsible tree.
  await page.getByTestId('body-view-json').click();
  await page.getByTestId('find-in-body').fill('SKU');
  await expect(page.getByTestId('find-count')).toHaveAttribute('data-value', '2');
  await expect(page.getByTestId('job-body').locator('mark')).toHaveCount(2);
  await page.getByTestId('json-tree').check();
  await expect(page.getByTestId('json-tree-view')).toContainText('"invalid currency"');
  const download = page.waitForEvent('download');
  await page.getByTestId('download-body').click();
  expect((await download).suggestedFilename()).toBe(`job-${id}.json`);

  // Edit: the editor says when the JSON breaks, pretty-prints it when it parses.
  await page.getByTestId('edit-job').click();
  const editor = page.getByTestId('edit-body');
  await expect(editor).toHaveAttribute('data-value', body);
  await editor.locator('.cm-content').fill('{"order": {"id": 7,}');
  await expect(page.getByTestId('edit-body-json-error')).toBeVisible();
  await editor.locator('.cm-content').fill('{"order":{"id":7}}');
  await page.getByTestId('edit-body-pretty').click();
  await expect(editor).toHaveAttribute('data-value', '{\n  "order": {\n    "id": 7\n  }\n}');
  // A tube that does not exist yet is said before it is made.
  await page.getByTestId('edit-tube').fill('shop');
  await expect(page.getByTestId('edit-tube-new')).toHaveCount(0);
  await page.getByTestId('edit-tube').fill('shopp');
  await expect(page.getByTestId('edit-tube-new')).toContainText('No tube named shopp yet');
});
