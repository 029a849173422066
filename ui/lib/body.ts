/** A job body as the dashboard shows it: text, pretty JSON or a hex dump, from a preview or the full bytes. */

import type { BodyDto } from '../../shared/dto.js';

/** Bytes per hex dump line. */
export const HEX_BYTES_PER_LINE = 16;
/** JSON longer than this is not pretty-printed (parsing it would stall the page). */
export const PRETTY_JSON_MAX_CHARS = 4 * 1024 * 1024;

export type BodyView = 'text' | 'json' | 'hex';

export type Bytes = Uint8Array<ArrayBuffer>;

export function base64ToBytes(base64: string): Bytes {
  const binary = atob(base64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function bytesToBase64(bytes: Uint8Array): string {
  const CHUNK = 0x8000;
  let binary = '';
  for (let i = 0; i < bytes.length; i += CHUNK) {
    binary += String.fromCharCode(...bytes.subarray(i, i + CHUNK));
  }
  return btoa(binary);
}

/** Strict UTF-8 decoding: null when the bytes are not valid UTF-8. */
export function decodeUtf8(bytes: Uint8Array): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return null;
  }
}

/** The body's content, with conversions computed on first use only. */
export class BodyContent {
  /** Size of the whole body in bytes (the job's bodyBytes). */
  readonly totalBytes: number;
  /** True when every byte is here (not a truncated preview). */
  readonly complete: boolean;
  /** True when the bytes are not valid UTF-8 (the text view then shows replacement characters). */
  readonly binary: boolean;
  private bytesCache: Bytes | null;
  private textCache: string | null;
  private base64Cache: string | null;
  private jsonCache: string | null | undefined;

  private constructor(options: {
    totalBytes: number;
    complete: boolean;
    binary: boolean;
    bytes: Bytes | null;
    text: string | null;
    base64: string | null;
  }) {
    this.totalBytes = options.totalBytes;
    this.complete = options.complete;
    this.binary = options.binary;
    this.bytesCache = options.bytes;
    this.textCache = options.text;
    this.base64Cache = options.base64;
  }

  /** From GET /api/jobs/:id (`totalBytes` is the job's bodyBytes). */
  static fromDto(body: BodyDto): BodyContent {
    if (body.encoding === 'utf8') {
      return new BodyContent({
        totalBytes: body.bytes,
        complete: !body.truncated,
        binary: false,
        bytes: null,
        text: body.text,
        base64: null,
      });
    }
    return new BodyContent({
      totalBytes: body.bytes,
      complete: !body.truncated,
      binary: true,
      bytes: null,
      text: null,
      base64: body.base64,
    });
  }

  /** From GET /api/jobs/:id/body. */
  static fromBytes(bytes: Bytes): BodyContent {
    const text = decodeUtf8(bytes);
    return new BodyContent({
      totalBytes: bytes.length,
      complete: true,
      binary: text === null,
      bytes,
      text,
      base64: null,
    });
  }

  /** Bytes at hand (all of them, or the preview's). */
  get bytes(): Bytes {
    if (this.bytesCache === null) {
      this.bytesCache =
        this.base64Cache !== null ? base64ToBytes(this.base64Cache) : new TextEncoder().encode(this.textCache ?? '');
    }
    return this.bytesCache;
  }

  /** The text (lossy for binary bodies: invalid sequences become U+FFFD). */
  get text(): string {
    if (this.textCache === null) this.textCache = new TextDecoder('utf-8').decode(this.bytes);
    return this.textCache;
  }

  get base64(): string {
    if (this.base64Cache === null) this.base64Cache = bytesToBase64(this.bytes);
    return this.base64Cache;
  }

  /** Pretty-printed JSON when the (complete, text) body is a JSON object or array; null otherwise. */
  get prettyJson(): string | null {
    if (this.jsonCache === undefined) this.jsonCache = this.computeJson();
    return this.jsonCache;
  }

  private computeJson(): string | null {
    if (this.binary || !this.complete) return null;
    const text = this.text;
    if (text.length > PRETTY_JSON_MAX_CHARS) return null;
    const first = text.trimStart()[0];
    if (first !== '{' && first !== '[') return null;
    try {
      const value: unknown = JSON.parse(text);
      return JSON.stringify(value, null, 2);
    } catch {
      return null;
    }
  }

  /** The view to open first: JSON when it parses, hex for binary, else text. */
  get preferredView(): BodyView {
    if (this.binary) return 'hex';
    return this.prettyJson !== null ? 'json' : 'text';
  }
}

function hex2(byte: number): string {
  return byte.toString(16).padStart(2, '0');
}

/** One hex dump line: offset, 16 bytes in two groups of 8, printable ASCII. */
export function hexLine(bytes: Uint8Array, line: number): string {
  const start = line * HEX_BYTES_PER_LINE;
  const end = Math.min(bytes.length, start + HEX_BYTES_PER_LINE);
  let hex = '';
  let ascii = '';
  for (let i = start; i < start + HEX_BYTES_PER_LINE; i++) {
    if (i === start + 8) hex += ' ';
    if (i < end) {
      const byte = bytes[i] ?? 0;
      hex += `${hex2(byte)} `;
      ascii += byte >= 0x20 && byte < 0x7f ? String.fromCharCode(byte) : '.';
    } else {
      hex += '   ';
    }
  }
  return `${start.toString(16).padStart(8, '0')}  ${hex} |${ascii}|`;
}

/** Lines [from, to) of a hex dump, joined by newlines. */
export function hexLines(bytes: Uint8Array, from: number, to: number): string {
  const lines: string[] = [];
  for (let line = from; line < to; line++) lines.push(hexLine(bytes, line));
  return lines.join('\n');
}

export function hexLineCount(byteLength: number): number {
  return Math.ceil(byteLength / HEX_BYTES_PER_LINE);
}

/** Bytes of `text` encoded as UTF-8 (without encoding it). */
export function utf8ByteLength(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

/** Decoded size of a base64 string, or -1 when it is not valid base64. */
export function base64ByteLength(text: string): number {
  const compact = text.replace(/\s+/g, '');
  if (compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) return -1;
  const padding = compact.endsWith('==') ? 2 : compact.endsWith('=') ? 1 : 0;
  return (compact.length / 4) * 3 - padding;
}
