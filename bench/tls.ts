/**
 * TLS for the tls-* scenarios: a throwaway CA and a server certificate for 127.0.0.1 (made once
 * per bench process with the openssl CLI, removed at exit), and stunnel in front of beanstalkd,
 * the way beanstalkd users add TLS today (Debian package stunnel4).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findOnPath } from './paths.js';

/** The server's certificate and key files, and the CA a client trusts (PEM text). */
export interface BenchCertificates {
  cert: string;
  key: string;
  caPem: string;
}

let made: BenchCertificates | null = null;
let dir: string | null = null;
process.on('exit', () => {
  if (dir !== null) rmSync(dir, { recursive: true, force: true });
});

/** P-256 keys, TLS 1.3 (both servers' default): what a deployment would pick today. */
export function benchCertificates(): BenchCertificates {
  if (made !== null) return made;
  dir = mkdtempSync(path.join(os.tmpdir(), 'bench-tls-'));
  const f = (name: string): string => path.join(dir!, name);
  const openssl = (args: string[]): void => void execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl(['req', '-x509', ...newKey, '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=bench CA']);
  openssl(['req', ...newKey, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=127.0.0.1']);
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl(['x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', '1', '-out', f('server.pem'), '-days', '2', '-extfile', f('server.ext')]);
  made = { cert: f('server.pem'), key: f('server.key'), caPem: readFileSync(f('ca.pem'), 'utf8') };
  return made;
}

/** stunnel's path (stunnel4 installs both names), or null. */
export function stunnelPath(): string | null {
  return findOnPath('stunnel4') ?? findOnPath('stunnel');
}

/**
 * stunnel's configuration: TLS on `acceptPort`, plaintext to beanstalkd on `connectPort`, in the
 * foreground, no PID file, errors only; the bench reads its CPU time from /proc.
 */
export function stunnelConfig(certs: BenchCertificates, acceptPort: number, connectPort: number): string {
  return [
    'foreground = yes',
    'pid =',
    'debug = 3',
    '[beanstalkd]',
    `accept = 127.0.0.1:${acceptPort}`,
    `connect = 127.0.0.1:${connectPort}`,
    `cert = ${certs.cert}`,
    `key = ${certs.key}`,
    // Like the Beanpole side: Nagle off both ways, or small replies wait for ACKs.
    'socket = l:TCP_NODELAY=1',
    'socket = r:TCP_NODELAY=1',
    '',
  ].join('\n');
}

/** Starts stunnel (under `cpus` with taskset when given) with `config` written to a file of its own. */
export function spawnStunnel(config: string, cpus: string | null): { child: ChildProcess; configFile: string } {
  const bin = stunnelPath();
  if (bin === null) throw new Error('stunnel is not installed (Debian package stunnel4)');
  const configFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'bench-stunnel-')), 'stunnel.conf');
  writeFileSync(configFile, config);
  const argv = cpus === null ? [bin, configFile] : ['taskset', '-c', cpus, bin, configFile];
  return { child: spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] }), configFile };
}
