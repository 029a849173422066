/**
 * Schedules and alerts in the dashboard, seen acting on a real worker: the operator creates a
 * schedule (its next runs previewed as the expression is typed), a worker reserves the job its
 * slot puts, the run shows its job; "Run now" puts another; pausing stops it. Then an alert rule
 * on buried jobs posts to a webhook receiver on 127.0.0.1 when the worker buries a job, the page
 * shows the tube firing and the history, and the clear once the job is kicked.
 */
import { expect, test } from './fixtures.js';
import { startWebhookReceiver } from '../test/support/webhook-receiver.js';

test.use({ serverArgs: ['--automation-tick', '100', '--no-gearman'] });

test('a schedule made in the dashboard puts jobs a worker reserves; run now and pause act', async ({ page, tcp }) => {
  const worker = await tcp();
  await worker.watchOnly('reports');

  await page.goto('/schedules');
  await expect(page.getByTestId('schedules-empty')).toBeVisible();
  await page.getByTestId('schedule-new').click();
  await page.getByTestId('schedule-new-name').fill('every few seconds');
  await page.getByTestId('schedule-new-cron').fill('61 * * * *');
  await expect(page.getByTestId('schedule-new-preview')).toContainText('minute');
  await expect(page.getByTestId('schedule-new-save')).toBeDisabled();
  // Every third second: a slot comes soon, and not before the form is saved.
  await page.getByTestId('schedule-new-cron').fill('*/3 * * * * *');
  await page.getByTestId('schedule-new-zone').fill('Europe/Berlin');
  await expect(page.getByTestId('schedule-new-preview')).toContainText('Next:');
  await page.getByTestId('schedule-new-tube').fill('reports');
  await page.getByTestId('schedule-new-priority').fill('7');
  await page.getByTestId('schedule-new-body').locator('.cm-content').fill('{"report":"sales"}');
  await page.getByTestId('schedule-new-save').click();

  const card = page.getByTestId('schedule-1');
  await expect(card).toBeVisible();
  await expect(card.getByTestId('schedule-1-next').locator('li')).toHaveCount(5);
  const job = await worker.reserve(10);
  expect(job.body.toString()).toBe('{"report":"sales"}');
  await expect(card.getByTestId('schedule-run-job').first()).toHaveText(String(job.id), { timeout: 5000 });
  await expect(card.getByTestId('schedule-run').first()).toContainText('reserved');

  // Pause: no more slots; "Run now" still puts one.
  await card.getByTestId('schedule-1-pause').click();
  await expect(card.getByTestId('schedule-1-paused')).toBeVisible();
  await expect(card.getByTestId('schedule-1-next-none')).toBeVisible();
  await worker.delete(job.id);
  // Drain a job a slot may have put between the reserve and the pause.
  for (let i = 0; i < 10; i++) {
    const reply = await worker.command('reserve-with-timeout 0');
    if (!reply.startsWith('RESERVED')) break;
    await worker.delete(Number(reply.split(' ')[1]));
  }
  await card.getByTestId('schedule-1-run').click();
  const manual = await worker.reserve(5);
  expect(manual.body.toString()).toBe('{"report":"sales"}');
  await expect(card.locator('[data-testid="schedule-run"][data-kind="run-now"]')).toHaveCount(1);
  // Paused for more than a slot: nothing else arrives.
  expect(await worker.command('reserve-with-timeout 4', 6000)).toBe('TIMED_OUT\r\n');
});

test('an alert rule made in the dashboard posts when a worker buries a job, and when it is kicked', async ({ page, tcp }) => {
  const hook = await startWebhookReceiver();
  try {
    const producer = await tcp();
    await producer.use('emails');
    const id = await producer.put('{"to":"ops@example"}');
    const worker = await tcp();
    await worker.watchOnly('emails');

    await page.goto('/alerts');
    await expect(page.getByTestId('alerts-empty')).toBeVisible();
    await page.getByTestId('alert-new').click();
    await page.getByTestId('alert-new-name').fill('mail failing');
    await page.getByTestId('alert-new-condition').selectOption('buried');
    await page.getByTestId('alert-new-threshold').fill('0');
    await page.getByTestId('alert-new-for').fill('0');
    await page.getByTestId('alert-new-tubes').fill('email*');
    await page.getByTestId('alert-new-url').fill(hook.url);
    await page.getByTestId('alert-new-format').selectOption('slack');
    await page.getByTestId('alert-new-interval').fill('0');
    await page.getByTestId('alert-new-save').click();
    const rule = page.getByTestId('alert-1');
    await expect(rule).toBeVisible();
    await expect(rule.getByTestId('alert-1-firing')).toHaveText('nothing');

    const job = await worker.reserve();
    expect(job.id).toBe(id);
    await worker.bury(id, 0);
    const [fired] = await hook.waitFor(1);
    expect(fired).toEqual({ text: expect.stringContaining('mail failing: tube emails: 1 buried') });
    await expect(rule.getByTestId('alert-1-firing')).toHaveText('emails', { timeout: 5000 });
    await expect(page.locator('[data-testid="alert-event"][data-kind="fired"][data-delivery="delivered"]')).toHaveCount(1);

    await worker.command(`kick-job ${id}`);
    await hook.waitFor(2);
    await expect(rule.getByTestId('alert-1-firing')).toHaveText('nothing', { timeout: 5000 });
    await expect(page.locator('[data-testid="alert-event"][data-kind="cleared"][data-delivery="delivered"]')).toHaveCount(1);
  } finally {
    await hook.close();
  }
});
