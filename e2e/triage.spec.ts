/**
 * The triage story of an operator with hundreds of failed jobs: find the ones whose body says
 * "invalid currency" from the header box, across tubes; kick all of them at once with one
 * confirmation that states the count; delete a hand-picked few of the rest.
 */
import { expect, expectLive, test, type Beanstalk } from './fixtures.js';

/** Puts `bodies` into `tube` and buries them all; returns their ids. */
async function buryAll(client: Beanstalk, tube: string, bodies: string[]): Promise<number[]> {
  await client.use(tube);
  await client.watchOnly(tube);
  const ids: number[] = [];
  for (const body of bodies) ids.push(await client.put(body));
  for (let i = 0; i < bodies.length; i++) await client.bury((await client.reserve()).id);
  return ids;
}

test('search buried bodies across tubes, kick every match, delete a few picked by hand', async ({ page, tcp }) => {
  const client = await tcp();
  const currency = (i: number): string => `{"order":${i},"error":"Invalid currency: XYZ"}`;
  const other = (i: number): string => `{"order":${i},"error":"card declined"}`;
  // 150 failed jobs over three tubes; 90 of them for the same reason. More than a page.
  const matching: number[] = [];
  const rest: number[] = [];
  for (const tube of ['payments', 'refunds', 'invoices']) {
    const ids = await buryAll(client, tube, Array.from({ length: 50 }, (_, i) => (i % 5 < 3 ? currency(i) : other(i))));
    ids.forEach((id, i) => (i % 5 < 3 ? matching : rest).push(id));
  }

  await page.goto('/');
  await expectLive(page);
  // Text typed into the id box searches instead of erroring.
  await page.getByTestId('find-job-input').fill('invalid currency');
  await page.getByTestId('find-job-submit').click();
  await expect(page).toHaveURL(/\/search\?q=invalid\+currency$/);
  const status = page.getByTestId('search-status');
  // The first page holds 50; the walk may stop there (a slice is bounded by time too), so the
  // count may still be partial ("50+").
  await expect(page.locator('[data-testid^="search-row-"]')).toHaveCount(50);
  await expect(status).toHaveAttribute('data-matched', /^(5\d|[6-8]\d|90)$/);

  // All of them, not just the 50 shown: one confirmation that says how many are known so far.
  await page.getByTestId('select-all-matching').click();
  await page.getByTestId('bulk-kick').click();
  await expect(page.getByTestId('bulk-confirm-text')).toContainText('every job matching this search');
  await page.getByTestId('bulk-confirm').click();
  await expect(page.getByText('Kicked: 90 jobs.')).toBeVisible();
  for (const tube of ['payments', 'refunds', 'invoices']) {
    const st = await client.statsTube(tube);
    expect([st.get('current-jobs-ready'), st.get('current-jobs-buried')]).toEqual(['30', '20']);
  }

  // The rest, buried in payments: pick two by hand and delete them.
  await page.getByTestId('search-q').fill('declined');
  await page.getByTestId('search-tube').fill('payments');
  await page.getByTestId('search-state').selectOption('buried');
  await page.getByTestId('search-submit').click();
  await expect(status).toHaveAttribute('data-matched', '20');
  const [a, b] = rest;
  await page.getByTestId(`select-${a}`).check();
  await page.getByTestId(`select-${b}`).check();
  await page.getByTestId('bulk-delete').click();
  await expect(page.getByTestId('bulk-confirm-text')).toContainText('2 jobs');
  await page.getByTestId('bulk-confirm').click();
  await expect(page.getByText('Deleted: 2 jobs.')).toBeVisible();
  await expect(status).toHaveAttribute('data-matched', '18');
  expect(await client.peek(a!)).toBeNull();
  expect(await client.peek(b!)).toBeNull();
  expect(matching).toHaveLength(90);
});

test('a bad pattern is said plainly, and nothing is searched', async ({ page }) => {
  await page.goto('/search?q=%28unclosed&regex=1');
  await expect(page.getByTestId('search-error')).toContainText('not a valid regular expression');
});

test('the overview says which tubes need an operator, worst first, and how to start on an empty server', async ({ page, tcp }) => {
  await page.goto('/');
  await expectLive(page);
  await expect(page.getByTestId('first-steps')).toBeVisible();

  const client = await tcp();
  // Ready jobs nobody watches, and (worse) buried ones.
  await client.use('unwatched');
  await client.put('waiting');
  await buryAll(client, 'failing', ['x', 'y']);
  await expect(page.getByTestId('first-steps')).toHaveCount(0);
  const items = page.locator('[data-testid^="attention-"]');
  await expect(items).toHaveCount(1);
  await expect(items.nth(0)).toHaveAttribute('data-testid', 'attention-failing');
  await expect(items.nth(0)).toContainText('2 buried');
  // Ready jobs nobody watches are common on a healthy server: one line, not an item per tube.
  await expect(page.getByTestId('weak-signals')).toContainText('1 tube has ready jobs and no worker watching');
  // The buried count stands out in the tubes list too.
  await page.goto('/tubes');
  await expect(page.getByTestId('tube-row-failing').getByTestId('count-buried')).toHaveClass(/alarm/);
});

test('on a job page, a kick or a delete leads to the next job of the same list; a worker taking the job is said', async ({ page, tcp }) => {
  const client = await tcp();
  const ids = await buryAll(client, 'step', ['one', 'two', 'three']);
  await page.goto(`/jobs/${ids[0]}`);
  await expectLive(page);
  await page.getByTestId('kick-job').click();
  await expect(page.getByTestId('triage-bar')).toContainText(`Kicked job ${ids[0]}.`);
  await page.getByTestId('next-job').click();
  await expect(page).toHaveURL(new RegExp(`/jobs/${ids[1]}$`));
  await page.getByTestId('delete-job').click();
  await page.getByTestId('confirm-delete-job').click();
  await expect(page.getByTestId('job-deleted')).toBeVisible();
  await page.getByTestId('next-job').click();
  await expect(page).toHaveURL(new RegExp(`/jobs/${ids[2]}$`));
  await page.getByTestId('kick-job').click();
  await expect(page.getByTestId('triage-bar')).toContainText('It was the last buried job in step.');
  await page.getByTestId('back-to-list').click();
  await expect(page).toHaveURL(/\/tubes\/step\?state=buried$/);

  // The kicked job is ready again; a worker takes it while its page is open.
  await page.goto(`/jobs/${ids[2]}`);
  await expectLive(page);
  await expect(page.getByTestId('job-field-state')).toHaveAttribute('data-value', 'ready');
  await client.watchOnly('step');
  const taken = await client.reserve();
  expect([ids[0], ids[2]]).toContain(taken.id);
  if (taken.id !== ids[2]) await client.reserve();
  await expect(page.getByTestId('job-taken')).toBeVisible();
});

test('connections are pushed live with what each holds; an operator closes a stuck worker and its job is ready again', async ({ page, tcp }) => {
  await page.goto('/connections');
  await expectLive(page);
  const worker = await tcp();
  await worker.use('stuck');
  await worker.watchOnly('stuck');
  const id = await worker.put('held for ever', { ttr: 3600 });
  expect((await worker.reserve()).id).toBe(id);
  // No reload and no refresh click: the row appears by itself.
  const holding = page.locator(`[data-testid^="conn-holding-"]`).filter({ hasText: String(id) });
  await expect(holding).toBeVisible({ timeout: 5_000 });
  await expect(holding).toContainText('(59m');
  const testid = await holding.getAttribute('data-testid');
  const connId = testid!.replace('conn-holding-', '');
  await page.getByTestId(`close-${connId}`).click();
  await page.getByTestId(`confirm-close-${connId}`).click();
  await expect(page.getByText(`Closed connection ${connId}`)).toBeVisible();
  await page.goto(`/jobs/${id}`);
  await expect(page.getByTestId('job-field-state')).toHaveAttribute('data-value', 'ready');
});

test.describe('on a phone (390 px)', () => {
  test.use({ viewport: { width: 390, height: 844 } });

  test('Ready and Buried come first, the job actions are on screen, and no page scrolls sideways', async ({ page, tcp }) => {
    const client = await tcp();
    const [id] = await buryAll(client, 'mobile', ['{"a":1}']);
    await page.goto('/tubes/mobile?state=buried');
    await expectLive(page);
    const tabs = await page.locator('[role="tab"]').evaluateAll((els) =>
      els.map((e) => ({ id: e.getAttribute('data-testid'), x: e.getBoundingClientRect().left, y: e.getBoundingClientRect().top })),
    );
    const ordered = [...tabs].sort((a, b) => a.y - b.y || a.x - b.x).map((t) => t.id);
    expect(ordered.slice(0, 2)).toEqual(['job-state-tab-ready', 'job-state-tab-buried']);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(391);

    await page.goto(`/jobs/${id}`);
    await expectLive(page);
    for (const testid of ['kick-job', 'delete-job']) {
      const box = await page.getByTestId(testid).boundingBox();
      expect(box, testid).not.toBeNull();
      expect(box!.y + box!.height).toBeLessThanOrEqual(844);
    }
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(391);
  });
});

test('the throughput chart switches to the minute history and to a log scale; a tube has its own chart', async ({ page }) => {
  await page.goto('/');
  await expectLive(page);
  await page.getByTestId('chart-log').check();
  await expect(page.getByTestId('throughput-chart').locator('canvas')).toBeVisible();
  await page.getByTestId('chart-range').selectOption('day');
  await expect(page.getByTestId('history-chart')).toHaveAttribute('data-points', '0');
  await expect(page.getByText('No minute has been sampled yet')).toBeVisible();
  await page.getByTestId('chart-range').selectOption('live');
  await expect(page.getByTestId('throughput-chart').locator('canvas')).toBeVisible();
  await page.goto('/tubes/default');
  await expect(page.getByTestId('tube-chart')).toBeAttached();
});

test('kick all buried jobs across tubes from the tubes list, with one confirmation', async ({ page, tcp }) => {
  const client = await tcp();
  await buryAll(client, 'x1', ['a', 'b']);
  await buryAll(client, 'x2', ['c']);
  await page.goto('/tubes');
  await expectLive(page);
  await page.getByTestId('kick-all').click();
  await expect(page.getByTestId('all-confirm-text')).toHaveText('Kick 3 buried jobs in 2 tubes?');
  await page.getByTestId('all-confirm').click();
  await expect(page.getByText('Kicked 3 jobs across all tubes.')).toBeVisible();
  await expect(page.getByTestId('tube-row-x1').getByTestId('count-buried')).toHaveAttribute('data-value', '0');
});

test('the tubes list shows each tube’s jobs in and out per second, how long its next job has waited and its oldest ready job’s age', async ({ page, tcp }) => {
  await page.goto('/tubes');
  await expectLive(page);
  const client = await tcp();
  await client.use('flow');
  await client.put('first');
  const row = page.getByTestId('tube-row-flow');
  await expect(row).toBeVisible();
  // Each poll puts one more job: updates arrive over time, and the rate rises above zero.
  await expect
    .poll(
      async () => {
        await client.put('more');
        return Number(await row.getByTestId('count-in-rate').getAttribute('data-value'));
      },
      { timeout: 10_000 },
    )
    .toBeGreaterThan(0);
  await expect(row.getByTestId('count-out-rate')).toHaveAttribute('data-value', '0.0');
  await expect(row.getByTestId('count-waited')).toHaveAttribute('data-value', /^\d+$/);

  // The oldest ready job, found by the server's walk over the jobs, is not the queue head: a more
  // urgent job put later is next, and younger.
  const seconds = async (id: string): Promise<number> => Number(await row.getByTestId(id).getAttribute('data-value'));
  await expect.poll(() => seconds('count-oldest'), { timeout: 15_000 }).toBeGreaterThanOrEqual(1);
  await client.put('urgent', { priority: 0 });
  await expect.poll(async () => (await seconds('count-oldest')) - (await seconds('count-waited')), { timeout: 15_000 }).toBeGreaterThanOrEqual(1);
});

test('filter a tube’s buried list by body with a pattern, then kick the page of matches', async ({ page, tcp }) => {
  const client = await tcp();
  const ids = await buryAll(
    client,
    'webhooks',
    Array.from({ length: 12 }, (_, i) => `{"hook":${i},"status":${i % 3 === 0 ? 503 : 404}}`),
  );
  const unavailable = ids.filter((_, i) => i % 3 === 0);

  await page.goto('/tubes/webhooks?state=buried');
  await expectLive(page);
  await expect(page.getByTestId('job-table').locator('tbody tr[data-testid^="job-row-"]')).toHaveCount(12);
  await page.getByTestId('tube-filter').fill('"status":5\\d\\d');
  await page.getByTestId('tube-filter-regex').check();
  await page.getByTestId('tube-filter-apply').click();
  await expect(page.getByTestId('search-status')).toHaveAttribute('data-matched', String(unavailable.length));
  await expect(page.locator('[data-testid^="search-row-"]')).toHaveCount(unavailable.length);

  await page.getByTestId('select-page').check();
  await page.getByTestId('bulk-kick').click();
  await expect(page.getByTestId('bulk-confirm-text')).toHaveText(`Kick ${unavailable.length} jobs?`);
  await page.getByTestId('bulk-confirm').click();
  await expect(page.getByText(`Kicked: ${unavailable.length} jobs.`)).toBeVisible();
  for (const id of unavailable) expect((await client.statsJob(id)).get('state')).toBe('ready');
  // The filter searched again: nothing buried matches now; "Show all" brings the list back.
  await expect(page.getByTestId('search-empty')).toBeVisible();
  await page.getByTestId('tube-filter-clear').click();
  await expect(page.getByTestId('job-table').locator('tbody tr[data-testid^="job-row-"]')).toHaveCount(ids.length - unavailable.length);
});

test('a tube’s job list ticks jobs for bulk actions: two deleted by hand, then all the rest moved', async ({ page, tcp }) => {
  const client = await tcp();
  // More than the 50 a page shows, so "all" means more than the page.
  const ids = await buryAll(client, 'exports', Array.from({ length: 60 }, (_, i) => `export ${i} failed`));

  await page.goto('/tubes/exports?state=buried');
  await expectLive(page);
  await page.getByTestId(`select-${ids[0]}`).check();
  await page.getByTestId(`select-${ids[1]}`).check();
  await expect(page.getByTestId('bulk-count')).toHaveAttribute('data-value', '2');
  await page.getByTestId('bulk-delete').click();
  await expect(page.getByTestId('bulk-confirm-text')).toHaveText('Delete 2 jobs?');
  await page.getByTestId('bulk-confirm').click();
  await expect(page.getByText('Deleted: 2 jobs.')).toBeVisible();
  expect(await client.command(`peek ${ids[0]}`)).toBe('NOT_FOUND\r\n');
  await expect(page.getByTestId('count-buried')).toHaveAttribute('data-value', '58');

  await page.getByTestId('select-page').check();
  await page.getByTestId('select-all-matching').click();
  await expect(page.getByTestId('bulk-count')).toHaveAttribute('data-value', '58');
  await page.getByTestId('bulk-move-to').fill('exports-retry');
  await page.getByTestId('bulk-move').click();
  await expect(page.getByTestId('bulk-confirm-text')).toHaveText('Move every job buried in this tube (58) to exports-retry?');
  await page.getByTestId('bulk-confirm').click();
  await expect(page.getByText('Moved to exports-retry: 58 jobs.')).toBeVisible();
  const moved = await client.statsTube('exports-retry');
  expect(moved.get('current-jobs-buried')).toBe('58');
  // Ids and attributes are kept by a move.
  expect((await client.statsJob(ids[59]!)).get('tube')).toBe('exports-retry');
});

test('search results mark the match in its context, and “whole word” finds 4711 but not 47117', async ({ page, tcp }) => {
  const client = await tcp();
  const long = `{"trace":"${'step '.repeat(40)}order 4711 declined","more":"${'z'.repeat(200)}"}`;
  const [deep, longer] = await buryAll(client, 'orders', [long, 'order 47117 shipped']);
  await page.goto('/search?q=4711');
  await expectLive(page);
  await expect(page.getByTestId(`search-row-${longer}`)).toBeVisible();
  const match = page.getByTestId(`search-match-${deep}`);
  await expect(match.locator('mark')).toHaveText('4711');
  await expect(match).toContainText('order 4711 declined');
  await expect(match.locator('mark')).toBeInViewport();

  await page.getByTestId('search-whole-word').check();
  await page.getByTestId('search-q').press('Enter');
  await expect(page).toHaveURL(/word=1/);
  await expect(page.getByTestId(`search-row-${deep}`)).toBeVisible();
  await expect(page.getByTestId(`search-row-${longer}`)).toHaveCount(0);
});

test('“Needs attention” puts a tube burying jobs now above a paused tube with more old buried jobs', async ({ page, tcp }) => {
  const client = await tcp();
  await buryAll(client, 'old-paused', Array.from({ length: 30 }, (_, i) => `old ${i}`));
  expect(await client.command('pause-tube old-paused 3600')).toBe('PAUSED\r\n');
  const worker = await tcp();
  await worker.use('live-fire');
  await worker.watchOnly('live-fire');
  await worker.put('first');
  await page.goto('/');
  await expectLive(page);
  const items = page.locator('[data-testid^="attention-"]');
  await expect(items.nth(0)).toHaveAttribute('data-testid', 'attention-old-paused');
  // The worker starts failing jobs while the operator watches.
  await worker.bury((await worker.reserve()).id);
  for (let i = 0; i < 3; i++) {
    await worker.put(`failing ${i}`);
    await worker.bury((await worker.reserve()).id);
  }
  await expect(items.nth(0)).toHaveAttribute('data-testid', 'attention-live-fire');
  await expect(items.nth(0)).toContainText('+4 buried lately');
  await expect(items.nth(1)).toHaveAttribute('data-testid', 'attention-old-paused');
  await expect(items.nth(1)).toContainText('30 buried');
});
