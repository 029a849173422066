/**
 * A load-generator thread: opens its share of the connections, runs each one's setup, says
 * ready, starts on 'start' (then follows the phase, window and pace in shared memory), and on
 * 'stop' closes everything and sends its latency samples, window by window.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { LoadConnection, type RoleHandler, type SetupStep } from './connection.js';
import { Consumer } from './consumer.js';
import { RoleContext } from './context.js';
import { LatencyRole } from './latency.js';
import { SharedState, type ConnectionSpec, type MainMessage, type WorkerMessage, type WorkerPlan } from './plan.js';
import { Producer } from './producer.js';

interface Startable extends RoleHandler {
  start(): void;
}

const port = parentPort!;
const plan = workerData as WorkerPlan;
const post = (m: WorkerMessage, transfer: ArrayBuffer[] = []): void => port.postMessage(m, transfer);

let failed = false;
const fail = (message: string): void => {
  if (failed) return;
  failed = true;
  post({ type: 'error', message });
};

const ctx = new RoleContext(new SharedState(plan.shared), plan);

function setupOf(spec: ConnectionSpec): SetupStep {
  switch (spec.role) {
    case 'producer':
    case 'filler':
      return Producer.setup(spec);
    case 'consumer':
      return Consumer.setup(spec);
    case 'latency':
      return LatencyRole.setup();
  }
}

function roleOf(spec: ConnectionSpec, conn: LoadConnection): Startable {
  switch (spec.role) {
    case 'producer':
    case 'filler':
      return new Producer(conn, ctx, spec);
    case 'consumer':
      return new Consumer(conn, ctx, spec);
    case 'latency':
      return new LatencyRole(conn, ctx, spec);
  }
}

const conns: LoadConnection[] = [];
const roles: Startable[] = [];
for (const spec of plan.connections) {
  const maxBody = spec.bodySize;
  const conn = new LoadConnection(plan.host, plan.port, setupOf(spec), maxBody, fail, plan.tlsCa);
  const role = roleOf(spec, conn);
  conn.attach(role);
  conns.push(conn);
  roles.push(role);
}

/**
 * Waiting without a wake-up per reply. A server that writes each reply in its own segment
 * (beanstalkd does) wakes a blocked thread once per reply, and each wake-up costs a read, an ACK
 * and, on a VM, a cross-CPU interrupt: the generator, not the server, would set the limit.
 * `sleep` lets replies pile up between loop turns (immediates keep libuv's poll from blocking),
 * so one read takes many; pipelines hold far more than a server handles in one interval, so it
 * never runs dry. `spin` never sleeps, so a lone round trip does not wait for this thread to wake.
 *
 * A paced window always spins, whatever the plan's wait: its load leaves the thread mostly idle,
 * and its put→reserve latency must not include a sleep (on this VM a 100 µs sleep lasts about
 * 200 µs, and a put goes out just before the thread sleeps). Spinning also lets producers send
 * their due puts a few at a time (see RoleContext.turn).
 */
let polling = false;
const sleepCell = new Int32Array(new SharedArrayBuffer(4));
function pollTurn(): void {
  if (!polling) return;
  const paced = ctx.paceShare() > 0;
  if (!paced && plan.wait.kind === 'block') {
    polling = false;
    return;
  }
  if (!paced && plan.wait.kind === 'sleep') Atomics.wait(sleepCell, 0, 0, plan.wait.us / 1000);
  ctx.turn();
  setImmediate(pollTurn);
}

function startPolling(): void {
  if (polling) return;
  polling = true;
  setImmediate(pollTurn);
}

/** How often a ticking plan wakes its producers (and starts spinning when a paced window begins). */
const TICK_MS = 1;
let tickTimer: NodeJS.Timeout | null = null;

port.on('message', (m: MainMessage) => {
  if (m.type === 'start') {
    for (const r of roles) r.start();
    if (plan.wait.kind !== 'block') startPolling();
    if (plan.tick) {
      tickTimer = setInterval(() => {
        if (ctx.paceShare() > 0 && ctx.sending()) startPolling();
        ctx.tick();
      }, TICK_MS);
    }
    return;
  }
  polling = false;
  if (tickTimer !== null) clearInterval(tickTimer);
  ctx.close();
  for (const c of conns) c.close();
  const samples = ctx.takeSamples();
  post({ type: 'report', samples }, samples.flatMap((w) => Object.values(w).map((s) => s.buffer as ArrayBuffer)));
  port.close();
});

Promise.all(conns.map((c) => c.ready)).then(
  () => post({ type: 'ready' }),
  () => undefined, // already reported through fail()
);
