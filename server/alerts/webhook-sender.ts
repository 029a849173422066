import type { Timer } from '../common/timer.js';
import type { AlertDelivery } from './rule.js';

/** Deliveries waiting or in flight at most; beyond, a new one is dropped (and said so in its history). */
export const MAX_QUEUED_DELIVERIES = 1000;
/** Posts at once. */
const CONCURRENCY = 4;
/** One attempt's bound on connecting, sending and the answer. */
export const ATTEMPT_TIMEOUT_MS = 5000;
/** Attempts per delivery; then it is `failed`. */
export const MAX_ATTEMPTS = 5;
/** The wait before the n-th retry is BACKOFF_MS * 2^(n-1), at most MAX_BACKOFF_MS. */
export const BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 60_000;

/** Posts `body` as JSON to `url`; resolves with the status, rejects on a network error or timeout. */
export type PostJson = (url: string, body: string, signal: AbortSignal) => Promise<number>;

const fetchPost: PostJson = async (url, body, signal) => {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'user-agent': 'beanpole-alerts' }, body, signal, redirect: 'manual' });
  // The answer's body is not needed; reading it lets the connection be reused.
  await res.arrayBuffer().catch(() => undefined);
  return res.status;
};

interface Delivery {
  eventId: number;
  url: string;
  body: string;
  attempts: number;
}

export interface WebhookSenderOptions {
  timer: Timer;
  /** Told after each attempt: the delivery's state, attempts so far and the last error. */
  onUpdate: (eventId: number, delivery: AlertDelivery, attempts: number, lastError: string | null) => void;
  post?: PostJson;
  backoffMs?: number;
  maxAttempts?: number;
  timeoutMs?: number;
}

/**
 * Webhook posts, off the job ports' path: `send` only queues (bounded), posts run a few at a
 * time with a timeout each, and a failure (network error, timeout, non-2xx answer) is retried
 * with exponential backoff. Nothing here is awaited by an evaluation or a client.
 */
export class WebhookSender {
  private readonly queue: Delivery[] = [];
  private inFlight = 0;
  private waiting = 0;
  private readonly cancels = new Set<() => void>();
  private stopped = false;
  private readonly post: PostJson;
  private readonly backoffMs: number;
  private readonly maxAttempts: number;
  private readonly timeoutMs: number;

  constructor(private readonly options: WebhookSenderOptions) {
    this.post = options.post ?? fetchPost;
    this.backoffMs = options.backoffMs ?? BACKOFF_MS;
    this.maxAttempts = options.maxAttempts ?? MAX_ATTEMPTS;
    this.timeoutMs = options.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
  }

  /** Queues a post; false (and nothing sent) when the queue is full or the sender stopped. */
  send(eventId: number, url: string, payload: unknown): boolean {
    if (this.stopped || this.queue.length + this.inFlight + this.waiting >= MAX_QUEUED_DELIVERIES) return false;
    this.queue.push({ eventId, url, body: JSON.stringify(payload), attempts: 0 });
    this.pump();
    return true;
  }

  /** Deliveries not finished (queued, posting or waiting to retry). */
  get pending(): number {
    return this.queue.length + this.inFlight + this.waiting;
  }

  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
    for (const cancel of this.cancels) cancel();
    this.cancels.clear();
  }

  private pump(): void {
    while (!this.stopped && this.inFlight < CONCURRENCY && this.queue.length > 0) void this.attempt(this.queue.shift()!);
  }

  private async attempt(d: Delivery): Promise<void> {
    this.inFlight++;
    d.attempts++;
    let error: string | null = null;
    try {
      const status = await this.post(d.url, d.body, AbortSignal.timeout(this.timeoutMs));
      if (status < 200 || status >= 300) error = `HTTP ${status}`;
    } catch (err) {
      error = (err as Error).name === 'TimeoutError' ? `no answer in ${this.timeoutMs} ms` : describe(err);
    }
    this.inFlight--;
    if (error === null) this.options.onUpdate(d.eventId, 'delivered', d.attempts, null);
    else if (d.attempts >= this.maxAttempts || this.stopped) this.options.onUpdate(d.eventId, 'failed', d.attempts, error);
    else {
      this.options.onUpdate(d.eventId, 'pending', d.attempts, error);
      this.retryLater(d);
    }
    this.pump();
  }

  private retryLater(d: Delivery): void {
    this.waiting++;
    const wait = Math.min(this.backoffMs * 2 ** (d.attempts - 1), MAX_BACKOFF_MS);
    const cancel = this.options.timer.after(wait, () => {
      this.cancels.delete(cancel);
      this.waiting--;
      if (this.stopped) return;
      this.queue.push(d);
      this.pump();
    });
    this.cancels.add(cancel);
  }
}

/** fetch's "fetch failed" hides the reason in `cause` (ECONNREFUSED and the like). */
function describe(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.cause?.message ?? e.message;
}
