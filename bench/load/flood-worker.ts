/**
 * A thread with one socket.io client that floods the dashboard with view subscriptions, as a
 * misbehaving or hostile page could: `tube:view` and `job:view` alternately, each for a new
 * name or id, as fast as the socket takes them. Its own thread, so the flood never delays the
 * latency probe on the main thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Socket } from 'socket.io-client';
import type { ClientToServerEvents, ServerToClientEvents } from '../../shared/events.js';

/** What the thread is told to do. */
export interface FloodPlan {
  url: string;
  /** Events to send (half tube:view, half job:view). */
  events: number;
  /** Give up waiting for acknowledgements after this long (ms). */
  ackTimeoutMs: number;
}

/** What the flood did. */
export interface FloodResult {
  sent: number;
  acked: number;
  refused: number;
  /** The first refusal's reason, if any. */
  firstError: string | null;
  /** True when the server closed the connection. */
  disconnected: boolean;
  /** From the first event to the last acknowledgement, the disconnect or the timeout (ms). */
  ms: number;
}

/** Thread to main thread. */
export type FloodMessage = { type: 'connected' } | { type: 'done'; result: FloodResult } | { type: 'error'; message: string };

type ClientSocket = Socket<ServerToClientEvents, ClientToServerEvents>;

/** Events emitted per turn of the event loop: lets the socket write between batches. */
const BATCH = 500;

const port = parentPort!;
const plan = workerData as FloodPlan;
const post = (m: FloodMessage): void => port.postMessage(m);

const { io } = await import('socket.io-client');
const socket: ClientSocket = io(plan.url, { transports: ['websocket'], reconnection: false, timeout: 10_000 });
const result: FloodResult = { sent: 0, acked: 0, refused: 0, firstError: null, disconnected: false, ms: 0 };
let startedAt = 0;
let finished = false;

function finish(): void {
  if (finished) return;
  finished = true;
  result.ms = startedAt === 0 ? 0 : performance.now() - startedAt;
  post({ type: 'done', result });
}

function onAck(res: { ok: true } | { ok: false; error: string }): void {
  result.acked++;
  if (!res.ok) {
    result.refused++;
    result.firstError ??= res.error;
  }
  if (result.acked === plan.events) finish();
}

async function flood(): Promise<void> {
  startedAt = performance.now();
  setTimeout(finish, plan.ackTimeoutMs).unref();
  for (let i = 0; i < plan.events && socket.connected; i++) {
    if (i % 2 === 0) socket.emit('tube:view', `flood-${i}`, onAck);
    else socket.emit('job:view', i, onAck);
    result.sent++;
    if (i % BATCH === BATCH - 1) await new Promise((r) => setImmediate(r));
  }
}

socket.once('connect_error', (err) => post({ type: 'error', message: `flood client cannot connect to ${plan.url}: ${err.message}` }));
socket.once('connect', () => post({ type: 'connected' }));
socket.on('disconnect', (reason) => {
  if (reason === 'io client disconnect') return;
  result.disconnected = true;
  finish();
});
port.on('message', (m: string) => {
  if (m === 'flood') void flood();
  else {
    socket.disconnect();
    port.close();
  }
});
