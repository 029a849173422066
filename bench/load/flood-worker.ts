/**
 * A thread of socket.io clients that flood the dashboard with view subscriptions, as a
 * misbehaving or hostile page could: `tube:view` and `job:view` alternately, each for a new name
 * or id, as fast as the sockets take them or at a set pace per socket (a patient client that
 * stays under a rate limit). Its own thread, so the flood never delays the latency probe on the
 * main thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Socket } from 'socket.io-client';
import type { ClientToServerEvents, ServerToClientEvents } from '../../shared/events.js';

/** What the thread is told to do. */
export interface FloodPlan {
  url: string;
  /** Events to send, shared out over the sockets (half tube:view, half job:view). */
  events: number;
  sockets: number;
  /** Events per second per socket; 0 sends as fast as the socket takes them. */
  perSecond: number;
  /** Give up waiting for acknowledgements after this long (ms). */
  ackTimeoutMs: number;
}

/** What the flood did, over all sockets. */
export interface FloodResult {
  sent: number;
  acked: number;
  refused: number;
  /** Each distinct refusal reason, with how often it came. */
  errors: Record<string, number>;
  /** Sockets the server closed. */
  disconnected: number;
  /** From the first event to the last acknowledgement, the last disconnect or the timeout (ms). */
  ms: number;
}

/** Thread to main thread. */
export type FloodMessage = { type: 'connected' } | { type: 'done'; result: FloodResult } | { type: 'error'; message: string };

type ClientSocket = Socket<ServerToClientEvents, ClientToServerEvents>;

/** Events emitted per turn of the event loop when unpaced: lets the socket write between batches. */
const BATCH = 500;
/** Paced sockets send every this many ms. */
const PACE_MS = 100;

const port = parentPort!;
const plan = workerData as FloodPlan;
const post = (m: FloodMessage): void => port.postMessage(m);

const { io } = await import('socket.io-client');
const result: FloodResult = { sent: 0, acked: 0, refused: 0, errors: {}, disconnected: 0, ms: 0 };
const sockets: ClientSocket[] = [];
let startedAt = 0;
let finished = false;

function finish(): void {
  if (finished) return;
  finished = true;
  result.ms = startedAt === 0 ? 0 : performance.now() - startedAt;
  post({ type: 'done', result });
}

function open(): Promise<ClientSocket> {
  return new Promise((resolve, reject) => {
    const socket: ClientSocket = io(plan.url, { transports: ['websocket'], reconnection: false, timeout: 10_000 });
    socket.once('connect_error', (err) => reject(new Error(`flood client cannot connect to ${plan.url}: ${err.message}`)));
    socket.once('connect', () => resolve(socket));
  });
}

/** One socket's share: `count` events starting at `first`; resolves when all are acknowledged or it is closed. */
function floodOne(socket: ClientSocket, first: number, count: number): Promise<void> {
  return new Promise((resolve) => {
    if (count === 0) return resolve();
    let acked = 0;
    let closed = false;
    const onAck = (res: { ok: true } | { ok: false; error: string }): void => {
      result.acked++;
      if (!res.ok) {
        result.refused++;
        result.errors[res.error] = (result.errors[res.error] ?? 0) + 1;
      }
      if (++acked === count) resolve();
    };
    socket.on('disconnect', (reason) => {
      closed = true;
      if (reason !== 'io client disconnect') result.disconnected++;
      resolve();
    });
    const send = (i: number): void => {
      if (i % 2 === 0) socket.emit('tube:view', `flood-${i}`, onAck);
      else socket.emit('job:view', i, onAck);
      result.sent++;
    };
    void (async () => {
      const step = plan.perSecond === 0 ? BATCH : Math.max(1, Math.round((plan.perSecond * PACE_MS) / 1000));
      for (let i = first; i < first + count && !closed; ) {
        const end = Math.min(first + count, i + step);
        for (; i < end && !closed; i++) send(i);
        await new Promise((r) => (plan.perSecond === 0 ? setImmediate(r) : setTimeout(r, PACE_MS)));
      }
    })();
  });
}

async function flood(): Promise<void> {
  startedAt = performance.now();
  setTimeout(finish, plan.ackTimeoutMs).unref();
  const share = Math.ceil(plan.events / sockets.length);
  await Promise.all(sockets.map((s, k) => floodOne(s, k * share, Math.max(0, Math.min(share, plan.events - k * share)))));
  finish();
}

port.on('message', (m: string) => {
  if (m === 'flood') void flood();
  else {
    for (const s of sockets) s.disconnect();
    port.close();
  }
});

try {
  for (let k = 0; k < plan.sockets; k++) sockets.push(await open());
  post({ type: 'connected' });
} catch (err) {
  post({ type: 'error', message: (err as Error).message });
}
