import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The house layering: shared imports nothing; the engine imports only shared; nothing imports
// the front doors' internals from the engine; and value imports form no cycles.
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface Edge {
  to: string;
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

function importsOf(file: string): Edge[] {
  const text = readFileSync(file, 'utf8');
  const edges: Edge[] = [];
  const re = /^(import|export)\s+(type\s+)?[^;]*?from\s+'([^']+)'/gms;
  for (const m of text.matchAll(re)) {
    const spec = m[3]!;
    if (!spec.startsWith('.')) continue;
    const target = path.resolve(path.dirname(file), spec.replace(/\.js$/, '.ts'));
    edges.push({ to: path.relative(ROOT, target), typeOnly: m[2] !== undefined });
  }
  return edges;
}

const files = [...sourceFiles(path.join(ROOT, 'server')), ...sourceFiles(path.join(ROOT, 'shared'))].map((f) =>
  path.relative(ROOT, f),
);
const graph = new Map(files.map((f) => [f, importsOf(path.join(ROOT, f))]));

describe('module layering', () => {
  it('shared/ imports nothing from the server', () => {
    for (const [file, edges] of graph) {
      if (!file.startsWith('shared/')) continue;
      for (const e of edges) expect(e.to.startsWith('shared/'), `${file} -> ${e.to}`).toBe(true);
    }
  });

  it('the engine imports only itself, server/common/ and shared/', () => {
    for (const [file, edges] of graph) {
      if (!file.startsWith('server/engine/')) continue;
      for (const e of edges) {
        expect(['server/engine/', 'server/common/', 'shared/'].some((p) => e.to.startsWith(p)), `${file} -> ${e.to}`).toBe(true);
      }
    }
  });

  it('server/common/ (what the engine and the stores both use: results, pages, ordered sets) imports only itself and shared/', () => {
    for (const [file, edges] of graph) {
      if (!file.startsWith('server/common/')) continue;
      for (const e of edges) expect(e.to.startsWith('server/common/') || e.to.startsWith('shared/'), `${file} -> ${e.to}`).toBe(true);
    }
  });

  it('the engine uses no sockets, file system or timers, and reads time only through its clock', () => {
    // clock.ts holds the one real clock, which the composition root injects.
    for (const file of files.filter((f) => f.startsWith('server/engine/') && !f.endsWith('/clock.ts'))) {
      const text = readFileSync(path.join(ROOT, file), 'utf8');
      expect(text, file).not.toMatch(/from 'node:(net|fs|http|dgram|timers)'|setTimeout|setInterval|setImmediate|Date\.now/);
    }
  });

  it('the front doors reach the engine only through the operations layer', () => {
    // Doors (beanstalk, admin API, metrics, later Gearman) call server/operations with plain
    // values and get snapshots back; none may import the engine, even for a type.
    for (const [file, edges] of graph) {
      if (!file.startsWith('server/protocol/') && !file.startsWith('server/admin/')) continue;
      for (const e of edges) expect(e.to.startsWith('server/engine/'), `${file} -> ${e.to}`).toBe(false);
    }
  });

  it("the operations interface hands out no engine objects: it imports from the engine only types of plain values", () => {
    // journal.ts (Durability), stats.ts (command names) and watchers.ts (JobUpdate, JobWatcher)
    // hold no engine records; the in-memory implementation is the only module under
    // server/operations that may use the engine itself.
    const allowed = ['server/engine/journal.ts', 'server/engine/stats.ts', 'server/engine/watchers.ts'];
    for (const e of graph.get('server/operations/operations.ts') ?? []) {
      if (e.to.startsWith('server/engine/')) expect(allowed, e.to).toContain(e.to);
    }
    for (const [file, edges] of graph) {
      if (!file.startsWith('server/operations/') || file === 'server/operations/memory-operations.ts' || file === 'server/operations/operations.ts') continue;
      for (const e of edges) expect(e.to.startsWith('server/engine/'), `${file} -> ${e.to}`).toBe(false);
    }
  });

  it('only the composition root imports a front door', () => {
    // Doors are thin: what they share (the Gearman domain, the operations) lives below them, so
    // nothing but server/main.ts (which wires doors to a backend) reaches into server/protocol/.
    for (const [file, edges] of graph) {
      if (file.startsWith('server/protocol/') || file === 'server/main.ts') continue;
      for (const e of edges) expect(e.to.startsWith('server/protocol/'), `${file} -> ${e.to}`).toBe(false);
    }
  });

  it('a store knows no door, and the dashboard knows no store', () => {
    const stores = ['server/cluster/', 'server/persistence/', 'server/operations/memory-operations.ts'];
    for (const [file, edges] of graph) {
      if (file.startsWith('server/cluster/')) {
        for (const e of edges) expect(e.to.startsWith('server/protocol/') || e.to.startsWith('server/admin/'), `${file} -> ${e.to}`).toBe(false);
      }
      if (file.startsWith('server/admin/')) {
        for (const e of edges) expect(stores.some((s) => e.to.startsWith(s)), `${file} -> ${e.to}`).toBe(false);
      }
    }
  });

  it('the Gearman domain (server/gearman/) imports no door, no store and no dashboard', () => {
    for (const [file, edges] of graph) {
      if (!file.startsWith('server/gearman/')) continue;
      for (const e of edges) {
        const outside = ['server/protocol/', 'server/cluster/', 'server/admin/', 'server/persistence/', 'server/engine/'];
        expect(outside.some((o) => e.to.startsWith(o)), `${file} -> ${e.to}`).toBe(false);
      }
    }
  });

  it('every folder of server/ imports only the layers below it', () => {
    // The house, bottom up. A new folder needs a row here, so nothing is added beside the design.
    const TOP = 'server/*.ts';
    const MAY_IMPORT: Record<string, readonly string[]> = {
      shared: [],
      'server/common': ['shared'],
      'server/engine': ['server/common', 'shared'],
      'server/operations': ['server/engine', 'server/common', 'shared'],
      'server/persistence': ['server/engine', 'server/common', 'shared'],
      'server/gearman': ['server/operations', 'server/common', 'shared'],
      'server/schedules': ['server/operations', 'server/common', 'shared'],
      'server/alerts': ['server/operations', 'server/common', 'shared'],
      'server/automation': ['server/schedules', 'server/alerts', 'server/operations', 'server/common', 'shared'],
      'server/policies': ['server/operations', 'server/common', 'shared'],
      'server/cluster': ['server/schedules', 'server/alerts', 'server/gearman', 'server/operations', 'server/engine', 'server/common', 'shared'],
      // TLS below the doors: Node's tls and the command line's options, nothing of the jobs.
      'server/tls': [TOP],
      // The --acl rules, once for both doors: they look a job's tube up through the operations.
      'server/acl': ['server/operations', 'server/common', 'shared'],
      'server/protocol': ['server/acl', 'server/tls', 'server/gearman', 'server/operations', 'server/common', 'shared', TOP],
      'server/admin': ['server/acl', 'server/tls', 'server/policies', 'server/automation', 'server/schedules', 'server/alerts', 'server/gearman', 'server/operations', 'server/common', 'shared', TOP],
      'server/backends': [
        'server/automation',
        'server/cluster',
        'server/persistence',
        'server/gearman',
        'server/operations',
        'server/engine',
        'server/common',
        'shared',
        TOP,
      ],
    };
    const folderOf = (file: string): string => {
      const parts = file.split('/');
      if (parts[0] === 'shared') return 'shared';
      return parts.length > 2 ? `${parts[0]}/${parts[1]}` : TOP;
    };
    for (const [file, edges] of graph) {
      const from = folderOf(file);
      if (from === TOP) continue; // main.ts wires everything; the other top-level files are checked below
      const allowed = MAY_IMPORT[from];
      expect(allowed, `${file}: a folder with no row in MAY_IMPORT`).toBeDefined();
      for (const e of edges) {
        const to = folderOf(e.to);
        if (to !== from) expect(allowed, `${file} -> ${e.to}`).toContain(to);
      }
    }
    // Top-level modules other than the composition root import no door, dashboard, store or backend.
    for (const [file, edges] of graph) {
      if (folderOf(file) !== TOP || file === 'server/main.ts') continue;
      for (const e of edges) {
        const to = folderOf(e.to);
        expect(['server/protocol', 'server/admin', 'server/cluster', 'server/persistence', 'server/backends'], `${file} -> ${e.to}`).not.toContain(to);
      }
    }
  });

  it('imports, type imports too, form no cycles', () => {
    // The engine's records, which name each other's types, share one file (engine/records.ts).
    const state = new Map<string, 'visiting' | 'done'>();
    const cycles: string[] = [];
    const visit = (file: string, trail: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'visiting') {
        cycles.push([...trail.slice(trail.indexOf(file)), file].join(' -> '));
        return;
      }
      state.set(file, 'visiting');
      for (const e of graph.get(file) ?? []) visit(e.to, [...trail, file]);
      state.set(file, 'done');
    };
    for (const file of files) visit(file, []);
    expect(cycles).toEqual([]);
  });

  it('schedules and alerts import no door, no store of jobs, no dashboard and no engine', () => {
    // They reach the jobs through the operations (a schedule's put is the API's put); their own
    // stores in PostgreSQL live in server/cluster/, which imports them, not the reverse.
    for (const [file, edges] of graph) {
      if (!file.startsWith('server/schedules/') && !file.startsWith('server/alerts/')) continue;
      for (const e of edges) {
        const outside = ['server/protocol/', 'server/cluster/', 'server/admin/', 'server/persistence/', 'server/engine/', 'server/main.ts'];
        expect(outside.some((o) => e.to.startsWith(o)), `${file} -> ${e.to}`).toBe(false);
      }
    }
  });

  it('schedules and alerts read time only as given (tick(now), an injected Timer), so tests use fake time', () => {
    for (const file of files.filter((f) => f.startsWith('server/schedules/') || f.startsWith('server/alerts/'))) {
      const text = readFileSync(path.join(ROOT, file), 'utf8');
      expect(text, file).not.toMatch(/setTimeout|setInterval|Date\.now|new Date\(\)/);
    }
  });

  it('the dashboard reaches schedules and alerts through their services, never their stores', () => {
    const stores = ['server/schedules/memory-schedule-store.ts', 'server/schedules/schedule-file.ts', 'server/alerts/memory-alert-store.ts', 'server/alerts/alert-file.ts'];
    for (const [file, edges] of graph) {
      if (!file.startsWith('server/admin/')) continue;
      for (const e of edges) expect(stores, `${file} -> ${e.to}`).not.toContain(e.to);
    }
  });

  it('value imports have no cycles', () => {
    const state = new Map<string, 'visiting' | 'done'>();
    const cycles: string[] = [];
    const visit = (file: string, trail: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'visiting') {
        cycles.push([...trail.slice(trail.indexOf(file)), file].join(' -> '));
        return;
      }
      state.set(file, 'visiting');
      for (const e of graph.get(file) ?? []) if (!e.typeOnly) visit(e.to, [...trail, file]);
      state.set(file, 'done');
    };
    for (const file of files) visit(file, []);
    expect(cycles).toEqual([]);
  });
});
