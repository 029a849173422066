/**
 * Alert rules on a real server: a webhook receiver on 127.0.0.1 gets the start and the clear of a
 * rule as real clients bury and kick a job, in JSON or Slack's {"text"} shape; a failing receiver
 * is retried until it takes the post; /metrics shows the rule firing; bad input gets a 400.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { API } from '../shared/api.js';
import type { AlertEventDto, AlertRuleDto, AlertWebhookPayload } from '../shared/dto.js';
import { adminFixture } from './support/admin-fixture.js';
import { api, type AdminServerProcess } from './support/admin-server.js';
import { tcpPut, tcpReserve } from './support/raw-client.js';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.js';

const fixture = adminFixture();
const TICK = ['--automation-tick', '50', '--no-gearman'];
const receivers: WebhookReceiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

async function receiver(statuses: number[] = []): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver(statuses);
  receivers.push(r);
  return r;
}

async function createRule(server: AdminServerProcess, body: Record<string, unknown>): Promise<AlertRuleDto> {
  const r = await api(server.url, API.alerts, { json: { name: 'buried mail', condition: 'buried', threshold: 0, tubes: 'mail.*', minIntervalSeconds: 0, ...body } });
  expect(r.status, r.text).toBe(201);
  return r.json as AlertRuleDto;
}

/** Puts a job into `tube` and buries it with a real client; answers the client and the job id. */
async function buryOne(server: AdminServerProcess, tube: string) {
  const c = await fixture.tcp(server);
  expect(await c.call(`use ${tube}\r\n`)).toBe(`USING ${tube}\r\n`);
  await tcpPut(c, 'a failing mail');
  expect(await c.call(`watch ${tube}\r\n`)).toMatch(/^WATCHING/);
  const { id } = await tcpReserve(c);
  expect(await c.call(`bury ${id} 0\r\n`)).toBe('BURIED\r\n');
  return { c, id };
}

describe('alert rules through the API', () => {
  it('posts the start and the clear of a rule to its webhook, and keeps them in its history', async () => {
    const server = await fixture.start(TICK);
    const hook = await receiver();
    const rule = await createRule(server, { webhookUrl: hook.url });
    expect(rule).toMatchObject({ condition: 'buried', threshold: 0, forSeconds: 0, format: 'json', enabled: true, activeTubes: [] });
    // Another tube does not match the glob.
    await buryOne(server, 'reports');
    const { c, id } = await buryOne(server, 'mail.eu');
    const [fired] = (await hook.waitFor(1)) as AlertWebhookPayload[];
    expect(fired).toMatchObject({ event: 'fired', tube: 'mail.eu', value: 1, rule: { id: rule.id, name: 'buried mail', condition: 'buried' } });
    expect(fired!.message).toMatch(/buried mail: tube mail\.eu: 1 buried/);
    expect(((await api(server.url, API.alert(rule.id))).json as AlertRuleDto).activeTubes).toEqual(['mail.eu']);
    const metrics = await (await fetch(new URL('/metrics', server.url))).text();
    expect(metrics).toMatch(new RegExp(`^beanpole_alert_firing\\{rule_id="${rule.id}",rule="buried mail",tube="mail\\.eu"\\} 1$`, 'm'));
    expect(await c.call(`kick-job ${id}\r\n`)).toBe('KICKED\r\n');
    const posts = (await hook.waitFor(2)) as AlertWebhookPayload[];
    expect(posts.map((p) => [p.event, p.tube])).toEqual([
      ['fired', 'mail.eu'],
      ['cleared', 'mail.eu'],
    ]);
    const history = (await api(server.url, `${API.alertHistory}?rule=${rule.id}`)).json as AlertEventDto[];
    expect(history.map((e) => [e.kind, e.tube, e.delivery, e.attempts])).toEqual([
      ['cleared', 'mail.eu', 'delivered', 1],
      ['fired', 'mail.eu', 'delivered', 1],
    ]);
    expect(hook.posts).toHaveLength(2);
  });

  it('posts {"text": ...} to a Slack-compatible webhook', async () => {
    const server = await fixture.start(TICK);
    const hook = await receiver();
    await createRule(server, { webhookUrl: hook.url, format: 'slack', tubes: 'mail.us' });
    await buryOne(server, 'mail.us');
    const [post] = await hook.waitFor(1);
    expect(post).toEqual({ text: expect.stringMatching(/^\[beanpole .+\] buried mail: tube mail\.us: 1 buried \(more than 0\)$/) });
  });

  it('retries a failing receiver with backoff until it takes the post', async () => {
    const server = await fixture.start(TICK);
    const hook = await receiver([500, 503]);
    const rule = await createRule(server, { webhookUrl: hook.url });
    await buryOne(server, 'mail.eu');
    // Backoff: 1 s, then 2 s.
    await hook.waitFor(1, 15_000);
    const deadline = Date.now() + 5000;
    let event: AlertEventDto | undefined;
    while (Date.now() < deadline) {
      event = ((await api(server.url, `${API.alertHistory}?rule=${rule.id}`)).json as AlertEventDto[])[0];
      if (event?.delivery === 'delivered') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(event).toMatchObject({ kind: 'fired', delivery: 'delivered', attempts: 3, lastError: null });
    const metrics = await (await fetch(new URL('/metrics', server.url))).text();
    expect(metrics).toMatch(/^beanpole_alert_notifications_total\{outcome="delivered"\} 1$/m);
  });

  it('a receiver that is not there leaves the job port serving, and the history says why', async () => {
    const server = await fixture.start(TICK);
    const gone = await receiver();
    const url = gone.url;
    await gone.close();
    receivers.splice(0);
    const rule = await createRule(server, { webhookUrl: url });
    const { c } = await buryOne(server, 'mail.eu');
    const deadline = Date.now() + 5000;
    let event: AlertEventDto | undefined;
    while (Date.now() < deadline && event?.lastError == null) {
      event = ((await api(server.url, `${API.alertHistory}?rule=${rule.id}`)).json as AlertEventDto[])[0];
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(event).toMatchObject({ kind: 'fired', delivery: 'pending', lastError: 'ECONNREFUSED' });
    // Meanwhile clients are served as ever.
    const started = performance.now();
    for (let i = 0; i < 50; i++) await tcpPut(c, `job ${i}`);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('edits, disables and deletes a rule; bad input gets a 400 that says what is wrong', async () => {
    const server = await fixture.start(TICK);
    const rule = await createRule(server, { webhookUrl: 'http://127.0.0.1:9/hook' });
    const edited = await api(server.url, API.alert(rule.id), { method: 'PATCH', json: { condition: 'oldest-ready', threshold: 120, forSeconds: 30, enabled: false } });
    expect(edited.json).toMatchObject({ condition: 'oldest-ready', threshold: 120, forSeconds: 30, enabled: false, name: 'buried mail' });
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ webhookUrl: 'ftp://127.0.0.1/x' }, /webhookUrl: not an http/],
      [{ webhookUrl: 'not a url' }, /webhookUrl/],
      [{ condition: 'saturated' }, /condition/],
      [{ tubes: 'a b' }, /tubes/],
      [{ threshold: -1 }, /threshold/],
      [{ format: 'xml' }, /format/],
    ];
    for (const [over, message] of cases) {
      const r = await api(server.url, API.alerts, { json: { name: 'x', condition: 'buried', webhookUrl: 'http://127.0.0.1:9/', ...over } });
      expect(r.status, JSON.stringify(over)).toBe(400);
      expect((r.json as { message: string }).message).toMatch(message);
    }
    expect((await api(server.url, API.alert(rule.id), { method: 'PATCH', json: { webhookUrl: 'mailto:x@y' } })).status).toBe(400);
    expect((await api(server.url, API.alert(rule.id), { method: 'DELETE' })).status).toBe(204);
    expect((await api(server.url, API.alert(rule.id))).status).toBe(404);
    expect((await api(server.url, API.alerts)).json).toEqual([]);
  });

  it('with -b, the rules survive a restart', async () => {
    const dir = fixture.tmpDir();
    const first = await fixture.start([...TICK, '-b', dir]);
    const rule = await createRule(first, { webhookUrl: 'http://127.0.0.1:9/hook', forSeconds: 60 });
    await first.stop();
    const second = await fixture.start([...TICK, '-b', dir]);
    expect((await api(second.url, API.alerts)).json).toEqual([{ ...rule, activeTubes: [] }]);
  });
});
