/** Main-thread handle on a thread of socket.io dashboard clients (see dashboards-worker.ts). */
import { Worker } from 'node:worker_threads';
import type { DashboardsMessage, DashboardsPlan } from './dashboards-worker.js';

/** Open dashboards viewing one tube. */
export interface Dashboards {
  /** Events received so far by all clients together. */
  events(): number;
  /** Disconnects every client and ends the thread. */
  close(): Promise<void>;
}

const READY_TIMEOUT_MS = 15_000;

/** Opens `clients` socket.io clients on `url`, each viewing `tube`; resolves once all are subscribed. */
export async function openDashboards(url: string, tube: string, clients: number): Promise<Dashboards> {
  if (clients === 0) return { events: () => 0, close: () => Promise.resolve() };
  const shared = new SharedArrayBuffer(4);
  const counter = new Int32Array(shared);
  const plan: DashboardsPlan = { url, tube, clients, shared };
  const worker = new Worker(new URL('./dashboards-worker.js', import.meta.url), { workerData: plan });
  const exited = new Promise<void>((r) => worker.once('exit', () => r()));
  const close = async (): Promise<void> => {
    worker.postMessage('stop');
    const timer = setTimeout(() => void worker.terminate(), 2000);
    await exited;
    clearTimeout(timer);
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`dashboards not subscribed within ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS);
      worker.on('message', (m: DashboardsMessage) => {
        clearTimeout(timer);
        if (m.type === 'ready') resolve();
        else reject(new Error(m.message));
      });
      worker.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  } catch (err) {
    await close();
    throw err;
  }
  return { events: () => Atomics.load(counter, 0), close };
}
