/**
 * A webhook receiver on 127.0.0.1 (a port of its own) that records every POST's JSON and answers
 * with the statuses it is given, in order (then 200). The alerts' tests post only here.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface WebhookReceiver {
  url: string;
  posts: unknown[];
  /** Waits until at least `n` posts arrived (at most `timeoutMs`). */
  waitFor(n: number, timeoutMs?: number): Promise<unknown[]>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(statuses: number[] = []): Promise<WebhookReceiver> {
  const posts: unknown[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = statuses.shift() ?? 200;
      // Failed attempts are not recorded: `posts` is what the receiver accepted.
      if (status >= 200 && status < 300) posts.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown);
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    posts,
    async waitFor(n, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (posts.length < n) {
        if (Date.now() > deadline) throw new Error(`${posts.length} of ${n} webhook posts arrived: ${JSON.stringify(posts)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return posts;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
