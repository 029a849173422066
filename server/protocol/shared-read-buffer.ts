import type { Socket } from 'node:net';
import { viewOf } from './buffer-view.js';

/**
 * Every client socket of the process reads into this one buffer. By default Node allocates a
 * fresh 64 KiB backing store for every read, shrinks it to the bytes read, wraps it in an
 * ArrayBuffer and a Buffer, and pushes it through the Readable stream machinery before a 'data'
 * listener sees it. For a lone client sending one short command per round trip, that allocation
 * and bookkeeping was a large part of the server's work per command. Reads are synchronous on
 * the one JavaScript thread (libuv reads one socket, calls back, then reads the next), so one
 * buffer serves every socket: the bytes are valid until the callback returns.
 */
const SHARED = Buffer.allocUnsafe(64 * 1024);

/** Called with the bytes of one read; they are valid only during the call. */
export type TransientBytes = (chunk: Buffer) => void;

/**
 * The socket's own slots for a caller's read buffer: Node fills them from the `onread` option
 * of `new net.Socket` and `socket.connect`, but a socket that a server accepted never gets
 * that option. Found by their names, as this Node version spells them; when they are not there
 * (another Node), the caller falls back to 'data' events.
 */
interface ReadSlots {
  buffer: symbol;
  callback: symbol;
  generator: symbol;
}

let slots: ReadSlots | null | undefined;

function readSlotsOf(socket: Socket): ReadSlots | null {
  if (slots !== undefined) return slots;
  const byName = new Map(Object.getOwnPropertySymbols(socket).map((s) => [s.description, s]));
  const buffer = byName.get('kBuffer');
  const callback = byName.get('kBufferCb');
  const generator = byName.get('kBufferGen');
  slots = buffer === undefined || callback === undefined || generator === undefined ? null : { buffer, callback, generator };
  return slots;
}

interface UserBufferHandle {
  useUserBuffer(buf: Uint8Array): void;
}

function hasUserBuffer(handle: unknown): handle is UserBufferHandle {
  return typeof handle === 'object' && handle !== null && typeof (handle as Partial<UserBufferHandle>).useUserBuffer === 'function';
}

/**
 * Makes `socket` deliver what it reads to `onBytes` through the shared buffer instead of 'data'
 * events; returns false (and changes nothing) when this Node does not offer that. Pausing,
 * resuming, 'end' and 'close' work as before: Node's socket handles a caller's read buffer in
 * each of them.
 */
export function readThroughSharedBuffer(socket: Socket, onBytes: TransientBytes): boolean {
  const s = readSlotsOf(socket);
  const handle: unknown = (socket as unknown as { _handle: unknown })._handle;
  if (s === null || !hasUserBuffer(handle)) return false;
  const own = socket as unknown as Record<symbol, unknown>;
  if (own[s.buffer] !== null || own[s.callback] !== null) return false; // already reading into a buffer of its own
  own[s.buffer] = SHARED;
  own[s.generator] = null;
  own[s.callback] = (n: number): void => onBytes(viewOf(SHARED, 0, n));
  handle.useUserBuffer(SHARED);
  return true;
}
