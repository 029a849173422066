/**
 * Alert rules on a fake clock: a condition must hold for the rule's `for` before it fires, a
 * clear follows when it stops, the minimum interval holds back a flapping rule, globs pick the
 * tubes, and the webhook sender retries with backoff, gives up, and drops past its bound.
 */
import { describe, expect, it } from 'vitest';
import type { TubeAges, TubeCounts } from '../operations/operations.js';
import type { Timer } from '../common/timer.js';
import { AlertService } from './alert-service.js';
import { MemoryAlertStore } from './memory-alert-store.js';
import type { AlertRuleFields } from './rule.js';
import { tubeMatcher } from '../common/tube-glob.js';
import { MAX_QUEUED_DELIVERIES, WebhookSender, type PostJson } from './webhook-sender.js';

function tube(name: string, change: Partial<TubeCounts> = {}): TubeCounts {
  return {
    name,
    serial: 1,
    urgent: 0,
    ready: 0,
    reserved: 0,
    delayed: 0,
    buried: 0,
    totalJobs: 0,
    using: 0,
    watching: 0,
    waiting: 0,
    deletes: 0,
    pauses: 0,
    pauseMs: 0,
    unpauseAt: 0,
    stateChanges: [0, 0, 0, 0],
    nextReadyCreatedAt: 0,
    deadLetterAfter: 0,
    ownSettings: null,
    policy: null,
    ...change,
  };
}

function rule(change: Partial<AlertRuleFields> = {}): AlertRuleFields {
  return {
    name: 'too many buried',
    condition: 'buried',
    threshold: 2,
    forMs: 10_000,
    tubes: '*',
    webhookUrl: 'http://127.0.0.1:9/hook',
    format: 'json',
    minIntervalMs: 0,
    enabled: true,
    ...change,
  };
}

/** Timers that run when the test says the time has come. */
class FakeTimer implements Timer {
  now = 0;
  private pending: { at: number; fn: () => void }[] = [];
  after(ms: number, fn: () => void): () => void {
    const entry = { at: this.now + ms, fn };
    this.pending.push(entry);
    return () => (this.pending = this.pending.filter((p) => p !== entry));
  }
  /** Runs what is due by `to`, in order. */
  advance(to: number): void {
    this.now = to;
    const due = this.pending.filter((p) => p.at <= to).sort((a, b) => a.at - b.at);
    this.pending = this.pending.filter((p) => p.at > to);
    for (const p of due) p.fn();
  }
  get waiting(): number {
    return this.pending.length;
  }
}

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

function setup(answers: (number | Error)[] = []) {
  const posts: { url: string; body: unknown }[] = [];
  const post: PostJson = async (url, body) => {
    posts.push({ url, body: JSON.parse(body) as unknown });
    const answer = answers.shift() ?? 200;
    if (answer instanceof Error) throw answer;
    return answer;
  };
  const timer = new FakeTimer();
  const store = new MemoryAlertStore();
  let tubes: TubeCounts[] = [];
  let ages = new Map<string, TubeAges>();
  let alerts: AlertService | null = null;
  const sender = new WebhookSender({ timer, post, backoffMs: 1000, maxAttempts: 3, onUpdate: (...a) => alerts?.deliveryUpdated(...a) });
  alerts = new AlertService({
    store,
    sender,
    node: 0,
    server: 'test-host',
    facts: { tubes: () => tubes, readyAges: async () => ages },
  });
  return {
    alerts,
    store,
    posts,
    timer,
    sender,
    setTubes: (t: TubeCounts[]) => (tubes = t),
    setAges: (a: Map<string, TubeAges>) => (ages = a),
  };
}

describe('alert rules on a fake clock', () => {
  it('fires once the condition has held for its time, clears when it stops, and posts both', async () => {
    const { alerts, store, posts, setTubes } = setup();
    const r = await alerts.create(rule(), 0);
    setTubes([tube('emails', { buried: 3 }), tube('quiet', { buried: 1 })]);
    await alerts.tick(1000);
    await alerts.tick(10_999);
    expect(posts).toHaveLength(0);
    await alerts.tick(11_000);
    await alerts.tick(12_000);
    await settle();
    expect(posts).toHaveLength(1);
    expect(posts[0]).toMatchObject({
      url: 'http://127.0.0.1:9/hook',
      body: { event: 'fired', tube: 'emails', value: 3, rule: { id: r.id, name: 'too many buried', condition: 'buried', threshold: 2, forSeconds: 10 } },
    });
    expect(await alerts.active()).toEqual([{ ruleId: r.id, tube: 'emails' }]);
    setTubes([tube('emails', { buried: 2 })]);
    await alerts.tick(13_000);
    await settle();
    expect(posts.map((p) => (p.body as { event: string }).event)).toEqual(['fired', 'cleared']);
    expect(await alerts.active()).toEqual([]);
    expect((await store.events(null, 10)).map((e) => [e.kind, e.delivery, e.attempts])).toEqual([
      ['cleared', 'delivered', 1],
      ['fired', 'delivered', 1],
    ]);
  });

  it('a condition that stops before its time never fires', async () => {
    const { alerts, posts, setTubes } = setup();
    await alerts.create(rule(), 0);
    setTubes([tube('emails', { buried: 3 })]);
    await alerts.tick(0);
    setTubes([tube('emails', { buried: 0 })]);
    await alerts.tick(5000);
    setTubes([tube('emails', { buried: 3 })]);
    await alerts.tick(12_000);
    await settle();
    expect(posts).toHaveLength(0);
  });

  it('watches the other conditions: oldest ready, unwatched, a growing backlog', async () => {
    const { alerts, posts, setTubes, setAges } = setup();
    await alerts.create(rule({ name: 'old', condition: 'oldest-ready', threshold: 60, forMs: 0, tubes: 'old' }), 0);
    await alerts.create(rule({ name: 'orphan', condition: 'unwatched', forMs: 5000, tubes: 'orphan' }), 0);
    await alerts.create(rule({ name: 'rising', condition: 'backlog-rising', threshold: 50, forMs: 5000, tubes: 'rising' }), 0);
    setAges(new Map([['old', { oldestReadyCreatedAt: 100_000, nearTtr: 0 }]]));
    setTubes([tube('old', { ready: 1 }), tube('orphan', { ready: 4, watching: 0 }), tube('rising', { ready: 10 })]);
    await alerts.tick(160_000);
    setTubes([tube('old', { ready: 1 }), tube('orphan', { ready: 4, watching: 0 }), tube('rising', { ready: 70 })]);
    await alerts.tick(160_001);
    await alerts.tick(165_001);
    await settle();
    const fired = posts.map((p) => p.body as { tube: string; value: number; message: string });
    expect(fired.map((f) => [f.tube, f.value]).sort()).toEqual([
      ['old', 60],
      ['orphan', 4],
      ['rising', 60],
    ]);
    expect(fired.find((f) => f.tube === 'old')!.message).toBe('[beanpole test-host] old: tube old: oldest ready job 60 s old (over 60 s)');
    // The backlog back at its low clears; a worker watching clears the orphan.
    setTubes([tube('old', { ready: 1 }), tube('orphan', { ready: 4, watching: 1 }), tube('rising', { ready: 10 })]);
    await alerts.tick(166_000);
    await settle();
    expect(posts.slice(3).map((p) => [(p.body as { tube: string }).tube, (p.body as { event: string }).event]).sort()).toEqual([
      ['orphan', 'cleared'],
      ['rising', 'cleared'],
    ]);
  });

  it('holds back notifications within the minimum interval, and the clear of one held back', async () => {
    const { alerts, store, posts, setTubes } = setup();
    await alerts.create(rule({ forMs: 0, minIntervalMs: 60_000 }), 0);
    const flap = async (at: number, buried: number): Promise<void> => {
      setTubes([tube('emails', { buried })]);
      await alerts.tick(at);
    };
    await flap(0, 5);
    await flap(1000, 0);
    await flap(2000, 5);
    await flap(3000, 0);
    await settle();
    expect(posts.map((p) => (p.body as { event: string }).event)).toEqual(['fired', 'cleared']);
    expect((await store.events(null, 10)).map((e) => [e.kind, e.delivery])).toEqual([
      ['cleared', 'suppressed'],
      ['fired', 'suppressed'],
      ['cleared', 'delivered'],
      ['fired', 'delivered'],
    ]);
    await flap(62_000, 5);
    await settle();
    expect(posts).toHaveLength(3);
  });

  it('posts {"text": ...} for the slack format', async () => {
    const { alerts, posts, setTubes } = setup();
    await alerts.create(rule({ forMs: 0, format: 'slack', tubes: 'emails' }), 0);
    setTubes([tube('emails', { buried: 3 })]);
    await alerts.tick(0);
    await settle();
    expect(posts[0]!.body).toEqual({ text: '[beanpole test-host] too many buried: tube emails: 3 buried (more than 2)' });
  });

  it('clears the alert of a tube that is gone', async () => {
    const { alerts, posts, setTubes } = setup();
    await alerts.create(rule({ forMs: 0 }), 0);
    setTubes([tube('emails', { buried: 3 })]);
    await alerts.tick(0);
    setTubes([]);
    await alerts.tick(1000);
    await settle();
    expect(posts.map((p) => [(p.body as { tube: string }).tube, (p.body as { event: string }).event])).toEqual([
      ['emails', 'fired'],
      ['emails', 'cleared'],
    ]);
  });

  it('retries a failing webhook with backoff, then gives up and says why', async () => {
    const { alerts, store, posts, timer, setTubes } = setup([503, new Error('connection refused'), 200, 500, 500, 500]);
    await alerts.create(rule({ forMs: 0 }), 0);
    setTubes([tube('emails', { buried: 3 })]);
    await alerts.tick(0);
    await settle();
    expect(posts).toHaveLength(1);
    expect((await store.events(null, 1))[0]).toMatchObject({ delivery: 'pending', attempts: 1, lastError: 'HTTP 503' });
    timer.advance(999);
    await settle();
    expect(posts).toHaveLength(1);
    timer.advance(1000);
    await settle();
    expect(posts).toHaveLength(2);
    timer.advance(2999);
    await settle();
    expect(posts).toHaveLength(2);
    timer.advance(3000);
    await settle();
    expect((await store.events(null, 1))[0]).toMatchObject({ delivery: 'delivered', attempts: 3, lastError: null });
    // The clear fails three times: failed, with the last reason.
    setTubes([]);
    await alerts.tick(4000);
    await settle();
    timer.advance(5000);
    await settle();
    timer.advance(7000);
    await settle();
    expect((await store.events(null, 1))[0]).toMatchObject({ kind: 'cleared', delivery: 'failed', attempts: 3, lastError: 'HTTP 500' });
    expect(timer.waiting).toBe(0);
    expect((await alerts.states()).deliveries).toEqual({ delivered: 1, failed: 1, dropped: 0, suppressed: 0 });
  });

  it('bounds the queue of deliveries: beyond it a notification is dropped, not queued', async () => {
    const never: PostJson = () => new Promise(() => undefined);
    const sender = new WebhookSender({ timer: new FakeTimer(), post: never, onUpdate: () => undefined });
    for (let i = 0; i < MAX_QUEUED_DELIVERIES; i++) expect(sender.send(i, 'http://127.0.0.1:9/', {})).toBe(true);
    expect(sender.send(-1, 'http://127.0.0.1:9/', {})).toBe(false);
    expect(sender.pending).toBe(MAX_QUEUED_DELIVERIES);
    sender.stop();
  });

  it('matches tubes by glob, with the characters of tube names taken literally', () => {
    expect(tubeMatcher('*')('anything')).toBe(true);
    expect(tubeMatcher('emails.*')('emails.eu')).toBe(true);
    expect(tubeMatcher('emails.*')('emailsXeu')).toBe(false);
    expect(tubeMatcher('job?')('job1')).toBe(true);
    expect(tubeMatcher('job?')('job12')).toBe(false);
    expect(tubeMatcher('a(b)+$')('a(b)+$')).toBe(true);
  });
});
