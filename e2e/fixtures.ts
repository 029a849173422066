/**
 * Playwright fixtures for the dashboard specs.
 *
 * - `serverArgs` (option, default []): extra Beanpole flags, e.g. ['--admin-read-only'] or
 *   ['--admin-token', 'T'] (set with `test.use({ serverArgs: [...] })`).
 * - `server`: a fresh Beanpole process per test (beanstalkd protocol on an ephemeral port of
 *   127.0.0.1, dashboard on another one picked by the server), stopped after the test.
 * - `baseURL`: the dashboard's URL, so `page.goto('/tubes')` opens this test's server.
 * - `tcp()`: a beanstalkd client over TCP (a producer or a worker); closed after the test.
 * - Any browser dialog (alert/confirm/prompt) fails the test: the dashboard never opens one, so
 *   one can only come from injected script.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test as base, expect, type Page } from '@playwright/test';
import { startAdminServer, yamlList, yamlMap, type AdminServerProcess } from '../test/support/admin-server.js';
import { RawClient } from '../test/support/raw-client.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface PutOptions {
  priority?: number;
  delay?: number;
  ttr?: number;
}

export interface Reserved {
  id: number;
  body: Buffer;
}

/** A beanstalkd client speaking the protocol byte for byte (wraps test/support/raw-client). */
export class Beanstalk {
  constructor(readonly raw: RawClient) {}

  /** Sends one command line and returns the reply's first line (and body, if any). */
  async command(line: string, timeoutMs = 5000): Promise<string> {
    return this.raw.call(`${line}\r\n`, timeoutMs);
  }

  private async expectLine(line: string, want: RegExp): Promise<RegExpExecArray> {
    const reply = await this.command(line);
    const m = want.exec(reply);
    if (m === null) throw new Error(`${line}: unexpected reply ${JSON.stringify(reply)}`);
    return m;
  }

  async use(tube: string): Promise<void> {
    await this.expectLine(`use ${tube}`, /^USING /);
  }

  async watch(tube: string): Promise<void> {
    await this.expectLine(`watch ${tube}`, /^WATCHING \d+\r\n$/);
  }

  async ignore(tube: string): Promise<void> {
    await this.expectLine(`ignore ${tube}`, /^WATCHING \d+\r\n$/);
  }

  /** Watches exactly `tube` (ignores every other watched tube). */
  async watchOnly(tube: string): Promise<void> {
    await this.watch(tube);
    for (const other of yamlList(await this.command('list-tubes-watched'))) {
      if (other !== tube) await this.ignore(other);
    }
  }

  /** Puts into the used tube; returns the new job's id. */
  async put(body: string | Buffer, opts: PutOptions = {}): Promise<number> {
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const head = `put ${opts.priority ?? 1024} ${opts.delay ?? 0} ${opts.ttr ?? 60} ${bytes.length}\r\n`;
    const reply = await this.raw.call(Buffer.concat([Buffer.from(head, 'latin1'), bytes, Buffer.from('\r\n', 'latin1')]));
    const m = /^INSERTED (\d+)\r\n$/.exec(reply);
    if (m === null) throw new Error(`put: unexpected reply ${JSON.stringify(reply)}`);
    return Number(m[1]);
  }

  /** reserve-with-timeout; the body as exact bytes. */
  async reserve(timeoutSeconds = 5): Promise<Reserved> {
    const reply = await this.raw.call(`reserve-with-timeout ${timeoutSeconds}\r\n`, (timeoutSeconds + 5) * 1000);
    return parseJob(reply, 'RESERVED');
  }

  async bury(id: number, priority = 1024): Promise<void> {
    await this.expectLine(`bury ${id} ${priority}`, /^BURIED\r\n$/);
  }

  async delete(id: number): Promise<void> {
    await this.expectLine(`delete ${id}`, /^DELETED\r\n$/);
  }

  async release(id: number, priority = 1024, delay = 0): Promise<void> {
    await this.expectLine(`release ${id} ${priority} ${delay}`, /^RELEASED\r\n$/);
  }

  /** peek <id>; null when NOT_FOUND. */
  async peek(id: number): Promise<Reserved | null> {
    const reply = await this.command(`peek ${id}`);
    if (reply === 'NOT_FOUND\r\n') return null;
    return parseJob(reply, 'FOUND');
  }

  async statsJob(id: number): Promise<Map<string, string>> {
    return yamlMap(await this.command(`stats-job ${id}`));
  }

  async statsTube(name: string): Promise<Map<string, string>> {
    return yamlMap(await this.command(`stats-tube ${name}`));
  }

  /** One stats-tube field as a number (for expect.poll). */
  async tubeNumber(name: string, key: string): Promise<number> {
    const v = (await this.statsTube(name)).get(key);
    if (v === undefined) throw new Error(`stats-tube ${name}: no ${key}`);
    return Number(v);
  }

  close(): void {
    this.raw.destroy();
  }
}

function parseJob(reply: string, word: 'RESERVED' | 'FOUND'): Reserved {
  const eol = reply.indexOf('\r\n');
  const m = new RegExp(`^${word} (\\d+) (\\d+)$`).exec(reply.slice(0, eol));
  if (m === null) throw new Error(`expected ${word}, got ${JSON.stringify(reply)}`);
  const len = Number(m[2]);
  // RawClient hands the reply back as latin1, which maps bytes 1:1.
  const body = Buffer.from(reply.slice(eol + 2, eol + 2 + len), 'latin1');
  return { id: Number(m[1]), body };
}

interface Fixtures {
  server: AdminServerProcess;
  tcp: () => Promise<Beanstalk>;
}

interface Options {
  serverArgs: string[];
}

export const test = base.extend<Fixtures & Options>({
  serverArgs: [[], { option: true }],

  server: async ({ serverArgs }, use) => {
    if (!existsSync(path.join(ROOT, 'dist', 'ui', 'index.html')) || !existsSync(path.join(ROOT, 'dist', 'server', 'main.js'))) {
      throw new Error('dist/ is missing: run `npm run build` before the e2e tests');
    }
    const server = await startAdminServer(serverArgs);
    try {
      await use(server);
    } finally {
      await server.stop();
    }
  },

  baseURL: async ({ server }, use) => {
    await use(server.url);
  },

  tcp: async ({ server }, use) => {
    const clients: Beanstalk[] = [];
    await use(async () => {
      const client = new Beanstalk(await RawClient.connect(server.port));
      clients.push(client);
      return client;
    });
    for (const c of clients) c.close();
  },

  page: async ({ page }, use) => {
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(`${dialog.type()}: ${dialog.message()}`);
      void dialog.dismiss().catch(() => undefined);
    });
    await use(page);
    expect(dialogs, 'the page opened a dialog (injected script ran)').toEqual([]);
  },
});

export { expect };

/** Waits until the dashboard's live link is up. */
export async function expectLive(page: Page): Promise<void> {
  await expect(page.getByTestId('conn-status')).toHaveAttribute('data-state', 'connected', { timeout: 10_000 });
}

/** The dashboard path of a tube. */
export function tubePath(name: string, state?: string): string {
  return `/tubes/${encodeURIComponent(name)}${state === undefined ? '' : `?state=${state}`}`;
}
