/**
 * Schedules and alert rules in cluster mode, two real nodes on one real PostgreSQL, both
 * evaluating on the same tick boundaries so that they race for every slot and every alert: a
 * slot is fired by one node only (the claim row), and an alert's start and clear are each posted
 * once. Created on one node, a schedule or a rule is seen and acted on by the other.
 */
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { API } from '../shared/api.js';
import type { AlertEventDto, AlertRuleDto, ScheduleDto, TubeDto } from '../shared/dto.js';
import { api, startAdminServer, type AdminServerProcess } from './support/admin-server.js';
import { freshDatabase } from './support/cluster-db.js';
import { RawClient, tcpPut, tcpReserve } from './support/raw-client.js';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.js';

const pgUrl = inject('pgUrl');
const servers: AdminServerProcess[] = [];
const clients: RawClient[] = [];
const receivers: WebhookReceiver[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await Promise.all([...servers.splice(0).map((s) => s.stop()), ...receivers.splice(0).map((r) => r.close())]);
});

async function twoNodes(label: string): Promise<{ url: string; a: AdminServerProcess; b: AdminServerProcess }> {
  const url = await freshDatabase(pgUrl!, label);
  const [a, b] = await Promise.all([0, 1].map(() => startAdminServer(['--cluster', url, '--automation-tick', '50', '--no-gearman'])));
  servers.push(a!, b!);
  return { url, a: a!, b: b! };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** beanpole_schedule_fires_total summed over `servers`' /metrics. */
async function firesOn(nodes: AdminServerProcess[]): Promise<number[]> {
  return Promise.all(
    nodes.map(async (s) => {
      const text = await (await fetch(new URL('/metrics', s.url))).text();
      return [...text.matchAll(/^beanpole_schedule_fires_total\{[^}]*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
    }),
  );
}

describe.skipIf(pgUrl === null)('schedules and alerts across two cluster nodes', () => {
  it('fires each slot of a schedule once, whichever node claims it', async () => {
    const { url, a, b } = await twoNodes('schedule once');
    const created = await api(a.url, API.schedules, { json: { name: 'tick', cron: '* * * * * *', tube: 'ticks', body: 'tock' } });
    expect(created.status, created.text).toBe(201);
    const id = (created.json as ScheduleDto).id;
    // Seen on the other node at once: the schedules are in the database.
    expect(((await api(b.url, API.schedule(id))).json as ScheduleDto).name).toBe('tick');
    const deadline = Date.now() + 10_000;
    let runs = 0;
    while (runs < 4 && Date.now() < deadline) {
      runs = ((await api(b.url, API.schedule(id))).json as ScheduleDto).lastRuns.filter((r) => r.jobId !== null).length;
      await sleep(100);
    }
    expect(runs).toBeGreaterThanOrEqual(4);
    expect((await api(b.url, API.schedule(id), { method: 'PATCH', json: { paused: true } })).status).toBe(200);
    // Runs claimed just before the pause finish their put.
    await sleep(500);
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const { rows } = await db.query<{ runs: number; slots: number; nodes: number; jobs: number }>(
        `SELECT count(*)::int AS runs, count(DISTINCT slot_at)::int AS slots, count(DISTINCT node)::int AS nodes,
                count(DISTINCT job_id)::int AS jobs FROM beanpole_schedule_runs WHERE schedule_id = $1`,
        [id],
      );
      const r = rows[0]!;
      expect(r.runs).toBe(r.slots);
      expect(r.jobs).toBe(r.runs);
      const tube = (await api(a.url, API.tube('ticks'))).json as TubeDto;
      expect(tube.totalJobs).toBe(r.runs);
      expect(tube.ready).toBe(r.runs);
      const fires = await firesOn([a, b]);
      expect(fires[0]! + fires[1]!).toBe(r.runs);
      // Both nodes evaluated every slot: the claims, not luck, kept them apart.
      const { rows: slots } = await db.query<{ slot_at: number }>('SELECT slot_at FROM beanpole_schedule_runs WHERE schedule_id = $1 ORDER BY slot_at', [id]);
      for (let i = 1; i < slots.length; i++) expect(slots[i]!.slot_at - slots[i - 1]!.slot_at).toBe(1000);
    } finally {
      await db.end();
    }
  });

  it('posts an alert start and clear once, with two nodes watching', async () => {
    const { a, b } = await twoNodes('alert once');
    const hook = await startWebhookReceiver();
    receivers.push(hook);
    const created = await api(b.url, API.alerts, {
      json: { name: 'buried', condition: 'buried', threshold: 0, tubes: 'mail', webhookUrl: hook.url, minIntervalSeconds: 0 },
    });
    expect(created.status, created.text).toBe(201);
    const rule = created.json as AlertRuleDto;
    const c = await RawClient.connect(a.port);
    clients.push(c);
    await c.call('use mail\r\n');
    await tcpPut(c, 'a mail');
    await c.call('watch mail\r\n');
    const { id } = await tcpReserve(c);
    expect(await c.call(`bury ${id} 0\r\n`)).toBe('BURIED\r\n');
    await hook.waitFor(1);
    // Both nodes tick 20 times a second; a second start would have come by now.
    await sleep(1500);
    expect(hook.posts).toHaveLength(1);
    expect(((await api(a.url, API.alert(rule.id))).json as AlertRuleDto).activeTubes).toEqual(['mail']);
    expect(await c.call(`kick-job ${id}\r\n`)).toBe('KICKED\r\n');
    await hook.waitFor(2);
    await sleep(1500);
    expect(hook.posts.map((p) => (p as { event: string }).event)).toEqual(['fired', 'cleared']);
    const history = (await api(a.url, `${API.alertHistory}?rule=${rule.id}`)).json as AlertEventDto[];
    expect(history.map((e) => [e.kind, e.delivery])).toEqual([
      ['cleared', 'delivered'],
      ['fired', 'delivered'],
    ]);
  });
});
