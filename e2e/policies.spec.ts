/**
 * Tube policies in the dashboard, seen acting on real workers: the operator caps a tube's
 * concurrency on its page, a second worker's reserve waits while the first holds a job, the page
 * shows the tube held and the tubes list marks it; the queue cap refuses a producer's put and the
 * page counts it; the timeout backoff sends a timed-out job back delayed; removing the policy
 * lets the waiting worker in.
 */
import { expect, test, tubePath } from './fixtures.js';

test.use({ serverArgs: ['--no-gearman'] });

test('a policy set on the tube page holds a worker back, refuses a put, delays a timeout, and goes', async ({ page, tcp }) => {
  const producer = await tcp();
  await producer.use('mail');
  const first = await producer.put('one');
  const second = await producer.put('two');
  const w1 = await tcp();
  await w1.watchOnly('mail');
  const w2 = await tcp();
  await w2.watchOnly('mail');

  await page.goto(tubePath('mail'));
  const policy = page.getByTestId('tube-policy');
  await expect(policy.getByTestId('policy-current')).toContainText('No policy');
  await policy.getByTestId('policy-cap-on').check();
  await policy.getByTestId('policy-cap').fill('1');
  await policy.getByTestId('policy-queue-on').check();
  await policy.getByTestId('policy-queue').fill('1');
  await policy.getByTestId('policy-backoff-on').check();
  await policy.getByTestId('policy-backoff-base').fill('30');
  await policy.getByTestId('policy-backoff-max').fill('60');
  await policy.getByTestId('policy-save').click();
  await expect(policy.getByTestId('policy-current')).toContainText('at most 1 reserved');
  await expect(policy.getByTestId('policy-current')).toContainText('queue ≤ 1');

  // The cap: the first worker holds a job, the second one's reserve finds nothing.
  expect((await w1.reserve(0)).id).toBe(first);
  expect(await w2.command('reserve-with-timeout 0')).toBe('TIMED_OUT\r\n');
  await expect(policy.getByTestId('policy-held')).toHaveAttribute('data-value', 'cap');
  await expect(policy.getByTestId('policy-held')).toContainText('1 ready jobs wait');

  // The queue cap: one job is ready, so a put is refused, and counted.
  expect(await producer.command('put 0 0 60 5\r\nthree')).toBe('OUT_OF_MEMORY\r\n');
  await expect(policy.getByTestId('policy-refused')).toHaveAttribute('data-value', '1');

  // The tubes list marks the tube held.
  await page.goto('/tubes');
  await expect(page.getByTestId('tube-row-mail').getByTestId('tube-policy-badge')).toHaveAttribute('data-held', 'cap');

  // Removing the policy lets a waiting worker in at once.
  await page.goto(tubePath('mail'));
  const waiting = w2.reserve(10);
  await page.getByTestId('tube-policy').getByTestId('policy-clear').click();
  await expect(page.getByTestId('tube-policy').getByTestId('policy-current')).toContainText('No policy');
  expect((await waiting).id).toBe(second);
});

test('the timeout backoff sends a job whose TTR ran out back delayed', async ({ page, tcp }) => {
  const c = await tcp();
  await c.use('slow');
  await c.watchOnly('slow');
  await page.goto(tubePath('slow'));
  const policy = page.getByTestId('tube-policy');
  await policy.getByTestId('policy-backoff-on').check();
  await policy.getByTestId('policy-backoff-base').fill('45');
  await policy.getByTestId('policy-backoff-max').fill('45');
  await policy.getByTestId('policy-backoff-jitter').fill('0');
  await policy.getByTestId('policy-save').click();
  await expect(policy.getByTestId('policy-current')).toContainText('timeout backoff 45 s');

  const id = await c.put('takes too long', { ttr: 1 });
  expect((await c.reserve(0)).id).toBe(id);
  await expect.poll(async () => (await c.statsJob(id)).get('state'), { timeout: 8000 }).toBe('delayed');
  expect((await c.statsJob(id)).get('delay')).toBe('45');
  await expect(policy.getByTestId('policy-backoffs')).toHaveAttribute('data-value', '1');
});

test('the rate limit holds a worker back until the next token, and the page says so', async ({ page, tcp }) => {
  const producer = await tcp();
  await producer.use('paced');
  const ids = [await producer.put('a'), await producer.put('b')];
  const worker = await tcp();
  await worker.watchOnly('paced');
  await page.goto(tubePath('paced'));
  const policy = page.getByTestId('tube-policy');
  await policy.getByTestId('policy-rate-on').check();
  // One job per two seconds, one at a time.
  await policy.getByTestId('policy-rate').fill('0.5');
  await policy.getByTestId('policy-burst').fill('1');
  await policy.getByTestId('policy-save').click();
  await expect(policy.getByTestId('policy-current')).toContainText('0.5/s (burst 1)');
  expect((await worker.reserve(0)).id).toBe(ids[0]);
  expect(await worker.command('reserve-with-timeout 0')).toBe('TIMED_OUT\r\n');
  await expect(policy.getByTestId('policy-held')).toHaveAttribute('data-value', 'rate');
  // The next token comes within two seconds: a waiting reserve gets the second job then.
  expect((await worker.reserve(5)).id).toBe(ids[1]);
});
