/** The live link to the server: the only module that calls io(). */

import { io, type Socket } from 'socket.io-client';
import type { ClientToServerEvents, ServerToClientEvents } from '../../shared/events.js';
import { withBase } from './base.js';

export type AdminSocket = Socket<ServerToClientEvents, ClientToServerEvents>;

/** What the header shows: connecting (first try or retrying), connected, disconnected, unauthorized. */
export type LinkStatus = 'connecting' | 'connected' | 'disconnected' | 'unauthorized';

const ACK_TIMEOUT_MS = 5000;
/** After a refusal by the server's middleware socket.io does not retry by itself. */
const RETRY_AFTER_REFUSAL_MS = 3000;

const socket: AdminSocket = io({ autoConnect: false, path: withBase('/socket.io') });

const statusListeners = new Set<(status: LinkStatus, detail: string) => void>();
const connectListeners = new Set<() => void>();
/** Rooms this page wants, counted, so they are joined again after each reconnect. */
const tubeViews = new Map<string, number>();
const jobViews = new Map<number, number>();
let retryTimer: ReturnType<typeof setTimeout> | undefined;
let wanted = false;

function setStatus(status: LinkStatus, detail = ''): void {
  for (const listener of statusListeners) listener(status, detail);
}

function looksUnauthorized(message: string): boolean {
  return /unauthori[sz]ed|forbidden|token|401/i.test(message);
}

function joinTube(name: string): void {
  socket.timeout(ACK_TIMEOUT_MS).emit('tube:view', name, (err, result) => {
    if (err !== null && err !== undefined) return; // the next reconnect joins again
    if (!result.ok) console.warn(`tube:view ${name}: ${result.error}`);
  });
}

function joinJob(id: number): void {
  socket.timeout(ACK_TIMEOUT_MS).emit('job:view', id, (err, result) => {
    if (err !== null && err !== undefined) return;
    if (!result.ok) console.warn(`job:view ${id}: ${result.error}`);
  });
}

function joinConnections(): void {
  socket.timeout(ACK_TIMEOUT_MS).emit('connections:view', () => undefined);
}

/** Pages looking at the connections list (pushed once a second while any is open). */
let connectionViews = 0;

socket.on('connect', () => {
  setStatus('connected');
  for (const name of tubeViews.keys()) joinTube(name);
  for (const id of jobViews.keys()) joinJob(id);
  if (connectionViews > 0) joinConnections();
  for (const listener of connectListeners) listener();
});

socket.on('disconnect', (reason) => {
  if (reason === 'io client disconnect') return;
  setStatus('disconnected', reason);
  // 'io server disconnect' (kicked by the server) is not retried by socket.io itself.
  if (reason === 'io server disconnect' && wanted) scheduleRetry();
});

socket.on('connect_error', (error) => {
  if (socket.active) {
    setStatus('disconnected', error.message); // transport trouble: socket.io keeps retrying
    return;
  }
  if (looksUnauthorized(error.message)) {
    setStatus('unauthorized', error.message);
    return;
  }
  setStatus('disconnected', error.message);
  scheduleRetry();
});

socket.io.on('reconnect_attempt', () => setStatus('connecting'));

function scheduleRetry(): void {
  clearTimeout(retryTimer);
  retryTimer = setTimeout(() => {
    if (wanted && !socket.connected) socket.connect();
  }, RETRY_AFTER_REFUSAL_MS);
}

/** (Re)connects with this token (null: none). */
export function connectSocket(token: string | null): void {
  wanted = true;
  clearTimeout(retryTimer);
  socket.auth = token === null ? {} : { token };
  if (socket.connected || socket.active) socket.disconnect();
  setStatus('connecting');
  socket.connect();
}

export function disconnectSocket(): void {
  wanted = false;
  clearTimeout(retryTimer);
  socket.disconnect();
  setStatus('disconnected', 'signed out');
}

/** Subscribes to a server event; returns the unsubscribe function. */
export function onServerEvent<E extends keyof ServerToClientEvents>(
  event: E,
  handler: ServerToClientEvents[E],
): () => void {
  // socket.io's listener types are keyed the same way; the cast only widens the key to its union.
  const target = socket as unknown as {
    on(event: E, handler: ServerToClientEvents[E]): void;
    off(event: E, handler: ServerToClientEvents[E]): void;
  };
  target.on(event, handler);
  return () => target.off(event, handler);
}

export function onLinkStatus(listener: (status: LinkStatus, detail: string) => void): () => void {
  statusListeners.add(listener);
  return () => statusListeners.delete(listener);
}

/** Called on every successful connect (the first and each reconnect): time to refetch what is shown. */
export function onConnected(listener: () => void): () => void {
  connectListeners.add(listener);
  return () => connectListeners.delete(listener);
}

/** Joins a tube's room while the returned function has not been called. */
export function viewTube(name: string): () => void {
  const count = tubeViews.get(name) ?? 0;
  tubeViews.set(name, count + 1);
  if (count === 0 && socket.connected) joinTube(name);
  return () => {
    const left = (tubeViews.get(name) ?? 1) - 1;
    if (left > 0) {
      tubeViews.set(name, left);
      return;
    }
    tubeViews.delete(name);
    if (socket.connected) socket.emit('tube:leave', name);
  };
}

/** Joins a job's room while the returned function has not been called. */
export function viewConnections(): () => void {
  connectionViews++;
  if (connectionViews === 1 && socket.connected) joinConnections();
  return () => {
    connectionViews--;
    if (connectionViews === 0 && socket.connected) socket.emit('connections:leave');
  };
}

export function viewJob(id: number): () => void {
  const count = jobViews.get(id) ?? 0;
  jobViews.set(id, count + 1);
  if (count === 0 && socket.connected) joinJob(id);
  return () => {
    const left = (jobViews.get(id) ?? 1) - 1;
    if (left > 0) {
      jobViews.set(id, left);
      return;
    }
    jobViews.delete(id);
    if (socket.connected) socket.emit('job:leave', id);
  };
}
