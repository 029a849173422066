/**
 * The dead-letter rule on the real server: `--dead-letter-after N` buries a job at its N-th
 * release (the release answers BURIED) or TTR timeout since it was put or last kicked; a tube's
 * own setting (PUT /api/tubes/:name/settings) overrides it; both survive kill -9 with -b; the
 * job says why it was buried; bad settings get a 400 and read-only mode a 403.
 */
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { API } from '../shared/api.js';
import type { JobDto, TubeDto, TubeSettingsDto } from '../shared/dto.js';
import { api, yamlMap } from './support/admin-server.js';
import { expectLine, expectOk } from './support/expectations.js';
import { adminFixture } from './support/admin-fixture.js';
import { type RawClient, tcpPut, tcpReserve } from './support/raw-client.js';

const { start, tcp, tmpDir } = adminFixture();

/** Reserves the next job (which must be `id`) and releases it; returns the reply line. */
async function reserveAndRelease(c: RawClient, id: number): Promise<string> {
  expect((await tcpReserve(c)).id).toBe(id);
  return c.call(`release ${id} 5 0\r\n`);
}

async function statsJob(c: RawClient, id: number): Promise<Map<string, string>> {
  return yamlMap(await c.call(`stats-job ${id}\r\n`));
}

describe('--dead-letter-after N', () => {
  it('answers BURIED to the N-th release, buries at the N-th timeout, and counts afresh after a kick', async () => {
    const s = await start(['--dead-letter-after', '2']);
    const c = await tcp(s);
    // TTR 1 s, so that a later strike can be a timeout.
    const id = await tcpPut(c, 'fails every time', 0, 0, 1);
    expect(await reserveAndRelease(c, id)).toBe('RELEASED\r\n');
    expect(await reserveAndRelease(c, id)).toBe('BURIED\r\n');
    const st = await statsJob(c, id);
    expect(st.get('state')).toBe('buried');
    expect(st.get('releases')).toBe('2');
    expect(st.get('buries')).toBe('1');
    expect(st.get('pri')).toBe('5');
    const job = expectOk<JobDto>(await api(s.url, API.job(id)));
    expect(job).toMatchObject({ state: 'buried', strikes: 2, buryCause: 'dead-letter-release' });
    // The stats beanstalkd clients read are beanstalkd's: nothing new in stats-job.
    expect([...st.keys()]).not.toContain('strikes');

    await expectLine(c, `kick-job ${id}`, 'KICKED');
    expect(expectOk<JobDto>(await api(s.url, API.job(id)))).toMatchObject({ state: 'ready', strikes: 0, buryCause: 'none' });
    expect(await reserveAndRelease(c, id)).toBe('RELEASED\r\n');
    // The second strike is a timeout: TTR 1 s runs out while the worker holds the job.
    expect((await tcpReserve(c)).id).toBe(id);
    const deadline = Date.now() + 5000;
    while ((await statsJob(c, id)).get('state') !== 'buried' && Date.now() < deadline) {
      await c.call('reserve-with-timeout 1\r\n').then((r) => expect(r).toMatch(/^(TIMED_OUT|DEADLINE_SOON)\r\n$/));
    }
    expect(expectOk<JobDto>(await api(s.url, API.job(id)))).toMatchObject({ state: 'buried', timeouts: 1, strikes: 2, buryCause: 'dead-letter-timeout' });
  });

  it('is overridden per tube from the dashboard API, and both survive kill -9 and a restart with -b', async () => {
    const dir = tmpDir();
    const s1 = await start(['--dead-letter-after', '3', '-b', dir]);
    const c1 = await tcp(s1);
    const settings = expectOk<TubeSettingsDto>(await api(s1.url, API.tubeSettings('strict'), { method: 'PUT', json: { deadLetterAfter: 1 } }));
    expect(settings).toEqual({ tube: 'strict', deadLetterAfter: 1, own: { deadLetterAfter: 1 }, serverDefault: { deadLetterAfter: 3 } });
    expectOk<TubeSettingsDto>(await api(s1.url, API.tubeSettings('never'), { method: 'PUT', json: { deadLetterAfter: 0 } }));

    await expectLine(c1, 'use strict', 'USING strict');
    await expectLine(c1, 'watch strict', 'WATCHING 2');
    await expectLine(c1, 'ignore default', 'WATCHING 1');
    const strict = await tcpPut(c1, 'one strike');
    expect(await reserveAndRelease(c1, strict)).toBe('BURIED\r\n');
    const tube = expectOk<TubeDto>(await api(s1.url, API.tube('strict')));
    expect(tube).toMatchObject({ deadLetterAfter: 1, ownDeadLetterAfter: 1, buried: 1 });

    await expectLine(c1, 'use default', 'USING default');
    await expectLine(c1, 'watch default', 'WATCHING 2');
    await expectLine(c1, 'ignore strict', 'WATCHING 1');
    const twice = await tcpPut(c1, 'two strikes so far');
    expect(await reserveAndRelease(c1, twice)).toBe('RELEASED\r\n');
    expect(await reserveAndRelease(c1, twice)).toBe('RELEASED\r\n');
    s1.signal('SIGKILL');
    if (s1.process.exitCode === null && s1.process.signalCode === null) await once(s1.process, 'exit');

    const s2 = await start(['--dead-letter-after', '3', '-b', dir]);
    const c2 = await tcp(s2);
    expect(expectOk<TubeSettingsDto>(await api(s2.url, API.tubeSettings('strict'))).own).toEqual({ deadLetterAfter: 1 });
    expect(expectOk<TubeSettingsDto>(await api(s2.url, API.tubeSettings('never'))).deadLetterAfter).toBe(0);
    expect(expectOk<JobDto>(await api(s2.url, API.job(strict.valueOf())))).toMatchObject({ state: 'buried', buryCause: 'dead-letter-release' });
    expect(expectOk<JobDto>(await api(s2.url, API.job(twice))).strikes).toBe(2);
    expect(await reserveAndRelease(c2, twice)).toBe('BURIED\r\n');

    // Back to the server's limit; the setting is gone after another restart too.
    expectOk<TubeSettingsDto>(await api(s2.url, API.tubeSettings('strict'), { method: 'PUT', json: { deadLetterAfter: null } }));
    expect(expectOk<TubeSettingsDto>(await api(s2.url, API.tubeSettings('strict')))).toMatchObject({ deadLetterAfter: 3, own: null });
  });

  it('refuses bad settings with a clear 400, and any change in read-only mode', async () => {
    const s = await start([]);
    for (const json of [{}, { deadLetterAfter: -1 }, { deadLetterAfter: 1.5 }, { deadLetterAfter: '2' }, { deadLetterAfter: 2 ** 32 }, { deadLetterAfter: 1, x: 1 }]) {
      const res = await api(s.url, API.tubeSettings('t'), { method: 'PUT', json });
      expect(res.status, JSON.stringify(json)).toBe(400);
    }
    expect((await api(s.url, API.tubeSettings('t'), { method: 'PUT', raw: '{"deadLetterAfter":' })).status).toBe(400);
    expect((await api(s.url, '/api/tubes/-bad/settings', { method: 'PUT', json: { deadLetterAfter: 1 } })).status).toBe(400);
    // Off by default: the server says so.
    expect(expectOk<TubeSettingsDto>(await api(s.url, API.tubeSettings('t')))).toEqual({
      tube: 't',
      deadLetterAfter: 0,
      own: null,
      serverDefault: { deadLetterAfter: 0 },
    });

    const ro = await start(['--admin-read-only']);
    expect((await api(ro.url, API.tubeSettings('t'), { method: 'PUT', json: { deadLetterAfter: 1 } })).status).toBe(403);
  });
});
