import type { BulkResponse } from '../../shared/api.js';
import type { SearchMatchDto } from '../../shared/dto.js';
import { randomBytes } from 'node:crypto';
import { RE2JS } from 're2js';
import type { JobScan, JobSnapshot, JobState, JobView, Operations } from '../operations/operations.js';
import type { Request, Response } from 'express';
import type { z } from 'zod';
import { afterChange } from '../operations/after-change.js';
import { ApiError } from './errors.js';
import { abandonedSignal, parseOrThrow } from './validation.js';

/**
 * Searching job bodies for the dashboard, without ever blocking the job port: a search walks the
 * store's jobs 1,024 per turn of the event loop (as a large kick does), reads at most the first
 * SEARCH_BYTES_PER_BODY bytes of each body, and matches them with RE2 (re2js), whose time is
 * linear in the input, so no pattern can backtrack for seconds. A page stops when it has its
 * matches, when it has looked at MAX_SCANNED_PER_PAGE jobs (the answer then says how far it got,
 * and the next page goes on), or when its request is abandoned. An unfinished search stays open
 * for the next page for SEARCH_IDLE_MS, and at most MAX_OPEN_SEARCHES are kept.
 */

/** Bytes of a body a search reads (the rest of a big body is not searched). */
export const SEARCH_BYTES_PER_BODY = 64 * 1024;
/** Longest pattern accepted (characters). */
export const MAX_PATTERN_LENGTH = 1000;
const SLICE = 1024;
/**
 * A slice also ends after this many body bytes or this long, whichever comes first: 1,024 bodies
 * of 64 KiB, or a costly pattern, would otherwise hold the event loop for most of a second.
 */
const SLICE_BYTES = 1024 * 1024;
const SLICE_MS = 8;
/** Searches walking at once (pages and bulk selections): each adds a slice to every turn. */
const MAX_RUNNING = 4;
const MAX_SCANNED_PER_PAGE = 200_000;
const SEARCH_IDLE_MS = 60_000;
const MAX_OPEN_SEARCHES = 32;

/** What to look for: `text` in the body (a regular expression when `regex`), in a tube and state when given. */
export interface SearchFilter {
  text: string;
  regex: boolean;
  /** Case-insensitive (the default for plain text). */
  ignoreCase: boolean;
  /** Only where the text stands as a whole word: "4711" does not match in "47117". */
  wholeWord: boolean;
  tube: string | null;
  state: JobState | null;
}

type TextFilter = Pick<SearchFilter, 'text' | 'regex' | 'ignoreCase' | 'wholeWord'>;

/** Compiles a filter's text once (null: empty text, matches all); a bad pattern is the client's error (400), said in RE2's words. */
function compileFilter(filter: TextFilter): RE2JS | null {
  if (filter.text === '') return null;
  const pattern = filter.regex ? `(?:${filter.text})` : RE2JS.quote(filter.text);
  try {
    // \b is RE2's ASCII word boundary: between a letter, digit or _ and anything else.
    return RE2JS.compile(filter.wholeWord ? `\\b${pattern}\\b` : pattern, filter.ignoreCase ? RE2JS.CASE_INSENSITIVE : 0);
  } catch (err) {
    throw new ApiError(400, 'BAD_REQUEST', `q: not a valid regular expression: ${(err as Error).message}`);
  }
}

/** The part of a body a search reads, as text. */
function searchedText(body: Buffer): string {
  return body.toString('utf8', 0, Math.min(body.length, SEARCH_BYTES_PER_BODY));
}

export function bodyMatcher(filter: TextFilter): (body: Buffer) => boolean {
  const re = compileFilter(filter);
  return re === null ? () => true : (body) => re.test(searchedText(body));
}

/** Characters of context shown on each side of a match. */
export const MATCH_CONTEXT_CHARS = 60;

/**
 * Where `filter` first matches in a body, with the text around it (null: no text to match, or
 * no match in the part searched). `before` starts and `after` ends at most MATCH_CONTEXT_CHARS away.
 */
export function matchFinder(filter: TextFilter): (body: Buffer) => SearchMatchDto | null {
  const re = compileFilter(filter);
  return (body) => {
    if (re === null) return null;
    const text = searchedText(body);
    const m = re.matcher(text);
    if (!m.find()) return null;
    const start = m.start();
    const end = m.end();
    const from = Math.max(0, start - MATCH_CONTEXT_CHARS);
    const to = Math.min(text.length, end + MATCH_CONTEXT_CHARS);
    return {
      before: (from > 0 ? '…' : '') + text.slice(from, start),
      text: text.slice(start, end),
      after: text.slice(end, to) + (to < text.length ? '…' : ''),
    };
  };
}

/** Pages and bulk selections walking right now, over every store. */
let running = 0;

/** One page of a search: the matches, and whether the walk is over. */
export interface SearchPage {
  jobs: JobSnapshot[];
  /** Token of the next page; null once every job has been looked at. */
  next: string | null;
  /** Jobs looked at and matched so far, over all pages. */
  scanned: number;
  matched: number;
  /** Every job has been looked at: `matched` is the final count (pages may still be left to fetch). */
  complete: boolean;
  /** Where each job of `jobs` matches (same index). */
  matches: (SearchMatchDto | null)[];
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** An open search: the store's walk, the matches found beyond the last page, and its counts. */
class Search {
  private readonly matches: (body: Buffer) => boolean;
  /**
   * Ids of matches not handed out yet (a slice may find more than a page wants). Ids, not
   * snapshots: a page reads its jobs as they are when it answers, and holds no body meanwhile.
   */
  private readonly found: number[] = [];
  private done = false;
  private busy = false;
  scanned = 0;
  matched = 0;
  lastUsed = Date.now();

  /** Where a found job matches, for the page that shows it. */
  readonly findMatch: (body: Buffer) => SearchMatchDto | null;

  constructor(
    readonly token: string,
    private readonly scan: JobScan,
    private readonly filter: SearchFilter,
    private readonly searched: BodyPart,
  ) {
    this.matches = bodyMatcher(filter);
    const find = matchFinder(filter);
    this.findMatch = (body) => find(searched(body));
  }

  get fetching(): boolean {
    return this.busy;
  }

  get finished(): boolean {
    return this.done && this.found.length === 0;
  }

  /** Every job has been looked at. */
  get walked(): boolean {
    return this.done;
  }

  /** The ids of the next `limit` matches (fewer at the end, or when this page looked at enough jobs). */
  async page(limit: number, signal: AbortSignal): Promise<number[]> {
    if (this.busy) throw new ApiError(409, 'SEARCH_BUSY', 'this search is already fetching a page');
    if (running >= MAX_RUNNING) throw new ApiError(429, 'TOO_MANY_SEARCHES', `at most ${MAX_RUNNING} searches run at once: try again in a moment`);
    this.busy = true;
    running++;
    try {
      const start = this.scanned;
      while (!this.done && this.found.length < limit && this.scanned - start < MAX_SCANNED_PER_PAGE && !signal.aborted) {
        this.done = await this.scan.next(SLICE, this.visit);
        if (!this.done) await nextTurn();
      }
      this.lastUsed = Date.now();
      return this.found.splice(0, limit);
    } finally {
      this.busy = false;
      running--;
    }
  }

  /** True when `job` still matches (a bulk action checks again right before it acts). */
  stillMatches(view: JobView, body: Buffer): boolean {
    const f = this.filter;
    if ((f.tube !== null && view.tube !== f.tube) || (f.state !== null && view.state !== f.state)) return false;
    return this.matches(this.searched(body));
  }

  private sliceBytes = 0;
  private sliceStarted = 0;

  private readonly visit = (view: JobView, body: Buffer): boolean => {
    if (this.sliceBytes === 0) this.sliceStarted = performance.now();
    this.scanned++;
    if (this.stillMatches(view, body)) {
      this.matched++;
      this.found.push(view.id);
    }
    this.sliceBytes += Math.min(body.length, SEARCH_BYTES_PER_BODY) + 64;
    if (this.sliceBytes < SLICE_BYTES && performance.now() - this.sliceStarted < SLICE_MS) return true;
    this.sliceBytes = 0;
    return false;
  };
}

/** Jobs a bulk action changes per turn of the event loop (other clients are served between slices). */
const BULK_SLICE = 1024;

/** Most jobs one bulk action by search acts on. */
export const MAX_BULK = 1_000_000;

/** A bulk action on the items given: `act` on each (true: done), the rest counted as skipped. */
export async function actOnEach<T>(items: readonly T[], act: (item: T) => Promise<boolean>): Promise<BulkResponse> {
  const count = await actInSlices(items, act);
  return { count, skipped: items.length - count, complete: true };
}

/** Runs `act` on each item, a slice per turn, as a large kick does; returns how many it did (true). */
export async function actInSlices<T>(items: readonly T[], act: (item: T) => Promise<boolean>): Promise<number> {
  let count = 0;
  for (let i = 0; i < items.length; i++) {
    if (await act(items[i]!)) count++;
    if (i % BULK_SLICE === BULK_SLICE - 1) await nextTurn();
  }
  return count;
}

/** The part of a stored body that a search reads (a Gearman job keeps its unique id in front of its data). */
export type BodyPart = (body: Buffer) => Buffer;

/** The open searches of one store (the beanstalkd jobs, or Gearman's). */
export class Searches {
  private readonly open = new Map<string, Search>();

  constructor(
    private readonly ops: Operations,
    private readonly searched: BodyPart = (body) => body,
  ) {}

  /** Starts a search and answers its first page. */
  start(filter: SearchFilter, limit: number, signal: AbortSignal): Promise<SearchPage> {
    this.expire();
    if (this.open.size >= MAX_OPEN_SEARCHES) this.dropOldest();
    const search = new Search(randomBytes(12).toString('base64url'), this.ops.scanJobs(), filter, this.searched);
    this.open.set(search.token, search);
    return this.pageOf(search, limit, signal);
  }

  /** A search request's page: the next of the search its `next` token names, else the first of a new one over `filter()`. */
  page(q: { next?: string; limit: number }, filter: () => SearchFilter, signal: AbortSignal): Promise<SearchPage> {
    return q.next !== undefined ? this.continue(q.next, q.limit, signal) : this.start(filter(), q.limit, signal);
  }

  /**
   * A search endpoint's handler (the beanstalkd jobs' and Gearman's differ only in their query,
   * filter and reply): the query as `schema` reads it, its page (see `page`), and the reply that
   * `reply` makes of that page.
   */
  handler<Q extends { next?: string; limit: number }>(
    schema: z.ZodType<Q>,
    filter: (q: Q) => SearchFilter,
    reply: (page: SearchPage) => unknown,
  ): (req: Request, res: Response) => Promise<void> {
    return async (req, res) => {
      const q = parseOrThrow(schema, req.query);
      const page = await this.page(q, () => filter(q), abandonedSignal(res));
      res.json(await reply(page));
    };
  }

  /** The next page of an open search. */
  continue(token: string, limit: number, signal: AbortSignal): Promise<SearchPage> {
    this.expire();
    const search = this.open.get(token);
    if (search === undefined) throw new ApiError(404, 'NOT_FOUND', 'no such search: it ended, or was idle for over a minute');
    return this.pageOf(search, limit, signal);
  }

  /**
   * The ids of every match of `filter` (for a bulk action), up to `cap`; `complete` is false when
   * the cap cut it short. `stillMatches` checks a job again right before the action (a job edited
   * or moved since it was found is left alone).
   */
  async all(
    filter: SearchFilter,
    cap: number,
    signal: AbortSignal,
  ): Promise<{ ids: number[]; complete: boolean; stillMatches: (id: number) => Promise<boolean> }> {
    const search = new Search('', this.ops.scanJobs(), filter, this.searched);
    const ids: number[] = [];
    while (!search.finished && ids.length < cap && !signal.aborted) {
      for (const id of await search.page(cap - ids.length, signal)) ids.push(id);
    }
    const stillMatches = async (id: number): Promise<boolean> => {
      const job = await this.ops.job(id);
      return job !== undefined && search.stillMatches(job, job.body);
    };
    return { ids, complete: search.finished, stillMatches };
  }

  /**
   * The handler of a bulk action: `act` acts on the selection its body names (checked by
   * `schema`: a list, or a search through actOnMatches) and answers how many it did, or null when
   * the request was abandoned (then nothing is answered). The answer waits until the changes are
   * durable, as every change through the API does.
   */
  bulkHandler<T>(schema: z.ZodType<T>, act: (body: T, req: Request, res: Response) => Promise<BulkResponse | null>): (req: Request, res: Response) => Promise<void> {
    return async (req, res) => {
      const done = await act(parseOrThrow(schema, req.body), req, res);
      if (done === null) return;
      await afterChange(this.ops);
      res.json(done);
    };
  }

  /**
   * A bulk action on every match of `filter` (up to MAX_BULK): `act` on each job that still
   * matches right before (true: done), the rest counted as skipped. Null when the request was
   * abandoned before the search ended: nobody waits, and a selection cut short is not acted on.
   */
  async actOnMatches(filter: SearchFilter, signal: AbortSignal, act: (id: number) => Promise<boolean>): Promise<BulkResponse | null> {
    const found = await this.all(filter, MAX_BULK, signal);
    if (signal.aborted) return null;
    const count = await actInSlices(found.ids, async (id) => (await found.stillMatches(id)) && (await act(id)));
    return { count, skipped: found.ids.length - count, complete: found.complete };
  }

  cancel(token: string): boolean {
    return this.open.delete(token);
  }

  private async pageOf(search: Search, limit: number, signal: AbortSignal): Promise<SearchPage> {
    const jobs: JobSnapshot[] = [];
    const matches: (SearchMatchDto | null)[] = [];
    for (const id of await search.page(limit, signal)) {
      // As it is now: a job changed since it was found is shown only if it still matches.
      const job = await this.ops.job(id);
      if (job !== undefined && search.stillMatches(job, job.body)) {
        jobs.push(job);
        matches.push(search.findMatch(job.body));
      }
    }
    if (search.finished) this.open.delete(search.token);
    return { jobs, matches, next: search.finished ? null : search.token, scanned: search.scanned, matched: search.matched, complete: search.walked };
  }

  private expire(): void {
    const now = Date.now();
    for (const [token, s] of this.open) if (now - s.lastUsed > SEARCH_IDLE_MS) this.open.delete(token);
  }

  private dropOldest(): void {
    let oldest: Search | undefined;
    // One fetching a page right now is not dropped: its answer hands out its token.
    for (const s of this.open.values()) if (!s.fetching && (oldest === undefined || s.lastUsed < oldest.lastUsed)) oldest = s;
    if (oldest !== undefined) this.open.delete(oldest.token);
  }
}
