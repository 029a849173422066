/** Assertions shared by the API and protocol tests (Vitest only: Playwright has its own expect). */
import { expect } from 'vitest';
import type { ApiResponse } from './admin-server.js';
import type { RawClient } from './raw-client.js';

/** A JSON answer with `status`; returns its body. */
export function expectOk<T>(res: ApiResponse, status = 200): T {
  expect(res.status, `${res.status} ${res.text.slice(0, 300)}`).toBe(status);
  expect(res.headers.get('content-type') ?? '').toMatch(/^application\/json/);
  return res.json as T;
}

/** Sends one command line and expects exactly this reply line. */
export async function expectLine(c: RawClient, cmd: string, want: string): Promise<void> {
  expect(await c.call(`${cmd}\r\n`), cmd).toBe(`${want}\r\n`);
}
