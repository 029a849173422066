/**
 * Tube policies on the real server, with real beanstalkd clients: the concurrency cap and the
 * rate hold reserves back (a blocked reserve is served when a place or a token frees), the
 * queue cap answers OUT_OF_MEMORY, the timeout backoff sends a timed-out job back delayed. Set
 * through PUT /api/tubes/:name/policy (admins only) or a --policies file (SIGHUP reloads it);
 * kept across kill -9 with -b; shared by the nodes of a cluster, where the cap and the rate hold
 * for all of them together.
 */
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { API, type TubePolicyRequest } from '../shared/api.js';
import type { TubeDto, TubePolicyViewDto } from '../shared/dto.js';
import { api, yamlMap, type AdminServerProcess } from './support/admin-server.js';
import { adminFixture } from './support/admin-fixture.js';
import { userNamed, writeUsersFile } from './support/admin-users.js';
import { freshDatabase } from './support/cluster-db.js';
import { expectLine, expectOk } from './support/expectations.js';
import { type RawClient, tcpPut, tcpReserve } from './support/raw-client.js';
import { GearmanTestClient } from './support/gearman-client.js';
import { waitForGearman } from './support/gearman-server.js';
import { freePort } from './support/servers.js';
import { PACKET } from '../server/protocol/gearman/packets.js';

const pgUrl = inject('pgUrl');
const { start, tcp, tmpDir } = adminFixture();

const setPolicy = async (s: AdminServerProcess, tube: string, policy: TubePolicyRequest): Promise<TubePolicyViewDto> =>
  expectOk<TubePolicyViewDto>(await api(s.url, API.tubePolicy(tube), { method: 'PUT', json: policy }));
const policyOf = async (s: AdminServerProcess, tube: string): Promise<TubePolicyViewDto> => expectOk<TubePolicyViewDto>(await api(s.url, API.tubePolicy(tube)));
const tubeOf = async (s: AdminServerProcess, tube: string): Promise<TubeDto> => expectOk<TubeDto>(await api(s.url, API.tube(tube)));

/**
 * Sets `tube`'s policy through every server given. A cluster node learns of a change another
 * node made from a notification (at once, or at its next poll on a loaded machine), and until
 * then a reserve there passes a capped or rated tube by; the case that tests how the nodes
 * share a rate gives it to each node directly, so it does not race that notification.
 */
async function setPolicyOnEach(servers: readonly AdminServerProcess[], tube: string, policy: TubePolicyRequest): Promise<void> {
  for (const s of new Set(servers)) await setPolicy(s, tube, policy);
}

/** A client using and watching only `tube`. */
async function on(s: AdminServerProcess, tube: string): Promise<RawClient> {
  const c = await tcp(s);
  await expectLine(c, `use ${tube}`, `USING ${tube}`);
  await expectLine(c, `watch ${tube}`, 'WATCHING 2');
  await expectLine(c, 'ignore default', 'WATCHING 1');
  return c;
}

/** A reserve that waits up to 5 s; the id of the job it got. */
async function reserveWaiting(c: RawClient): Promise<number> {
  const reply = await c.call('reserve-with-timeout 5\r\n', 7000);
  const m = /^RESERVED (\d+) \d+\r\n/.exec(reply);
  if (m === null) throw new Error(`reserve-with-timeout 5: ${JSON.stringify(reply)}`);
  return Number(m[1]);
}

/** A reserve that must find nothing it may take now. */
async function heldBack(c: RawClient): Promise<void> {
  expect(await c.call('reserve-with-timeout 0\r\n')).toBe('TIMED_OUT\r\n');
}

/** The cases every store must pass: `servers` are one server, or two nodes of one cluster. */
function policyCases(servers: () => Promise<[AdminServerProcess, AdminServerProcess]>): void {
  it('caps the jobs reserved at once: a reserve beyond it waits, and is served when a reservation ends', async () => {
    const [a, b] = await servers();
    const view = await setPolicy(a, 'capped', { concurrency: 1 });
    expect(view.policy).toEqual({ concurrency: 1, rate: null, queueCap: null, timeoutBackoff: null });
    const producer = await on(a, 'capped');
    const first = await tcpPut(producer, 'one');
    const second = await tcpPut(producer, 'two');
    const w1 = await on(a, 'capped');
    const w2 = await on(b, 'capped');
    expect((await tcpReserve(w1)).id).toBe(first);
    await heldBack(w2);
    await expect.poll(async () => (await tubeOf(b, 'capped')).policy?.capHeld, { timeout: 5000 }).toBe(true);
    expect((await tubeOf(b, 'capped')).policy?.heldReady).toBe(1);
    // A blocked reserve on the other server is served once the first job is deleted.
    const waiting = reserveWaiting(w2);
    await expectLine(w1, `delete ${first}`, 'DELETED');
    expect(await waiting).toBe(second);
  });

  it('hands out at most a burst, then a job per 1/rate seconds', async () => {
    const [a, b] = await servers();
    // One token per two seconds: no token comes back between the reserves below, however slow the machine.
    await setPolicyOnEach([a, b], 'rated', { rate: { perSecond: 0.5, burst: 2 } });
    const producer = await on(a, 'rated');
    const ids = [await tcpPut(producer, 'a'), await tcpPut(producer, 'b'), await tcpPut(producer, 'c')];
    const w1 = await on(a, 'rated');
    const w2 = await on(b, 'rated');
    expect((await tcpReserve(w1)).id).toBe(ids[0]);
    expect((await tcpReserve(w2)).id).toBe(ids[1]);
    await heldBack(w1);
    // The next token comes within two seconds: a blocked reserve gets the job then.
    expect(await reserveWaiting(w2)).toBe(ids[2]);
  });

  it('refuses a put beyond the queue cap with OUT_OF_MEMORY, counted on the tube and in /metrics', async () => {
    const [a, b] = await servers();
    // Through one server only: a node that has not heard of the cap yet finds it in the database at its put.
    await setPolicy(a, 'small', { queueCap: 2 });
    const pa = await on(a, 'small');
    const pb = await on(b, 'small');
    await tcpPut(pa, 'one');
    await tcpPut(pb, 'two', 0, 30);
    expect(await pa.call('put 0 0 60 5\r\nthree\r\n')).toBe('OUT_OF_MEMORY\r\n');
    expect(await pb.call('put 0 0 60 4\r\nfour\r\n')).toBe('OUT_OF_MEMORY\r\n');
    // A reserved job is no longer queued: there is room for one more.
    const w = await on(a, 'small');
    await tcpReserve(w);
    await tcpPut(pb, 'five');
    const tube = await tubeOf(a, 'small');
    expect(tube.policy?.refusedPuts).toBe(2);
    const metrics = await api(a.url, '/metrics');
    expect(metrics.text).toContain('beanpole_tube_policy_refused_puts_total{tube="small"} 2');
  });

  it('sends a job whose TTR ran out back delayed by the backoff, and counts it', async () => {
    const [a] = await servers();
    await setPolicy(a, 'retry', { timeoutBackoff: { baseMs: 60_000, maxMs: 60_000 } });
    const c = await on(a, 'retry');
    const id = await tcpPut(c, 'slow', 0, 0, 1);
    expect((await tcpReserve(c)).id).toBe(id);
    await expect.poll(async () => yamlMap(await c.call(`stats-job ${id}\r\n`)).get('state'), { timeout: 8000, interval: 200 }).toBe('delayed');
    const st = yamlMap(await c.call(`stats-job ${id}\r\n`));
    expect(st.get('delay')).toBe('60');
    expect(st.get('timeouts')).toBe('1');
    expect((await tubeOf(a, 'retry')).policy?.backoffs).toBe(1);
  });

  it('is shared: a policy set through one server is read through the other, and cleared with DELETE', async () => {
    const [a, b] = await servers();
    await setPolicy(a, 'shared', { concurrency: 3, queueCap: 10 });
    await expect.poll(async () => (await policyOf(b, 'shared')).policy?.concurrency, { timeout: 5000 }).toBe(3);
    const cleared = expectOk<TubePolicyViewDto>(await api(b.url, API.tubePolicy('shared'), { method: 'DELETE' }));
    expect(cleared.policy).toBeNull();
    expect((await policyOf(a, 'shared')).policy).toBeNull();
  });
}

describe('tube policies in memory', () => {
  policyCases(async () => {
    const s = await start([]);
    return [s, s];
  });

  it('survive kill -9 with -b, and a tube without one is not touched by them', async () => {
    const dir = tmpDir();
    const s1 = await start(['-b', dir]);
    await setPolicy(s1, 'kept', { concurrency: 2, rate: { perSecond: 10 }, queueCap: 100, timeoutBackoff: { baseMs: 1000, factor: 3, maxMs: 30_000, jitter: 0.5 } });
    await setPolicy(s1, 'dropped', { concurrency: 1 });
    expectOk(await api(s1.url, API.tubePolicy('dropped'), { method: 'DELETE' }));
    s1.signal('SIGKILL');
    if (s1.process.exitCode === null && s1.process.signalCode === null) await once(s1.process, 'exit');
    const s2 = await start(['-b', dir]);
    expect((await policyOf(s2, 'kept')).policy).toEqual({
      concurrency: 2,
      rate: { perSecond: 10, burst: 10 },
      queueCap: 100,
      timeoutBackoff: { baseMs: 1000, factor: 3, maxMs: 30_000, jitter: 0.5 },
    });
    expect((await policyOf(s2, 'dropped')).policy).toBeNull();
    expect((await tubeOf(s2, 'default')).policy).toBeNull();
  });

  it('are read from --policies at start and again on SIGHUP; the file says so, and a broken file keeps them', async () => {
    const file = path.join(tmpDir(), 'policies.json');
    writeFileSync(file, JSON.stringify({ tubes: { emails: { concurrency: 5 }, reports: { queueCap: 3 } } }));
    const s = await start(['--policies', file]);
    expect(await policyOf(s, 'emails')).toMatchObject({ policy: { concurrency: 5 }, fromFile: true });
    expect((await policyOf(s, 'other')).fromFile).toBe(false);
    writeFileSync(file, JSON.stringify({ tubes: { emails: { concurrency: 2, rate: { perSecond: 1 } } } }));
    s.signal('SIGHUP');
    await expect.poll(async () => (await policyOf(s, 'emails')).policy?.concurrency, { timeout: 5000 }).toBe(2);
    expect((await policyOf(s, 'reports')).policy).toBeNull();
    writeFileSync(file, '{"tubes": {"emails": {"concurrency": 0}}}');
    s.signal('SIGHUP');
    await expect.poll(() => s.stderr(), { timeout: 5000 }).toContain('--policies file not reloaded');
    expect((await policyOf(s, 'emails')).policy?.concurrency).toBe(2);
  });

  it('answers a bad policy with a 400 naming the problem, and lets only admins change one', async () => {
    const s = await start([]);
    for (const json of [{ concurrency: 0 }, { concurrency: 1.5 }, { rate: { perSecond: 0 } }, { queueCap: -1 }, { timeoutBackoff: { baseMs: 10, maxMs: 5 } }, { extra: 1 }, []]) {
      const res = await api(s.url, API.tubePolicy('t'), { method: 'PUT', json });
      expect(res.status, JSON.stringify(json)).toBe(400);
    }
    expect((await api(s.url, '/api/tubes/-bad/policy', { method: 'PUT', json: {} })).status).toBe(400);
    // A policy that limits nothing is no policy.
    expect((await setPolicy(s, 't', {})).policy).toBeNull();

    const users = writeUsersFile(path.join(tmpDir(), 'users.json'));
    const guarded = await start(['--admin-users', users]);
    for (const who of ['vera', 'otto']) {
      const res = await api(guarded.url, API.tubePolicy('t'), { method: 'PUT', json: { concurrency: 1 }, token: userNamed(who).token });
      expect(res.status, who).toBe(403);
    }
    expect((await api(guarded.url, API.tubePolicy('t'), { token: userNamed('vera').token })).status).toBe(200);
    expect((await api(guarded.url, API.tubePolicy('t'), { method: 'PUT', json: { concurrency: 1 }, token: userNamed('ada').token })).status).toBe(200);
  });

  it('refuses a --policies file that is not usable at start, saying why', async () => {
    const file = path.join(tmpDir(), 'policies.json');
    writeFileSync(file, JSON.stringify({ tubes: { 'bad name!': { concurrency: 1 } } }));
    await expect(start(['--policies', file])).rejects.toThrow(/--policies .*not a valid tube name/);
  });
});

describe.skipIf(pgUrl === null)('tube policies in a cluster of two nodes', () => {
  policyCases(async () => {
    const url = await freshDatabase(pgUrl!, 'policies');
    const [a, b] = await Promise.all([start(['--cluster', url]), start(['--cluster', url])]);
    return [a, b];
  });

  it('cap a Gearman function for the workers of both nodes', async () => {
    const url = await freshDatabase(pgUrl!, 'policies_gearman');
    await gearmanFunctionCap(['--cluster', url]);
  });
});

/**
 * A Gearman function with a concurrency cap of 1: a second worker's GRAB_JOB gets NO_JOB while
 * the first works a job, and is woken (NOOP) when that job completes. `args`: the servers' flags.
 */
async function gearmanFunctionCap(args: readonly string[]): Promise<void> {
  const ports = [await freePort(), await freePort()];
  const servers = [];
  for (const port of args.length === 0 ? ports.slice(0, 1) : ports) {
    const s = await start([...args, '--gearman-listen', '127.0.0.1', '--gearman-port', String(port)]);
    await waitForGearman(port);
    servers.push({ s, port });
  }
  const [a, b] = [servers[0]!, servers[servers.length - 1]!];
  const view = expectOk<TubePolicyViewDto>(await api(a.s.url, API.gearmanFunctionPolicy('resize'), { method: 'PUT', json: { concurrency: 1 } }));
  expect(view.policy?.concurrency).toBe(1);
  const clients: GearmanTestClient[] = [];
  const connect = async (port: number): Promise<GearmanTestClient> => {
    const c = await GearmanTestClient.connect(port);
    clients.push(c);
    return c;
  };
  try {
    const client = await connect(a.port);
    for (const data of ['one', 'two']) {
      client.request(PACKET.SUBMIT_JOB_BG, 'resize', '', data);
      expect((await client.args(1))[0]).toBe(PACKET.JOB_CREATED);
    }
    const w1 = await connect(a.port);
    const w2 = await connect(b.port);
    for (const w of [w1, w2]) w.request(PACKET.CAN_DO, 'resize');
    w1.request(PACKET.GRAB_JOB);
    const [assigned, handle] = await w1.args(3);
    expect(assigned).toBe(PACKET.JOB_ASSIGN);
    w2.request(PACKET.GRAB_JOB);
    expect((await w2.packet()).type).toBe(PACKET.NO_JOB);
    w2.request(PACKET.PRE_SLEEP);
    w1.request(PACKET.WORK_COMPLETE, handle!, 'done');
    expect((await w2.packet(10_000)).type).toBe(PACKET.NOOP);
    w2.request(PACKET.GRAB_JOB);
    expect((await w2.args(3))[0]).toBe(PACKET.JOB_ASSIGN);
  } finally {
    for (const c of clients) c.destroy();
  }
}

describe('a Gearman function policy in memory', () => {
  it('caps the jobs its workers hold at once', async () => {
    await gearmanFunctionCap([]);
  });
});
