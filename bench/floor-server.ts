/**
 * The floor of a Node job server, for `npm run bench -- --only one-connection --node-floor`: it
 * answers the one-connection load's commands (put, reserve, delete, and the setup's use, watch,
 * ignore) with fixed replies, doing no job work at all, over the same socket path as Beanpole
 * (net, the shared read buffer, one write per reply). Whatever Beanpole does per command comes
 * on top of what this measures. Not a job server: it keeps no jobs and trusts its one client.
 *
 * Usage (as the harness starts it): node dist/bench/floor-server.js -l HOST -p PORT [ignored flags]
 */
import net from 'node:net';
import { readThroughSharedBuffer } from '../server/protocol/shared-read-buffer.js';

const INSERTED = Buffer.from('INSERTED 1\r\n');
const BODY_BYTES = 100; // the scenario's body size (SMALL_BODY)
const RESERVED = Buffer.concat([Buffer.from(`RESERVED 1 ${BODY_BYTES}\r\n`), Buffer.alloc(BODY_BYTES, 0x78), Buffer.from('\r\n')]);
const DELETED = Buffer.from('DELETED\r\n');
const CR = 13;

function flag(args: string[], name: string): string {
  const at = args.indexOf(name);
  if (at < 0 || at + 1 >= args.length) throw new Error(`floor-server: ${name} is required`);
  return args[at + 1]!;
}

/** Answers each whole command line in chunk[0, n); a put's body is assumed to come with its line (the load writes them together). */
function answer(socket: net.Socket, chunk: Buffer): void {
  const n = chunk.length;
  let i = 0;
  while (i < n) {
    const end = chunk.indexOf(CR, i);
    if (end < 0) return;
    switch (chunk[i]) {
      case 0x70: {
        // put <pri> <delay> <ttr> <bytes>: skip the body and its CRLF
        const space = chunk.lastIndexOf(0x20, end);
        socket.write(INSERTED);
        i = end + 2 + Number(chunk.toString('latin1', space + 1, end)) + 2;
        continue;
      }
      case 0x72:
        socket.write(RESERVED);
        break;
      case 0x64:
        socket.write(DELETED);
        break;
      default: {
        const line = chunk.toString('latin1', i, end);
        if (line.startsWith('use ')) socket.write(`USING ${line.slice(4)}\r\n`);
        else if (line.startsWith('watch ')) socket.write('WATCHING 2\r\n');
        else socket.write('WATCHING 1\r\n');
      }
    }
    i = end + 2;
  }
}

const args = process.argv.slice(2);
const server = net.createServer({ noDelay: true }, (socket) => {
  socket.on('error', () => undefined);
  if (!readThroughSharedBuffer(socket, (chunk) => answer(socket, chunk))) socket.on('data', (chunk: Buffer) => answer(socket, chunk));
});
server.listen(Number(flag(args, '-p')), flag(args, '-l'));
process.on('SIGTERM', () => process.exit(0));
