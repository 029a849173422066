/**
 * Certificates for the TLS tests, made by the test itself with the openssl CLI: a CA, server
 * certificates for 127.0.0.1 and localhost signed by it, and client certificates with a subject
 * CN of the test's choosing. P-256 keys, so making a few takes milliseconds.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface CertFiles {
  cert: string;
  key: string;
}

export class TestPki {
  readonly dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-tls-'));
  private serial = 1;

  /** A CA (self-signed) named `name`, its files under the test's directory. */
  makeCa(name: string): CertFiles {
    const files = this.files(name);
    openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', files.key, '-out', files.cert, '-days', '2', '-subj', `/CN=${name}`]);
    return files;
  }

  /** A server certificate for 127.0.0.1 and localhost, with subject CN `cn`, signed by `ca`. */
  makeServer(ca: CertFiles, cn: string): CertFiles {
    return this.sign(ca, cn, ['subjectAltName=IP:127.0.0.1,DNS:localhost', 'extendedKeyUsage=serverAuth']);
  }

  /** A client certificate with subject CN `cn`, signed by `ca`. */
  makeClient(ca: CertFiles, cn: string): CertFiles {
    return this.sign(ca, cn, ['extendedKeyUsage=clientAuth']);
  }

  read(file: string): Buffer {
    return readFileSync(file);
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private sign(ca: CertFiles, cn: string, extensions: string[]): CertFiles {
    const files = this.files(cn);
    const csr = `${files.cert}.csr`;
    const ext = `${files.cert}.ext`;
    writeFileSync(ext, `${extensions.join('\n')}\n`);
    openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', files.key, '-out', csr, '-subj', `/CN=${cn}`]);
    openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', String(this.serial++), '-out', files.cert, '-days', '2', '-extfile', ext]);
    return files;
  }

  private files(name: string): CertFiles {
    const base = path.join(this.dir, `${name.replace(/[^A-Za-z0-9-]/g, '_')}-${this.serial++}`);
    return { cert: `${base}.pem`, key: `${base}.key` };
  }
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}
