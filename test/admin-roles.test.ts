/**
 * Dashboard roles. The route table: every route the admin server registers has a guard naming
 * its role first (walked in Express's router stack of the real app, so a route added without one
 * fails here); then, against a real server process with one user of each role, every route of
 * that table answers 403 to exactly the roles below the one it names, read-only mode makes
 * everyone a viewer, the admin token stays an admin, socket.io signs in the same way, SIGHUP
 * reloads the users file, and a bad users file stops the start with a usage error.
 */
import { localAutomationStores, startAutomation } from '../server/automation/automation.js';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import express, { type Router } from 'express';
import { io as ioClient, type Socket } from 'socket.io-client';
import { describe, expect, it } from 'vitest';
import { API } from '../shared/api.js';
import type { ApiErrorDto, SignedInDto } from '../shared/dto.js';
import type { ClientToServerEvents, ServerToClientEvents } from '../shared/events.js';
import type { JobHistoryDto } from '../shared/history.js';
import { ROLES, roleAllows, type Role } from '../shared/roles.js';
import { guardSpec, type RouteRole } from '../server/admin/access.js';
import { attachAdmin, type AdminContext } from '../server/admin/app.js';
import { MemoryAuditLog } from '../server/common/audit-entries.js';
import { MinuteHistory } from '../server/admin/minute-history.js';
import { StatsHistory } from '../server/admin/stats-history.js';
import { AdminUsers } from '../server/admin/users.js';
import { parseCommandLine } from '../server/cli.js';
import { systemClock } from '../server/engine/clock.js';
import { Engine } from '../server/engine/engine.js';
import { immediateDurability } from '../server/engine/journal.js';
import { LocalGearmanRegistry } from '../server/gearman/registry.js';
import { GearmanView } from '../server/gearman/view.js';
import { createLogger } from '../server/logger.js';
import { MemoryOperations } from '../server/operations/memory-operations.js';
import { TEST_SERVER_INFO } from '../server/testing.js';
import { adminFixture } from './support/admin-fixture.js';
import { api, type AdminServerProcess } from './support/admin-server.js';
import { TEST_USERS, userNamed, writeUsersFile } from './support/admin-users.js';
import { BEANPOLE_BIN } from './support/servers.js';

const fixture = adminFixture();
const ROOT = path.resolve(import.meta.dirname, '..');
const ADMIN_TOKEN = 'the-admin-token-31d4';

interface TableRoute {
  method: string;
  path: string | RegExp;
  /** The route's guard, or undefined when its first handler is not one. */
  role: RouteRole | undefined;
  audited: boolean;
}

interface Layer {
  route?: { path: string | RegExp; methods: Record<string, boolean>; stack: { handle: unknown }[] };
  handle: unknown;
}

/** Every route in an Express router's stack, sub-routers included. */
function routeTable(router: { stack: Layer[] }): TableRoute[] {
  const out: TableRoute[] = [];
  for (const layer of router.stack) {
    if (layer.route !== undefined) {
      const spec = guardSpec(layer.route.stack[0]?.handle);
      for (const method of Object.keys(layer.route.methods)) {
        if (method === '_all') continue;
        out.push({ method: method.toUpperCase(), path: layer.route.path, role: spec?.role, audited: spec?.audit !== undefined });
      }
    } else {
      const sub = layer.handle as { stack?: Layer[] };
      if (Array.isArray(sub.stack)) out.push(...routeTable(sub as { stack: Layer[] }));
    }
  }
  return out;
}

/** The admin app as the server builds it, with every route group on (Gearman, cluster, the UI's files). */
function buildAdminApp(): { routes: TableRoute[]; close: () => Promise<void> } {
  const log = createLogger(0);
  log.level = 'silent';
  const ops = new MemoryOperations({ engine: new Engine({ clock: systemClock }), durability: immediateDurability, onActivity: () => undefined });
  const gearmanOps = new MemoryOperations({ engine: new Engine({ clock: systemClock }), durability: immediateDurability, onActivity: () => undefined });
  const options = parseCommandLine(['--admin-token', ADMIN_TOKEN]);
  if (options.kind !== 'run' || options.options.admin === null) throw new Error('bad test options');
  const ctx: AdminContext = {
    ops,
    info: TEST_SERVER_INFO,
    gearman: { view: new GearmanView(gearmanOps, new LocalGearmanRegistry(gearmanOps, 'test')), ops: gearmanOps },
    log,
    options: options.options.admin,
    uiDir: path.join(ROOT, 'dist', 'ui'),
    binlog: false,
    historyDir: null,
    cluster: { nodeId: () => 1, nodes: () => Promise.resolve([]), leaseMs: 5000, now: Date.now },
    audit: new MemoryAuditLog(),
    automation: startAutomation({ ops, log, stores: localAutomationStores(null, log), tickMs: 3_600_000 }),
  };
  const server = http.createServer();
  // The app is the first 'request' listener added (socket.io wraps it afterwards).
  let app: { router: { stack: Layer[] } } | undefined;
  server.on('newListener', (event: string, listener: unknown) => {
    if (event === 'request') app ??= listener as { router: { stack: Layer[] } };
  });
  const attached = attachAdmin(server, ctx, new StatsHistory(ops, TEST_SERVER_INFO), new MinuteHistory(ops, null, log), new AdminUsers(ctx.options, log));
  return {
    routes: routeTable(app!.router),
    close: () => {
      ctx.automation?.stop();
      return attached.close();
    },
  };
}

/** A concrete URL for a route path: each parameter gets a value that names nothing that exists. */
function concretePath(p: string): string {
  return p
    .replace(':name', 'roles-t')
    .replace(':jid', '7')
    .replace(':id', '424242')
    .replace(':handle', 'H%3Ax%3A1')
    .replace(':token', 'abc');
}

describe('the route table', () => {
  it('walks a router with a route that has no guard and reports it (the check below can fail)', () => {
    const router: Router = express.Router();
    router.get('/api/unguarded', (_req, res) => res.end());
    expect(routeTable(router as unknown as { stack: Layer[] })).toEqual([{ method: 'GET', path: '/api/unguarded', role: undefined, audited: false }]);
  });

  it('every route of the admin server starts with a guard naming its role, and every change is audited', async () => {
    const { routes, close } = buildAdminApp();
    try {
      // Every group is there: the core API, Gearman, attached servers, the cluster, the audit log, the UI.
      for (const p of [API.stats, API.gearman, API.external, API.clusterNodes, API.audit, API.me, '/metrics', '/healthz', API.config]) {
        expect(routes.some((r) => r.path === p), p).toBe(true);
      }
      expect(routes.length).toBeGreaterThan(50);
      const unguarded = routes.filter((r) => r.role === undefined).map((r) => `${r.method} ${String(r.path)}`);
      expect(unguarded).toEqual([]);
      // Public: only what a browser needs before signing in.
      const publicRoutes = routes.filter((r) => r.role === 'public').map((r) => `${r.method} ${String(r.path)}`);
      expect(publicRoutes.sort()).toEqual(['GET /^(?!\\/api\\/|\\/socket\\.io\\/).*/', 'GET /api/config', 'GET /healthz']);
      // A change needs more than a viewer and is audited; the one exception ends a search early.
      for (const r of routes.filter((x) => x.method !== 'GET')) {
        if (r.path === '/api/search/:token') {
          expect(r.role).toBe('viewer');
          continue;
        }
        expect(r.role === 'operator' || r.role === 'admin', `${r.method} ${String(r.path)}`).toBe(true);
        expect(r.audited, `${r.method} ${String(r.path)} is audited`).toBe(true);
      }
      // Reads are for everyone signed in.
      for (const r of routes.filter((x) => x.method === 'GET')) expect(['viewer', 'public']).toContain(r.role);
    } finally {
      await close();
    }
  });
});

describe('roles on a real server', () => {
  const start = async (extra: string[] = []): Promise<AdminServerProcess> => {
    const file = writeUsersFile(path.join(fixture.tmpDir(), 'users.json'));
    return fixture.start(['--admin-users', file, '--admin-token', ADMIN_TOKEN, '--gearman-listen', '127.0.0.1', '--gearman-port', '0', ...extra]);
  };
  const routes = (): TableRoute[] => {
    const { routes: all, close } = buildAdminApp();
    void close();
    return all.filter((r) => r.role !== 'public' && typeof r.path === 'string' && r.path !== API.clusterNodes);
  };

  it('each route answers 403 to exactly the roles below the one it names', async () => {
    const s = await start();
    const table = routes();
    for (const route of table) {
      for (const user of TEST_USERS) {
        const res = await api(s.url, concretePath(route.path as string), { method: route.method, token: user.token });
        const what = `${user.role} ${route.method} ${String(route.path)}: ${res.status} ${res.text.slice(0, 200)}`;
        if (roleAllows(user.role, route.role as Role)) {
          expect(res.status, what).not.toBe(403);
          expect(res.status, what).not.toBe(401);
        } else {
          expect(res.status, what).toBe(403);
          expect((res.json as ApiErrorDto).error, what).toBe('FORBIDDEN');
        }
      }
      // Without a token, or with a wrong one: nobody.
      expect((await api(s.url, concretePath(route.path as string), { method: route.method })).status).toBe(401);
      expect((await api(s.url, concretePath(route.path as string), { method: route.method, token: 'nobody' })).status).toBe(401);
    }
  }, 60_000);

  it('a viewer reads, an operator acts on jobs and tubes, only an admin changes settings', async () => {
    const s = await start();
    const [vera, otto, ada] = ['vera', 'otto', 'ada'].map(userNamed) as [typeof TEST_USERS[0], typeof TEST_USERS[0], typeof TEST_USERS[0]];
    expect((await api(s.url, API.tubeJobs('t'), { json: { body: 'x' }, token: vera.token })).status).toBe(403);
    const put = await api(s.url, API.tubeJobs('t'), { json: { body: 'x' }, token: otto.token });
    expect(put.status).toBe(201);
    const id = (put.json as { id: number }).id;
    expect((await api(s.url, API.job(id), { token: vera.token })).status).toBe(200);
    expect((await api(s.url, API.job(id), { method: 'DELETE', token: vera.token })).status).toBe(403);
    expect((await api(s.url, API.job(id))).status).toBe(401);
    expect((await api(s.url, API.tubeSettings('t'), { method: 'PUT', json: { deadLetterAfter: 3 }, token: otto.token })).status).toBe(403);
    expect((await api(s.url, API.tubeSettings('t'), { method: 'PUT', json: { deadLetterAfter: 3 }, token: ada.token })).status).toBe(200);
    // The job's history names the user who changed it.
    expect((await api(s.url, API.job(id), { method: 'PATCH', json: { priority: 7 }, token: otto.token })).status).toBe(200);
    const history = (await api(s.url, API.jobHistory(id), { token: vera.token })).json as JobHistoryDto;
    expect(history.events.at(-1)).toMatchObject({ kind: 'edit', actor: { via: 'dashboard', user: 'otto' } });
    expect((await api(s.url, API.job(id), { method: 'DELETE', token: otto.token })).status).toBe(204);
    expect((await api(s.url, '/metrics', { token: vera.token })).status).toBe(200);
    for (const user of TEST_USERS) {
      expect((await api(s.url, API.me, { token: user.token })).json).toEqual({ user: user.name, role: user.role } satisfies SignedInDto);
    }
    // The admin token stays an admin beside the users.
    expect((await api(s.url, API.me, { token: ADMIN_TOKEN })).json).toEqual({ user: '--admin-token', role: 'admin' });
    expect((await api(s.url, API.tubeSettings('t'), { method: 'PUT', json: { deadLetterAfter: null }, token: ADMIN_TOKEN })).status).toBe(200);
    expect((await api(s.url, API.config)).json).toMatchObject({ tokenRequired: true, readOnly: false });
  });

  it('--admin-read-only: every role is a viewer (changes answer READ_ONLY), reads still work', async () => {
    const s = await start(['--admin-read-only']);
    const changes = routes().filter((r) => r.role !== 'viewer');
    for (const token of [...TEST_USERS.map((u) => u.token), ADMIN_TOKEN]) {
      for (const route of changes) {
        const res = await api(s.url, concretePath(route.path as string), { method: route.method, token });
        expect(res.status, `${route.method} ${String(route.path)}`).toBe(403);
        // A role that could do it elsewhere is told the dashboard is read-only; one that could not, that it lacks the role.
        const user = TEST_USERS.find((u) => u.token === token);
        const allowedOtherwise = user === undefined || roleAllows(user.role, route.role as Role);
        expect((res.json as ApiErrorDto).error).toBe(allowedOtherwise ? 'READ_ONLY' : 'FORBIDDEN');
      }
      expect((await api(s.url, API.stats, { token })).status).toBe(200);
      expect(((await api(s.url, API.me, { token })).json as SignedInDto).role).toBe('viewer');
    }
  }, 60_000);

  it('socket.io: a user signs in with their token, a wrong one is refused; events need their role; unknown ones are refused', async () => {
    const s = await start();
    const refused = ioClient(s.url, { transports: ['websocket'], auth: { token: 'nobody' }, reconnection: false });
    const error = await new Promise<Error>((resolve) => refused.once('connect_error', resolve));
    expect(error.message).toBe('unauthorized');
    refused.close();

    const viewer: Socket<ServerToClientEvents, ClientToServerEvents> = ioClient(s.url, { transports: ['websocket'], auth: { token: userNamed('vera').token }, reconnection: false });
    try {
      await new Promise<void>((resolve, reject) => {
        viewer.once('snapshot', () => resolve());
        viewer.once('connect_error', reject);
      });
      expect(await viewer.timeout(2000).emitWithAck('tube:view', 'default')).toEqual({ ok: true });
      const unknown = viewer as unknown as { timeout(ms: number): { emitWithAck(event: string, ...args: unknown[]): Promise<unknown> } };
      expect(await unknown.timeout(2000).emitWithAck('job:delete', 1)).toEqual({ ok: false, error: 'unknown event job:delete' });
    } finally {
      viewer.close();
    }
  });

  it('SIGHUP reloads the users file: new users sign in, removed ones are out (their sockets too); a bad file keeps the old users', async () => {
    const file = writeUsersFile(path.join(fixture.tmpDir(), 'users.json'));
    const s = await fixture.start(['--admin-users', file]);
    const vera = userNamed('vera');
    const otto = userNamed('otto');
    const socket = ioClient(s.url, { transports: ['websocket'], auth: { token: vera.token }, reconnection: false });
    await new Promise<void>((resolve) => socket.once('snapshot', () => resolve()));
    const disconnected = new Promise<string>((resolve) => socket.once('disconnect', resolve));

    writeUsersFile(file, [otto, { name: 'nina', token: 'nina-token-1', role: 'viewer' }]);
    s.process.kill('SIGHUP');
    await expect.poll(async () => (await api(s.url, API.me, { token: 'nina-token-1' })).status, { timeout: 5000 }).toBe(200);
    expect((await api(s.url, API.me, { token: vera.token })).status).toBe(401);
    expect(await disconnected).toBe('io server disconnect');
    socket.close();

    writeFileSync(file, '{"users": [{"name": "x", "token_sha256": "abc", "role": "viewer"}]}');
    s.process.kill('SIGHUP');
    await expect.poll(() => s.stderr(), { timeout: 5000 }).toMatch(/users\[0\]\.token_sha256 \(x\): want 64 hex digits.*keeping the 2 users loaded before/);
    expect((await api(s.url, API.me, { token: 'nina-token-1' })).status).toBe(200);
    expect(s.process.exitCode).toBeNull();
  });
});

describe('a bad users file', () => {
  const run = (file: string): { status: number | null; stderr: string } => {
    const r = spawnSync(process.execPath, [BEANPOLE_BIN, '-l', '127.0.0.1', '-p', '0', '--admin-port', '0', '--no-gearman', '--admin-users', file], { encoding: 'utf8', timeout: 10_000 });
    return { status: r.status, stderr: r.stderr };
  };
  const cases: [string, string, RegExp][] = [
    ['not JSON', '{"users": [', /not JSON/],
    ['no list', '{"users": {}}', /"users" must be a list/],
    ['an unknown key', '{"users": [], "admins": []}', /unknown key "admins"/],
    ['a short hash', `{"users": [{"name": "ana", "token_sha256": "12ab", "role": "viewer"}]}`, /users\[0\]\.token_sha256 \(ana\): want 64 hex digits/],
    ['an unknown role', `{"users": [{"name": "ana", "token_sha256": "${'a'.repeat(64)}", "role": "root"}]}`, new RegExp(`users\\[0\\]\\.role \\(ana\\): want one of ${ROLES.join(', ')}`)],
    ['a name twice', `{"users": [{"name": "ana", "token_sha256": "${'a'.repeat(64)}", "role": "viewer"}, {"name": "ana", "token_sha256": "${'b'.repeat(64)}", "role": "admin"}]}`, /users\[1\]\.name: ana is listed twice/],
    ['one token for two users', `{"users": [{"name": "ana", "token_sha256": "${'a'.repeat(64)}", "role": "viewer"}, {"name": "bo", "token_sha256": "${'A'.repeat(64)}", "role": "admin"}]}`, /users\[1\]\.token_sha256 \(bo\): another user has the same token/],
  ];
  it.each(cases)('%s: exits with a usage error naming the problem', (_label, text, message) => {
    const file = path.join(fixture.tmpDir(), 'users.json');
    writeFileSync(file, text);
    const r = run(file);
    expect(r.status).toBe(5);
    expect(r.stderr).toMatch(new RegExp(`^beanpole: --admin-users ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: `));
    expect(r.stderr).toMatch(message);
  });

  it('a missing file: exits with a usage error', () => {
    const r = run(path.join(fixture.tmpDir(), 'none.json'));
    expect(r.status).toBe(5);
    expect(r.stderr).toMatch(/--admin-users .*none\.json: cannot read it: ENOENT/);
  });

  it('a users file alone lets the dashboard listen beyond loopback (its users need tokens)', () => {
    const file = writeUsersFile(path.join(fixture.tmpDir(), 'users.json'));
    const r = parseCommandLine(['--admin-listen', '0.0.0.0', '--admin-users', file]);
    expect(r.kind).toBe('run');
    expect(parseCommandLine(['--admin-listen', '0.0.0.0']).kind).toBe('usage-error');
  });
});
