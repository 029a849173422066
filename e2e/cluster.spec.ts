/**
 * The dashboard of a cluster node: the nodes view lists every node with its health and marks
 * the one serving the page; a node that stops is shown gone; a job reserved by a client of
 * another node says which node holds it; Gearman jobs submitted through another node show on
 * this node's Gearman pages, and are cancelled from there. Runs on a PostgreSQL of its own.
 */
import { test as base, expect } from '@playwright/test';
import { postgresBinDir, startThrowawayPostgres, type ThrowawayPostgres } from '../bench/throwaway-postgres.js';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { startAdminServer, type AdminServerProcess } from '../test/support/admin-server.js';
import { GearmanTestClient } from '../test/support/gearman-client.js';
import { startGearmanServer } from '../test/support/gearman-server.js';
import type { ServerProcess } from '../test/support/servers.js';
import { RawClient, tcpPut } from '../test/support/raw-client.js';
import { startServer, type RunningServer } from '../test/support/servers.js';
import { expectLive } from './fixtures.js';
import { expectOnlyJobLeft } from './gearman-steps.js';

let pg: ThrowawayPostgres | null = null;
base.beforeAll(async () => {
  if (postgresBinDir() !== null) pg = await startThrowawayPostgres({ settings: { fsync: 'off' } });
});
base.afterAll(async () => {
  await pg?.stop();
});

base('the nodes view, and which node holds a reserved job', async ({ page }) => {
  base.skip(pg === null, 'PostgreSQL is not installed');
  const url = await pg!.createDatabase('dashboard');
  let dashboard: AdminServerProcess | null = null;
  let other: RunningServer | null = null;
  const clients: RawClient[] = [];
  try {
    dashboard = await startAdminServer(['--cluster', url]);
    other = await startServer('beanpole', ['--cluster', url]);
    await page.goto(`${dashboard.url}nodes`);
    await expectLive(page);
    await expect(page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Nodes' })).toBeVisible();
    const self = await page.getByTestId('self-node').textContent();
    await expect(page.locator('[data-testid^="node-"][data-health="up"]')).toHaveCount(2);
    await expect(page.getByTestId(`node-${self}`)).toContainText('this one');

    // A job put through the other node shows up live in this node's dashboard.
    const worker = await RawClient.connect(other.port);
    clients.push(worker);
    await page.goto(`${dashboard.url}tubes/default`);
    await expectLive(page);
    const id = await tcpPut(worker, 'held elsewhere');
    await expect(page.getByTestId(`job-row-${id}`)).toBeVisible();
    await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '1');

    // A worker of the other node reserves it: the Reserved tab names that node.
    expect(await worker.call('reserve\r\n')).toMatch(/^RESERVED /);
    await page.goto(`${dashboard.url}tubes/default?state=reserved`);
    const otherId = self === '1' ? 2 : 1;
    await expect(page.getByTestId(`held-by-${id}`)).toHaveText(`a client of node ${otherId}`);

    // The other node stops: it is shown gone, and its job is ready again.
    await other.stop();
    other = null;
    await page.goto(`${dashboard.url}nodes`);
    await expect(page.getByTestId(`node-${otherId}`)).toHaveAttribute('data-health', 'gone');
    await expect(page.locator('[data-testid^="node-"][data-health="up"]')).toHaveCount(1);
    await page.goto(`${dashboard.url}tubes/default`);
    await expect(page.getByTestId('count-ready')).toHaveAttribute('data-value', '1');
  } finally {
    for (const c of clients) c.destroy();
    await other?.stop();
    await dashboard?.stop();
  }
});

base('Gearman jobs of the whole cluster, and cancelling one made on another node', async ({ page }) => {
  base.skip(pg === null, 'PostgreSQL is not installed');
  const url = await pg!.createDatabase('gearman_dashboard');
  let dashboard: AdminServerProcess | null = null;
  let other: ServerProcess | null = null;
  const clients: GearmanTestClient[] = [];
  try {
    dashboard = await startAdminServer(['--cluster', url, '--gearman-listen', '127.0.0.1', '--gearman-port', '0']);
    const started = await startGearmanServer(['--cluster', url]);
    other = started.server;
    await page.goto(`${dashboard.url}gearman`);
    await expectLive(page);

    const client = await GearmanTestClient.connect(started.port);
    clients.push(client);
    const handles: string[] = [];
    for (const data of ['{"n":1}', '{"n":2}']) {
      client.request(PACKET.SUBMIT_JOB_BG, 'resize', `u-${data}`, data);
      const [, handle] = await client.args(1);
      handles.push(handle!);
    }
    const row = page.getByTestId('gearman-fn-resize');
    await expect(row).toContainText('2');
    await row.getByRole('link', { name: 'resize' }).click();
    const first = page.getByTestId(`gearman-job-${handles[0]}`);
    await expect(first).toContainText('u-{"n":1}');
    await first.getByTestId('gearman-cancel').click();
    await first.getByTestId('gearman-cancel-confirm').click();
    await expect(first).toHaveCount(0);

    // A worker on the other node gets the job left, and then nothing.
    const worker = await GearmanTestClient.connect(started.port);
    clients.push(worker);
    worker.request(PACKET.CAN_DO, 'resize');
    await expectOnlyJobLeft(page, worker, handles[1]!);
  } finally {
    for (const c of clients) c.destroy();
    await other?.stop();
    await dashboard?.stop();
  }
});
