/**
 * Dashboard features against a real server, each checked from the other side too (over the
 * beanstalkd protocol): pause, kick, clear, put, find, deep links, safe rendering of bodies,
 * read-only mode, the admin token and the link indicator.
 */
import type { Request } from '@playwright/test';
import { PipelineClient } from '../test/support/pipeline-client.js';
import { expect, expectLive, test, tubePath, type Beanstalk } from './fixtures.js';

/** Puts `n` jobs into `tube`, reserves and buries them all; returns their ids. */
async function buryJobs(client: Beanstalk, tube: string, n: number): Promise<number[]> {
  await client.use(tube);
  await client.watchOnly(tube);
  const ids: number[] = [];
  for (let i = 0; i < n; i++) ids.push(await client.put(`job ${i} of ${tube}`));
  for (let i = 0; i < n; i++) {
    const job = await client.reserve();
    await client.bury(job.id);
  }
  return ids;
}

test('pause and unpause a tube; stats-tube over TCP agrees', async ({ page, tcp }) => {
  const client = await tcp();
  await client.use('pausable');
  await client.put('x');

  await page.goto(tubePath('pausable'));
  await expectLive(page);
  await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '1');
  await expect(page.getByTestId('unpause-tube')).toHaveCount(0);

  await page.getByTestId('pause-seconds').fill('120');
  await page.getByTestId('pause-tube').click();
  await expect.poll(() => client.tubeNumber('pausable', 'pause')).toBe(120);
  const left = await client.tubeNumber('pausable', 'pause-time-left');
  expect(left).toBeGreaterThan(100);
  expect(left).toBeLessThanOrEqual(120);
  await expect(page.getByTestId('count-pause')).not.toHaveAttribute('data-value', '0');
  await expect(page.getByTestId('count-pause')).toContainText('of 2m');

  await page.getByTestId('unpause-tube').click();
  await expect.poll(() => client.tubeNumber('pausable', 'pause')).toBe(0);
  expect(await client.tubeNumber('pausable', 'pause-time-left')).toBe(0);
  await expect(page.getByTestId('count-pause')).toHaveText('not paused');
  await expect(page.getByTestId('unpause-tube')).toHaveCount(0);
});

test('kick N of M buried jobs', async ({ page, tcp }) => {
  const client = await tcp();
  await buryJobs(client, 'kickme', 5);

  await page.goto(tubePath('kickme', 'buried'));
  await expectLive(page);
  await expect(page.getByTestId('count-buried')).toHaveAttribute('data-value', '5');
  await expect(page.getByTestId('job-table').locator('tbody tr[data-testid^="job-row-"]')).toHaveCount(5);

  await page.getByTestId('kick-bound').fill('3');
  await page.getByTestId('kick-tube').click();
  await expect(page.getByTestId('notice').last()).toContainText('Kicked 3 jobs');
  await expect(page.getByTestId('count-buried')).toHaveAttribute('data-value', '2');
  await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '3');
  await expect(page.getByTestId('job-table').locator('tbody tr[data-testid^="job-row-"]')).toHaveCount(2);

  expect(await client.tubeNumber('kickme', 'current-jobs-buried')).toBe(2);
  expect(await client.tubeNumber('kickme', 'current-jobs-ready')).toBe(3);
  expect(await client.tubeNumber('kickme', 'cmd-delete')).toBe(0);
});

test('clearing a state needs the tube name typed exactly', async ({ page, tcp }) => {
  const client = await tcp();
  await client.use('clearme');
  for (let i = 0; i < 3; i++) await client.put(`ready ${i}`);

  const deletes: Request[] = [];
  page.on('request', (request) => {
    if (request.method() === 'DELETE') deletes.push(request);
  });

  await page.goto(tubePath('clearme', 'ready'));
  await expectLive(page);
  await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '3');
  const confirm = page.getByTestId('clear-confirm');
  const clear = page.getByTestId('clear-state');
  await expect(clear).toBeDisabled();

  for (const wrong of ['clear', 'clearm', 'Clearme', 'clearme ', 'clearmee']) {
    await confirm.fill(wrong);
    await expect(clear).toBeDisabled();
    await confirm.press('Enter'); // implicit submission must not clear either
  }
  await confirm.fill('clearme');
  await expect(clear).toBeEnabled();
  await clear.click();

  await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '0');
  await expect(page.getByTestId('jobs-empty')).toBeVisible();
  expect(await client.tubeNumber('clearme', 'current-jobs-ready')).toBe(0);
  // Exactly one DELETE went out: the wrong confirmations sent nothing.
  expect(deletes.map((r) => r.url())).toEqual([expect.stringMatching(/\/api\/tubes\/clearme\/jobs\?state=ready$/)]);
});

test('put a job with the form; a TCP client peeks it', async ({ page, tcp }) => {
  const client = await tcp();
  await page.goto('/put?tube=formtube');
  await expectLive(page);
  await expect(page.getByTestId('put-tube')).toHaveValue('formtube');
  const body = 'hello from the form — ✓\nline two';
  await page.getByTestId('put-body').locator('.cm-content').fill(body);
  await page.getByTestId('put-priority').fill('7');
  await page.getByTestId('put-ttr').fill('30');
  await page.getByTestId('put-job-submit').click();

  const link = page.getByTestId('put-result-link');
  await expect(link).toBeVisible();
  const id = Number(await link.textContent());
  expect(Number.isInteger(id) && id > 0).toBe(true);

  const peeked = await client.peek(id);
  expect(peeked?.body.equals(Buffer.from(body, 'utf8'))).toBe(true);
  const stats = await client.statsJob(id);
  expect(stats.get('tube')).toBe('formtube');
  expect(stats.get('pri')).toBe('7');
  expect(stats.get('ttr')).toBe('30');
  expect(stats.get('state')).toBe('ready');
  await client.use('formtube');
  const ready = await client.command('peek-ready');
  expect(ready.startsWith(`FOUND ${id} `)).toBe(true);

  await link.click();
  await expect(page).toHaveURL(new RegExp(`/jobs/${id}$`));
  await expect(page.getByTestId('job-field-priority')).toHaveAttribute('data-value', '7');
});

test('find a job by id from the header', async ({ page, tcp }) => {
  const client = await tcp();
  await client.use('findme');
  await client.put('first');
  const id = await client.put('the one to find');

  await page.goto('/');
  await expectLive(page);
  await page.locator('body').press('/');
  await expect(page.getByTestId('find-job-input')).toBeFocused();
  await page.keyboard.type(String(id));
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(new RegExp(`/jobs/${id}$`));
  await expect(page.getByTestId('job-field-id')).toHaveAttribute('data-value', String(id));
  await expect(page.getByTestId('job-field-tube')).toHaveAttribute('data-value', 'findme');
  await expect(page.getByTestId('job-body')).toHaveText('the one to find');

  // With the button, and an id that does not exist.
  await page.getByTestId('find-job-input').fill('999999');
  await page.getByTestId('find-job-submit').click();
  await expect(page).toHaveURL(/\/jobs\/999999$/);
  await expect(page.getByTestId('job-not-found')).toBeVisible();
});

test('deep link to a tube whose name contains "/" survives a reload', async ({ page, tcp }) => {
  const name = 'team/a+b(c);d$e.f_g';
  const client = await tcp();
  await client.use(name);
  await client.put('deep');
  await client.put('link');

  await page.goto(tubePath(name));
  await expect(page.getByTestId('tube-name')).toHaveText(name);
  await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '2');
  await page.reload();
  await expectLive(page);
  await expect(page.getByTestId('tube-name')).toHaveText(name);
  await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '2');
  await expect(page.getByTestId('tube-missing')).toHaveCount(0);
  await expect(page.getByTestId('job-table').locator('tbody tr[data-testid^="job-row-"]')).toHaveCount(2);

  // Raw slashes in the path open the same tube (everything after /tubes/ is the name).
  await page.goto(`/tubes/team/a+b(c);d$e.f_g?state=ready`);
  await expect(page.getByTestId('tube-name')).toHaveText(name);
  await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '2');

  // From the tube list, the row link leads to the same page.
  await page.goto('/tubes');
  await page.getByTestId(`tube-row-${name}`).getByRole('link').click();
  await expect(page.getByTestId('tube-name')).toHaveText(name);
  expect(decodeURIComponent(new URL(page.url()).pathname)).toBe(`/tubes/${name}`);
});

test('an HTML body is shown as text and never runs', async ({ page, tcp }) => {
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => dialogs.push(dialog.message()));
  const xss = '<img src=x onerror=alert(1)>';
  const client = await tcp();
  await client.use('xss');
  const id = await client.put(xss);
  await client.put(`<script>alert(2)</script>`);

  await page.goto(`/jobs/${id}`);
  await expectLive(page);
  const body = page.getByTestId('job-body');
  await expect(body).toHaveAttribute('data-view', 'text');
  await expect(body.locator('pre')).toHaveJSProperty('textContent', xss);
  await expect(body).toHaveText(xss);
  await expect(body.locator('img')).toHaveCount(0);
  await expect(page.locator('img[src="x"]')).toHaveCount(0);

  // The hex view and the job list preview are text too.
  await page.getByTestId('body-view-hex').click();
  await expect(body).toHaveAttribute('data-view', 'hex');
  await expect(body.locator('img')).toHaveCount(0);
  await page.goto(tubePath('xss'));
  await expect(page.getByTestId(`job-row-${id}`)).toContainText(xss);
  await expect(page.locator('img, script:not([src])')).toHaveCount(0);
  expect(dialogs).toEqual([]);
});

test.describe('read-only dashboard', () => {
  test.use({ serverArgs: ['--admin-read-only'] });

  test('hides every mutating control and the API refuses changes', async ({ page, tcp }) => {
    const client = await tcp();
    const [id] = await buryJobs(client, 'ro', 1);
    expect(id).toBeDefined();

    await page.goto(tubePath('ro', 'buried'));
    await expectLive(page);
    await expect(page.getByTestId('read-only')).toBeVisible();
    await expect(page.getByTestId(`job-row-${id!}`)).toBeVisible();
    await expect(page.getByTestId('count-buried')).toHaveAttribute('data-value', '1');
    for (const testid of ['pause-tube', 'pause-seconds', 'kick-tube', 'kick-bound', 'clear-confirm', 'clear-state', 'move-jobs', 'put-into-tube', `kick-job-${id!}`]) {
      await expect(page.getByTestId(testid), testid).toHaveCount(0);
    }

    await page.goto(`/jobs/${id!}`);
    await expect(page.getByTestId('job-field-state')).toHaveAttribute('data-value', 'buried');
    await expect(page.getByTestId('read-only')).toBeVisible();
    for (const testid of ['kick-job', 'edit-job', 'delete-job', 'move-job', 'move-job-tube', 'save-job']) {
      await expect(page.getByTestId(testid), testid).toHaveCount(0);
    }
    await expect(page.getByRole('link', { name: /put a job/i })).toHaveCount(0);

    await page.goto('/put');
    await expect(page.getByTestId('read-only')).toBeVisible();
    await expect(page.getByTestId('put-form')).toHaveCount(0);

    // The server refuses, even when the page asks directly.
    const status = await page.evaluate(async (jobId) => {
      const res = await fetch(`/api/jobs/${jobId}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ priority: 1, kick: true }),
      });
      return res.status;
    }, id!);
    expect(status).toBe(403);
    const stats = await client.statsJob(id!);
    expect(stats.get('pri')).toBe('1024');
    expect(stats.get('state')).toBe('buried');
  });
});

test.describe('admin token', () => {
  const TOKEN = 'e2e-token-3f9c';
  test.use({ serverArgs: ['--admin-token', TOKEN] });

  test('the sign-in form refuses a wrong token and accepts the right one', async ({ page, tcp }) => {
    const client = await tcp();
    await client.use('secret');
    await client.put('one');

    await page.goto('/');
    await expect(page.getByTestId('sign-in-form')).toBeVisible();
    await expect(page.getByTestId('conn-status')).toHaveAttribute('data-state', 'unauthorized');
    await expect(page.getByTestId('stat-version')).toHaveCount(0);

    await page.getByTestId('token-input').fill('not-the-token');
    await page.getByTestId('token-submit').click();
    await expect(page.getByTestId('token-error')).toContainText(/refused/i);
    await expect(page.getByTestId('sign-in-form')).toBeVisible();
    await expect(page.getByTestId('conn-status')).not.toHaveAttribute('data-state', 'connected');

    await page.getByTestId('token-input').fill(TOKEN);
    await page.getByTestId('token-submit').click();
    await expect(page.getByTestId('sign-in-form')).toHaveCount(0);
    await expectLive(page);
    await expect(page.getByTestId('sign-out')).toBeVisible();
    await expect(page.getByTestId('stat-total-jobs')).toHaveText('1');

    // Live: a put over TCP shows up without a reload.
    await client.put('two');
    await expect(page.getByTestId('stat-total-jobs')).toHaveText('2', { timeout: 5_000 });

    // The token is kept for the tab: a reload stays signed in.
    await page.reload();
    await expectLive(page);
    await expect(page.getByTestId('sign-in-form')).toHaveCount(0);
    await page.goto('/tubes');
    await expect(page.getByTestId('tube-row-secret').getByTestId('count-ready')).toHaveAttribute('data-value', '2');
  });
});

test('the link indicator shows when the server goes away', async ({ page, server }) => {
  await page.goto('/');
  await expectLive(page);
  await expect(page.getByTestId('conn-status')).toHaveText('Live');
  await server.stop();
  await expect(page.getByTestId('conn-status')).toHaveAttribute('data-state', 'disconnected', { timeout: 15_000 });
  await expect(page.getByTestId('conn-status')).not.toHaveText('Live');
});

test('10,000 tubes: the table draws only what is visible, and filtering finds one at once', async ({ page, server }) => {
  // One job in each of 10,000 tubes, pipelined over one connection.
  const producer = await PipelineClient.connect(server.port);
  let commands = '';
  for (let i = 0; i < 10_000; i++) commands += `use load-${String(i).padStart(5, '0')}\r\nput 0 0 60 1\r\nx\r\n`;
  await producer.write(commands);
  await producer.waitReplies(20_000, 20_000);
  producer.destroy();

  await page.goto('/tubes');
  await expectLive(page);
  await expect(page.getByTestId('tube-count')).toContainText('10,001', { timeout: 15_000 });
  const rows = await page.locator('[data-testid^="tube-row-"]').count();
  expect(rows).toBeGreaterThan(5);
  expect(rows).toBeLessThan(200);
  const started = Date.now();
  await page.getByTestId('tube-filter').fill('load-07777');
  await expect(page.getByTestId('tube-row-load-07777')).toBeVisible();
  await expect(page.locator('[data-testid^="tube-row-"]')).toHaveCount(1);
  expect(Date.now() - started).toBeLessThan(5_000);
  await expect(page.getByTestId('tube-row-load-07777').getByTestId('count-ready')).toHaveAttribute('data-value', '1');
});
