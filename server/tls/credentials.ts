import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import type { TlsOptions } from '../cli.js';

/** The PEM files as read: what a tls.Server's setSecureContext takes. */
export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  /** Client certificates must be signed by this CA (--tls-ca); undefined: none is asked for. */
  ca?: Buffer;
}

/** A certificate, key or CA file that cannot be read or does not make a usable context. */
export class TlsLoadError extends Error {}

export type ReloadResult = { ok: true } | { ok: false; reason: string };

/**
 * The server's certificate, key and client CA, read from their files and checked to make a
 * SecureContext. The TLS servers take the material (setSecureContext on reload): new handshakes
 * use it, connections already established keep the context they were made with, so a rotation
 * drops nobody.
 */
export class TlsCredentials {
  private current: TlsMaterial;
  private readonly reloaded = new Set<(material: TlsMaterial) => void>();

  private constructor(private readonly files: Pick<TlsOptions, 'certFile' | 'keyFile' | 'caFile'>) {
    this.current = build(files);
  }

  /** Reads the files now; throws TlsLoadError saying which one is unusable and why. */
  static load(files: Pick<TlsOptions, 'certFile' | 'keyFile' | 'caFile'>): TlsCredentials {
    return new TlsCredentials(files);
  }

  /** What new handshakes use. */
  get material(): TlsMaterial {
    return this.current;
  }

  /** Mutual TLS: a client must present a certificate signed by the CA. */
  get requiresClientCertificate(): boolean {
    return this.files.caFile !== null;
  }

  /** Calls `listener` with the new material after each successful reload (the dashboard's https server). */
  onReload(listener: (material: TlsMaterial) => void): void {
    this.reloaded.add(listener);
  }

  /** Reads the files again; on failure the old context stays in use and the reason is returned. */
  reload(): ReloadResult {
    let next: TlsMaterial;
    try {
      next = build(this.files);
    } catch (err) {
      return { ok: false, reason: (err as Error).message };
    }
    this.current = next;
    for (const listener of this.reloaded) listener(next);
    return { ok: true };
  }
}

/** Reads the files and checks that they make a context; throws TlsLoadError when they do not. */
function build(files: Pick<TlsOptions, 'certFile' | 'keyFile' | 'caFile'>): TlsMaterial {
  const material: TlsMaterial = { cert: readPem(files.certFile, 'certificate'), key: readPem(files.keyFile, 'key') };
  if (files.caFile !== null) material.ca = readPem(files.caFile, 'CA');
  try {
    // Throws when the key does not belong to the certificate, or a PEM block does not parse.
    tls.createSecureContext(material);
    return material;
  } catch (err) {
    throw new TlsLoadError(`TLS certificate ${files.certFile} with key ${files.keyFile}: ${(err as Error).message}`);
  }
}

function readPem(file: string, what: string): Buffer {
  let pem: Buffer;
  try {
    pem = readFileSync(file);
  } catch (err) {
    throw new TlsLoadError(`cannot read the TLS ${what} file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (!pem.includes('-----BEGIN ')) throw new TlsLoadError(`the TLS ${what} file ${file} holds no PEM block`);
  return pem;
}
