/**
 * A thread of socket.io clients standing in for open dashboards: each views one tube and counts
 * every event it receives into shared memory. Its own thread, so handling events never delays
 * the load generator's event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Socket } from 'socket.io-client';
import type { ClientToServerEvents, ServerToClientEvents } from '../../shared/events.js';

/** What the thread is told to do. */
export interface DashboardsPlan {
  url: string;
  tube: string;
  clients: number;
  /** Int32 slot 0: events received by all clients. */
  shared: SharedArrayBuffer;
}

/** Thread to main thread. */
export type DashboardsMessage = { type: 'ready' } | { type: 'error'; message: string };

type ClientSocket = Socket<ServerToClientEvents, ClientToServerEvents>;

const port = parentPort!;
const plan = workerData as DashboardsPlan;
const events = new Int32Array(plan.shared);
const post = (m: DashboardsMessage): void => port.postMessage(m);

// Loaded here only: the rest of the harness runs without socket.io-client installed.
const { io } = await import('socket.io-client');
const sockets: ClientSocket[] = [];

function open(): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket: ClientSocket = io(plan.url, { transports: ['websocket'], reconnection: false, timeout: 10_000 });
    sockets.push(socket);
    socket.onAny(() => Atomics.add(events, 0, 1));
    socket.once('connect_error', (err) => reject(new Error(`dashboard client cannot connect to ${plan.url}: ${err.message}`)));
    socket.once('connect', () => {
      socket.emit('tube:view', plan.tube, (result) => {
        if (result.ok) resolve();
        else reject(new Error(`tube:view ${plan.tube} refused: ${result.error}`));
      });
    });
  });
}

port.on('message', () => {
  for (const s of sockets) s.disconnect();
  port.close();
});

Promise.all(Array.from({ length: plan.clients }, open)).then(
  () => post({ type: 'ready' }),
  (err: unknown) => post({ type: 'error', message: (err as Error).message }),
);
