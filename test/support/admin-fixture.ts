/**
 * A test file's servers and clients, stopped and closed after each test: `start()` a Beanpole with
 * its dashboard (admin-server.ts), `tcp(server)` a beanstalkd client to it, `tmpDir()` a folder
 * removed afterwards. Call once at the top of a Vitest file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';
import { startAdminServer, type AdminServerProcess } from './admin-server.js';
import { RawClient } from './raw-client.js';

export interface AdminFixture {
  start(args?: readonly string[]): Promise<AdminServerProcess>;
  tcp(server: AdminServerProcess): Promise<RawClient>;
  tmpDir(): string;
}

export function adminFixture(): AdminFixture {
  const servers: AdminServerProcess[] = [];
  const clients: RawClient[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy();
    await Promise.all(servers.splice(0).map((s) => s.stop()));
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  return {
    async start(args = []) {
      const s = await startAdminServer(args);
      servers.push(s);
      return s;
    },
    async tcp(server) {
      const c = await RawClient.connect(server.port);
      clients.push(c);
      return c;
    },
    tmpDir() {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-test-'));
      dirs.push(dir);
      return dir;
    },
  };
}
