import { isLoopback } from '../../host-name.js';
import type { JobState } from '../../operations/operations.js';
import type { GearmanStore } from '../../gearman/store.js';
import { uniqueEnd } from '../../gearman/job-body.js';
import type { GearmanRegistry, QueueLimits } from '../../gearman/registry.js';
import type { ConnectionAccess } from '../../acl/connection-access.js';

export interface GearmanAdminContext {
  ops: GearmanStore;
  registry: GearmanRegistry;
  version: string;
  pid: number;
  /** The server's log level (pino's word: info, debug ...); `verbose` says it in gearmand's words. */
  logLevel: string;
  /** `shutdown` (graceful: drain first). */
  shutdown: (graceful: boolean) => void;
}

const END = '.\n';

/** Log levels in gearmand's words (its --verbose names). */
const VERBOSITY: Readonly<Record<string, string>> = {
  fatal: 'FATAL',
  error: 'ERROR',
  warn: 'WARNING',
  info: 'INFO',
  debug: 'DEBUG',
  trace: 'DEBUG',
};

/**
 * One line of Gearman's text admin protocol, answered in gearmand's formats: tab-separated
 * `status` lines and `workers` lines ending with `.`, `OK ...` or `ERR code text` lines. Words
 * are case-insensitive. `shutdown`, `maxqueue`, `create function`, `drop function` and
 * `cancel job` change the server, so they are taken only from loopback peers, and under --acl
 * only from an identity whose `commands` allow `admin` (`access`; null: no rules). Returns the
 * reply's text, or null for none.
 */
export async function runAdminCommand(words: string[], ctx: GearmanAdminContext, peer: string, access: ConnectionAccess | null = null): Promise<string | null> {
  try {
    return await adminCommand(words, ctx, peer, access);
  } catch {
    // The store could not answer (a database that is down): an error line, in the text protocol.
    return err('INTERNAL_ERROR', 'the job store could not answer; try again');
  }
}

async function adminCommand(words: string[], ctx: GearmanAdminContext, peer: string, access: ConnectionAccess | null): Promise<string | null> {
  const command = words[0]!.toLowerCase();
  // A UNIX socket peer is on this machine too.
  const local = peer === 'unix' || isLoopback(peer.replace(/:\d+$/, ''));
  /** Why this peer may not change the server, as the reply says it; null: it may. The rules only narrow the loopback rule. */
  const refusal = (): string | null => (!local ? refused() : access !== null && !access.mayAdminister() ? forbidden() : null);
  switch (command) {
    case 'status':
      return status(ctx, access);
    case 'prioritystatus':
      return priorityStatus(ctx, access);
    case 'verbose':
      return `OK ${VERBOSITY[ctx.logLevel] ?? 'INFO'}\n`;
    case 'create':
    case 'drop':
      if (words.length !== 3 || words[1]!.toLowerCase() !== 'function') return incomplete(words[0]!);
      return refusal() ?? (command === 'create' ? createFunction(words[2]!, ctx.registry) : await dropFunction(words[2]!, ctx));
    case 'workers':
      return workers(ctx.registry);
    case 'version':
      return `OK ${ctx.version}\n`;
    case 'getpid':
      return `OK ${ctx.pid}\n`;
    case 'maxqueue':
      return refusal() ?? (await maxQueue(words, ctx.registry));
    case 'shutdown': {
      const denied = refusal();
      if (denied !== null) return denied;
      const graceful = words[1]?.toLowerCase() === 'graceful';
      if (words.length > 2 || (words.length === 2 && !graceful)) return err('INVALID_ARGUMENT', 'Unknown shutdown option');
      // The reply leaves before the process goes: shutdown runs on a later turn.
      setImmediate(() => ctx.shutdown(graceful));
      return 'OK\n';
    }
    case 'show':
      if (words[1]?.toLowerCase() === 'jobs' && words.length === 2) return showJobs(ctx);
      if (words[1]?.toLowerCase() === 'unique' && words[2]?.toLowerCase() === 'jobs' && words.length === 3) return showUniqueJobs(ctx);
      return unknown(words[0]!);
    case 'cancel':
      if (words[1]?.toLowerCase() !== 'job' || words.length !== 3) return unknown(words[0]!);
      return refusal() ?? (await cancelJob(words[2]!, ctx));
    default:
      return unknown(words[0]!);
  }
}

/**
 * A name or unique id as one field of a text reply: control bytes (a newline, a tab) would
 * split a line or end the reply early for admin tools, so each becomes '?'.
 */
function printable(text: string): string {
  return text.replace(/[\x00-\x1f\x7f]/g, '?');
}

function err(code: string, text: string): string {
  return `ERR ${code} ${text.replace(/ /g, '+')}\r\n`;
}

/** gearmand runs the command word into its text, without a separator. */
const unknown = (word: string): string => err('UNKNOWN_COMMAND', `Unknown server command${word}`);
const UNKNOWN_JOB = 'ERR UNKNOWN_JOB\r\n';
const refused = (): string => err('PERMISSION_DENIED', 'Only from a loopback address');
const forbidden = (): string => err('PERMISSION_DENIED', 'Not allowed for this client identity');

const incomplete = (word: string): string => err('INVALID_ARGUMENTS', `An incomplete set of arguments was sent to this command ${word}`);

/** A function as the text admin sees it: the store's tube counts, or zeros for one only declared. */
interface FunctionCounts {
  name: string;
  queued: number;
  running: number;
  workers: number;
}

/**
 * Every function: those the store has (jobs or workers), then those `create function` declared
 * that have neither. The realm's default tube exists whether or not anyone uses "default".
 * Under --acl, only the functions the client's identity may use (as beanstalkd's list-tubes).
 */
async function functions(ctx: GearmanAdminContext, access: ConnectionAccess | null): Promise<FunctionCounts[]> {
  const out: FunctionCounts[] = [];
  const seen = new Set<string>();
  for (const t of await ctx.ops.tubes(true)) {
    const queued = t.ready + t.delayed + t.buried;
    seen.add(t.name);
    if (queued + t.reserved === 0 && t.watching === 0 && t.name === 'default' && !ctx.registry.declared.has(t.name)) continue;
    out.push({ name: t.name, queued, running: t.reserved, workers: t.watching });
  }
  for (const name of ctx.registry.declared) if (!seen.has(name)) out.push({ name, queued: 0, running: 0, workers: 0 });
  return access === null ? out : out.filter((f) => access.permits(f.name));
}

/** `FUNCTION\tTOTAL\tRUNNING\tAVAILABLE_WORKERS` per function; total counts queued and running jobs. */
async function status(ctx: GearmanAdminContext, access: ConnectionAccess | null): Promise<string> {
  let out = '';
  for (const f of await functions(ctx, access)) out += `${printable(f.name)}\t${f.queued + f.running}\t${f.running}\t${f.workers}\n`;
  return out + END;
}

/**
 * `FUNCTION\tHIGH\tNORMAL\tLOW\tAVAILABLE_WORKERS`: queued (not running) jobs per priority,
 * counted in one pass over the jobs, as gearmand walks its queues.
 */
async function priorityStatus(ctx: GearmanAdminContext, access: ConnectionAccess | null): Promise<string> {
  const list = await functions(ctx, access);
  const counts = new Map<string, [number, number, number]>(list.map((f) => [f.name, [0, 0, 0]]));
  await ctx.ops.eachJob((job) => {
    if (job.state === 'reserved') return;
    const c = counts.get(job.tube);
    // The door's priorities are 0 HIGH, 1 NORMAL, 2 LOW (connection.ts).
    if (c !== undefined && job.priority >= 0 && job.priority <= 2) c[job.priority]!++;
  });
  let out = '';
  for (const f of list) {
    const [high, normal, low] = counts.get(f.name)!;
    out += `${printable(f.name)}\t${high}\t${normal}\t${low}\t${f.workers}\n`;
  }
  return out + END;
}

/** `create function FN`: the function is listed (with zeros) even before it has a job or a worker. */
function createFunction(fn: string, registry: GearmanRegistry): string {
  registry.declared.add(fn);
  return 'OK\r\n';
}

/**
 * `drop function FN`: refused while a worker can do it or a job of it runs; otherwise the
 * function goes, and its queued jobs with it (gearmand frees the function and its queues).
 */
async function dropFunction(fn: string, ctx: GearmanAdminContext): Promise<string> {
  const tube = await ctx.ops.tube(fn);
  const declared = ctx.registry.declared.has(fn);
  if (tube === undefined && !declared) return 'ERR function not found\r\n';
  if (tube !== undefined && (tube.watching > 0 || tube.reserved > 0)) return 'ERR there are still connected workers or executing clients\r\n';
  ctx.registry.declared.delete(fn);
  if (tube !== undefined) for (const state of ['ready', 'delayed', 'buried'] as const) await ctx.ops.clear(fn, state);
  return 'OK\r\n';
}

/** `FD IP CLIENT_ID : FUNCTION ...` per connection. */
function workers(registry: GearmanRegistry): string {
  let out = '';
  for (const w of registry.workers()) out += `${w.fd} ${w.address} ${w.clientId} :${w.functions.map((f) => ` ${printable(f)}`).join('')}\n`;
  return out + END;
}

/**
 * `maxqueue FN` lifts the limits; `maxqueue FN N` sets N for every priority; `maxqueue FN HIGH
 * NORMAL [LOW]` one per priority (a missing LOW, 0 or a negative number: no limit there), as
 * gearmand reads them.
 */
async function maxQueue(words: string[], registry: GearmanRegistry): Promise<string> {
  const fn = words[1];
  if (fn === undefined) return incomplete(words[0]!);
  if (words.length > 5) return err('INVALID_ARGUMENTS', 'Too many arguments were sent to this command maxqueue');
  const numbers = words.slice(2).map(Number);
  if (!numbers.every(Number.isSafeInteger)) return err('INVALID_ARGUMENTS', 'The max queue size is not a number');
  const limit = (i: number): number => Math.max(0, numbers[numbers.length === 1 ? 0 : i] ?? 0);
  const limits: QueueLimits = [limit(0), limit(1), limit(2)];
  await registry.setMaxQueue(fn, limits.some((n) => n > 0) ? limits : null);
  return 'OK\r\n';
}

/** Every job, in one pass over the store. */
async function eachJob(ctx: GearmanAdminContext, visit: (id: number, state: JobState, reserves: number, body: Buffer) => void): Promise<void> {
  await ctx.ops.eachJob((job) => visit(job.id, job.state, job.reserves, job.body));
}

/** `handle\tretries\tignore_job\tjob_queued` per job, as gearmand lists them. */
async function showJobs(ctx: GearmanAdminContext): Promise<string> {
  let out = '';
  await eachJob(ctx, (id, state, reserves) => {
    // Retries: times the job was handed out before this run (gearmand counts requeues).
    const retries = Math.max(0, reserves - (state === 'reserved' ? 1 : 0));
    out += `${ctx.registry.handles.handle(id)}\t${retries}\t0\t${state === 'reserved' ? 0 : 1}\n`;
  });
  return out + END;
}

/** One line per job: its unique id, empty for a job without one (as gearmand lists them). */
async function showUniqueJobs(ctx: GearmanAdminContext): Promise<string> {
  let out = '';
  await eachJob(ctx, (_id, _state, _reserves, body) => {
    out += `${printable(body.toString('latin1', 0, uniqueEnd(body, 0, body.length)))}\n`;
  });
  return out + END;
}

/** Deletes a queued job; a running one is left to its worker. */
async function cancelJob(handle: string, ctx: GearmanAdminContext): Promise<string> {
  const id = ctx.registry.handles.idOf(handle);
  if (id === null) return UNKNOWN_JOB;
  const deleted = await ctx.ops.delete(id);
  if (deleted.ok) return 'OK\r\n';
  return deleted.code === 'JOB_RESERVED' ? err('JOB_RUNNING', 'Job is running') : UNKNOWN_JOB;
}
