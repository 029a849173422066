/**
 * Databases for cluster-mode tests: each test (or differential case) gets an empty database of
 * its own in the run's throwaway PostgreSQL (inject('pgUrl'), postgres-global-setup.ts), so ids
 * start at 1 and nothing leaks between cases, as with a fresh in-memory server.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** Creates an empty database on the server at `serverUrl`; returns its URL. */
export async function freshDatabase(serverUrl: string, label: string): Promise<string> {
  const slug = label.toLowerCase().replace(/[^a-z0-9]+/g, '_').slice(0, 40);
  const name = `bp_${slug}_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** `--cluster @test` in a flag list becomes `--cluster <a fresh database>`. */
export async function withFreshDatabase(args: readonly string[], serverUrl: string | null, label: string): Promise<string[]> {
  const i = args.indexOf('@test');
  if (i < 0) return [...args];
  if (serverUrl === null) throw new Error('--cluster @test needs PostgreSQL (apt-get install postgresql); none was started for this run');
  const out = [...args];
  out[i] = await freshDatabase(serverUrl, label);
  return out;
}
