/**
 * Screenshots of the main pages for the README (docs/screenshots/*.png), light mode, 1280x800,
 * and two at a phone's 390x844.
 * Not part of the default run (playwright.config.ts ignores this file unless SCREENSHOTS=1):
 * `npm run screenshots` after `npm run build`.
 *
 * Everything shown is real: jobs are put, reserved, buried and deleted over the beanstalkd
 * protocol while the pages are open. The chart's time axis always spans 15 minutes, so the
 * traffic runs for SCREENSHOT_TRAFFIC_SECONDS (default 90) before the overview is taken.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from '@playwright/test';
import { expect, expectLive, test, tubePath, type Beanstalk } from './fixtures.js';

const OUT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'screenshots');
const TRAFFIC_SECONDS = Number(process.env.SCREENSHOT_TRAFFIC_SECONDS ?? '90');

test.use({ viewport: { width: 1280, height: 800 }, colorScheme: 'light', deviceScaleFactor: 1 });
test.setTimeout(TRAFFIC_SECONDS * 1000 + 90_000);

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function shot(page: Page, name: string): Promise<void> {
  // Let the live counters settle and the fonts load before the picture.
  await page.evaluate(() => document.fonts.ready.then(() => undefined));
  await page.screenshot({ path: path.join(OUT, `${name}.png`), animations: 'disabled', caret: 'hide' });
}

/**
 * Steady, varying traffic: a producer and a worker on `events` (puts swing between ~15 and ~75
 * per second, the worker keeps slightly behind), and a worker on `thumbnails` that lets jobs with a
 * 1 s TTR time out now and then.
 */
class Traffic {
  private running = true;
  private readonly done: Promise<void>;

  constructor(producer: Beanstalk, worker: Beanstalk, sleeper: Beanstalk) {
    this.done = this.loop(producer, worker, sleeper);
  }

  private async loop(producer: Beanstalk, worker: Beanstalk, sleeper: Beanstalk): Promise<void> {
    const start = Date.now();
    let carry = 0;
    let tick = 0;
    while (this.running) {
      const t = (Date.now() - start) / 1000;
      const rate = 45 + 25 * Math.sin(t / 9) + 8 * Math.sin(t / 2.3);
      carry += rate / 10;
      const puts = Math.floor(carry);
      carry -= puts;
      for (let i = 0; i < puts; i++) {
        await producer.put(JSON.stringify({ event: 'page_view', user: 1000 + ((tick * 7 + i) % 500), at: Date.now() }));
      }
      // The worker handles a bit less than what arrives when the rate peaks.
      const capacity = Math.round(55 / 10);
      for (let i = 0; i < capacity; i++) {
        const reply = await worker.command('reserve-with-timeout 0');
        const m = /^RESERVED (\d+) /.exec(reply);
        if (m === null) break;
        if ((tick + i) % 17 === 0) await worker.release(Number(m[1]), 1024, 0);
        else await worker.delete(Number(m[1]));
      }
      if (tick % 10 === 0) {
        // Holds a thumbnails job past its 1 s TTR: a timeout.
        await sleeper.command('reserve-with-timeout 0');
      }
      tick++;
      await delay(100);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }
}

const EMAIL_JOBS = [
  { template: 'password-reset', to: 'ada@example.com', locale: 'en-GB', attempt: 3, vars: { name: 'Ada', link: 'https://example.com/reset/8f2c91' }, error: 'SMTP 451 4.7.1 greylisted, try again later' },
  { template: 'welcome', to: 'grace@example.com', locale: 'en-US', attempt: 5, vars: { name: 'Grace', plan: 'team' }, error: 'SMTP 550 5.1.1 mailbox unavailable' },
  { template: 'invoice', to: 'alan@example.org', locale: 'en-GB', attempt: 2, vars: { invoice: 'INV-2024-0117', total: '€1,240.00' }, error: 'template variable "due" is missing' },
  { template: 'digest', to: 'edsger@example.nl', locale: 'nl-NL', attempt: 4, vars: { items: 12 }, error: 'rate limited by provider (429)' },
  { template: 'password-reset', to: 'barbara@example.com', locale: 'en-US', attempt: 3, vars: { name: 'Barbara', link: 'https://example.com/reset/77ab03' }, error: 'connection reset by peer' },
];

test('screenshots of the main pages', async ({ page, tcp }) => {
  mkdirSync(OUT, { recursive: true });

  // Tubes with a bit of everything.
  const setup = await tcp();
  const emailIds: number[] = [];
  await setup.use('emails');
  await setup.watchOnly('emails');
  for (const job of EMAIL_JOBS) emailIds.push(await setup.put(JSON.stringify(job), { priority: 100 }));
  for (let i = 0; i < EMAIL_JOBS.length; i++) await setup.bury((await setup.reserve()).id, 100);
  for (let i = 0; i < 14; i++) await setup.put(JSON.stringify({ template: 'receipt', to: `customer${i}@example.com`, order: 48210 + i }));
  const holder = await tcp();
  await holder.watchOnly('emails');
  await holder.reserve();
  await holder.reserve();

  await setup.use('image-resize');
  for (let i = 0; i < 40; i++) await setup.put(`s3://uploads/2024/06/IMG_${4100 + i}.jpg 1600x1200`, { priority: i < 6 ? 10 : 2048 });
  for (let i = 0; i < 6; i++) await setup.put(`s3://uploads/2024/06/IMG_${4200 + i}.jpg 800x600`, { delay: 3600 });

  await setup.use('reports/daily');
  for (let i = 0; i < 3; i++) await setup.put(`{"report":"sales","day":"2024-06-${10 + i}"}`, { delay: 600 + i * 3600 });
  expect(await setup.command('pause-tube reports/daily 900')).toBe('PAUSED\r\n');

  await setup.use('webhooks');
  await setup.watchOnly('webhooks');
  for (let i = 0; i < 7; i++) await setup.put(`POST https://hooks.example.net/h/${i} {"event":"order.paid"}`);
  for (let i = 0; i < 7; i++) await setup.bury((await setup.reserve()).id);
  for (let i = 0; i < 2; i++) await setup.put(`POST https://hooks.example.net/h/${10 + i} {"event":"order.shipped"}`);

  await setup.use('billing.invoices');
  for (let i = 0; i < 5; i++) await setup.put(`{"invoice":"INV-${2300 + i}"}`, { priority: 0 });

  await setup.use('thumbnails');
  for (let i = 0; i < 4; i++) await setup.put(`thumb ${i}`, { ttr: 1 });
  const sleeper = await tcp();
  await sleeper.watchOnly('thumbnails');

  const producer = await tcp();
  await producer.use('events');
  const worker = await tcp();
  await worker.watchOnly('events');
  const started = Date.now();
  const traffic = new Traffic(producer, worker, sleeper);

  try {
    // The tube list.
    await page.goto('/tubes');
    await expectLive(page);
    await expect(page.getByTestId('tube-row-webhooks').getByTestId('count-buried')).toHaveAttribute('data-value', '7');
    await expect(page.getByTestId('tube-row-events')).toBeVisible();
    await delay(1500);
    await shot(page, 'tubes');

    // A tube with buried jobs.
    await page.goto(tubePath('emails', 'buried'));
    await expectLive(page);
    await expect(page.getByTestId(`job-row-${emailIds[4]!}`)).toBeVisible();
    await expect(page.getByTestId('count-reserved')).toHaveAttribute('data-value', '2');
    await shot(page, 'tube-buried');

    // A job with a JSON body.
    await page.goto(`/jobs/${emailIds[0]!}`);
    await expectLive(page);
    await expect(page.getByTestId('job-body')).toHaveAttribute('data-view', 'json');
    await shot(page, 'job-json');

    // The edit form.
    await page.getByTestId('edit-job').click();
    await page.getByTestId('edit-priority').fill('10');
    const fixedBody = JSON.stringify({ ...EMAIL_JOBS[0], attempt: 0, error: undefined }, null, 2);
    await page.getByTestId('edit-body').locator('.cm-content').fill(fixedBody);
    // Show the actions card, the form and the top of the body; no focus ring.
    await page.getByTestId('edit-job').evaluate((button) => {
      (document.activeElement as HTMLElement | null)?.blur();
      const card = button.closest('.card') ?? button;
      window.scrollTo(0, card.getBoundingClientRect().top + window.scrollY - 16);
    });
    await shot(page, 'job-edit');

    // The overview, once the chart has a stretch of traffic.
    const left = TRAFFIC_SECONDS * 1000 - (Date.now() - started);
    if (left > 0) await delay(left);
    await page.goto('/');
    await expectLive(page);
    await expect(page.getByTestId('throughput-chart').locator('canvas')).toBeVisible();
    await expect.poll(async () => Number(await page.getByTestId('stat-total-jobs').textContent().then((t) => (t ?? '').replace(/\D/g, '')))).toBeGreaterThan(100);
    await delay(2500); // a few live ticks after the snapshot
    await shot(page, 'overview');

    // A search across tubes, with matches ticked for a bulk action.
    await page.goto('/search?q=smtp');
    await expectLive(page);
    await expect(page.getByTestId('search-status')).toHaveAttribute('data-done', 'true');
    await page.getByTestId('select-page').check();
    await shot(page, 'search');

    // A phone: a tube's buried jobs, and a job with its actions first.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(tubePath('emails', 'buried'));
    await expectLive(page);
    await expect(page.getByTestId(`job-row-${emailIds[4]!}`)).toBeVisible();
    await shot(page, 'phone-tube-buried');
    await page.goto(`/jobs/${emailIds[1]!}`);
    await expectLive(page);
    await expect(page.getByTestId('job-body')).toHaveAttribute('data-view', 'json');
    await shot(page, 'phone-job');
  } finally {
    await traffic.stop();
  }
});
