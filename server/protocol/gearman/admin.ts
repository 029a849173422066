import { isLoopback } from '../../host-name.js';
import type { JobState, Operations } from '../../operations/operations.js';
import { uniqueEnd } from '../../gearman/job-body.js';
import type { GearmanRegistry } from '../../gearman/registry.js';

export interface AdminContext {
  ops: Operations;
  registry: GearmanRegistry;
  version: string;
  pid: number;
  /** `shutdown` (graceful: drain first). */
  shutdown: (graceful: boolean) => void;
}

const END = '.\n';

/**
 * One line of Gearman's text admin protocol, answered in gearmand's formats: tab-separated
 * `status` lines and `workers` lines ending with `.`, `OK ...` or `ERR code text` lines. Words
 * are case-insensitive. `shutdown`, `maxqueue` and `cancel job` change the server, so they are
 * taken only from loopback peers. Returns the reply's text, or null for none.
 */
export async function runAdminCommand(words: string[], ctx: AdminContext, peer: string): Promise<string | null> {
  const command = words[0]!.toLowerCase();
  // A UNIX socket peer is on this machine too.
  const local = peer === 'unix' || isLoopback(peer.replace(/:\d+$/, ''));
  switch (command) {
    case 'status':
      return status(ctx.ops);
    case 'workers':
      return workers(ctx.registry);
    case 'version':
      return `OK ${ctx.version}\n`;
    case 'getpid':
      return `OK ${ctx.pid}\n`;
    case 'maxqueue':
      if (!local) return refused();
      return await maxQueue(words, ctx.registry);
    case 'shutdown': {
      if (!local) return refused();
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
      if (!local) return refused();
      return cancelJob(words[2]!, ctx);
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

/** `FUNCTION\tTOTAL\tRUNNING\tAVAILABLE_WORKERS` per function; total counts queued and running jobs. */
async function status(ops: Operations): Promise<string> {
  let out = '';
  for (const t of await ops.tubes(true)) {
    const total = t.ready + t.delayed + t.reserved + t.buried;
    // The realm's default tube exists whether or not anyone uses the function "default".
    if (total === 0 && t.watching === 0 && t.name === 'default') continue;
    out += `${printable(t.name)}\t${total}\t${t.reserved}\t${t.watching}\n`;
  }
  return out + END;
}

/** `FD IP CLIENT_ID : FUNCTION ...` per connection. */
function workers(registry: GearmanRegistry): string {
  let out = '';
  for (const w of registry.workers()) out += `${w.fd} ${w.address} ${w.clientId} :${w.functions.map((f) => ` ${printable(f)}`).join('')}\n`;
  return out + END;
}

/** `maxqueue FN` lifts the limit; `maxqueue FN N` sets it (gearmand also takes one N per priority: the first counts). */
async function maxQueue(words: string[], registry: GearmanRegistry): Promise<string> {
  const fn = words[1];
  if (fn === undefined) return err('INVALID_ARGUMENTS', 'An incomplete set of arguments was sent to this command maxqueue');
  const n = words[2] === undefined ? 0 : Number(words[2]);
  if (!Number.isSafeInteger(n)) return err('INVALID_ARGUMENTS', 'The max queue size is not a number');
  await registry.setMaxQueue(fn, n > 0 ? n : null);
  return 'OK\r\n';
}

/** Every job, in one pass over the store. */
async function eachJob(ctx: AdminContext, visit: (id: number, state: JobState, reserves: number, body: Buffer) => void): Promise<void> {
  await ctx.ops.eachJob((job) => visit(job.id, job.state, job.reserves, job.body));
}

/** `handle\tretries\tignore_job\tjob_queued` per job, as gearmand lists them. */
async function showJobs(ctx: AdminContext): Promise<string> {
  let out = '';
  await eachJob(ctx, (id, state, reserves) => {
    // Retries: times the job was handed out before this run (gearmand counts requeues).
    const retries = Math.max(0, reserves - (state === 'reserved' ? 1 : 0));
    out += `${ctx.registry.handles.handle(id)}\t${retries}\t0\t${state === 'reserved' ? 0 : 1}\n`;
  });
  return out + END;
}

/** One line per job: its unique id, empty for a job without one (as gearmand lists them). */
async function showUniqueJobs(ctx: AdminContext): Promise<string> {
  let out = '';
  await eachJob(ctx, (_id, _state, _reserves, body) => {
    out += `${printable(body.toString('latin1', 0, uniqueEnd(body, 0, body.length)))}\n`;
  });
  return out + END;
}

/** Deletes a queued job; a running one is left to its worker. */
async function cancelJob(handle: string, ctx: AdminContext): Promise<string> {
  const id = ctx.registry.handles.idOf(handle);
  if (id === null) return UNKNOWN_JOB;
  const deleted = await ctx.ops.delete(id);
  if (deleted.ok) return 'OK\r\n';
  return deleted.code === 'JOB_RESERVED' ? err('JOB_RUNNING', 'Job is running') : UNKNOWN_JOB;
}
