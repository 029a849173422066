import type { Logger } from 'pino';
import { samePolicy, type TubePolicy } from '../../shared/policy.js';
import { policyOrNull } from '../common/policy-schema.js';
import type { AdminChanges, JobReads } from '../operations/operations.js';
import { loadPolicyFile, PolicyFileError, type PolicyFile } from './policy-file.js';

/** What the file's policies are set on: a store's policy reads and changes. */
export type PolicyStore = Pick<JobReads, 'tubePolicy'> & Pick<AdminChanges, 'setTubePolicy'>;

/** Whether a tube's (or function's) policy is the file's, for the dashboard to say so. */
export interface PolicyOrigin {
  fromFile(realm: 'tubes' | 'functions', name: string): boolean;
}

/**
 * Applies the --policies file to the stores: at start, and again on SIGHUP (reload). The file
 * wins over the dashboard for the names it lists, each time it is applied; a name the file
 * listed at the last apply and no longer lists has its policy cleared. A policy already as the
 * file says is not written again, so a restart or a SIGHUP adds no binlog records when nothing
 * changed.
 */
export class FilePolicies implements PolicyOrigin {
  private applied: Record<'tubes' | 'functions', ReadonlySet<string>> = { tubes: new Set(), functions: new Set() };
  /** One apply at a time: a SIGHUP during one runs after it. */
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly file: string,
    private readonly stores: { tubes: PolicyStore; functions: PolicyStore | null },
    private readonly log: Logger,
  ) {}

  fromFile(realm: 'tubes' | 'functions', name: string): boolean {
    return this.applied[realm].has(name);
  }

  /** Applies `doc` (the file as read at start). */
  apply(doc: PolicyFile): Promise<void> {
    const run = this.queue.then(async () => {
      await this.applyRealm('tubes', doc.tubes);
      await this.applyRealm('functions', doc.functions);
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** SIGHUP: reads the file again; a file that became unusable keeps what is applied, and says why. */
  readonly reload = (): void => {
    let doc: PolicyFile;
    try {
      doc = loadPolicyFile(this.file);
    } catch (err) {
      if (!(err instanceof PolicyFileError)) throw err;
      this.log.error({ file: this.file, problem: err.message }, 'SIGHUP: --policies file not reloaded; the policies applied stay');
      return;
    }
    this.apply(doc).then(
      () => this.log.info({ file: this.file, tubes: doc.tubes.size, functions: doc.functions.size }, 'SIGHUP: --policies file applied'),
      (err: unknown) => this.log.error({ file: this.file, err: (err as Error).message }, 'SIGHUP: --policies file not fully applied'),
    );
  };

  private async applyRealm(realm: 'tubes' | 'functions', wanted: ReadonlyMap<string, TubePolicy>): Promise<void> {
    const store = realm === 'tubes' ? this.stores.tubes : this.stores.functions;
    if (store === null) {
      if (wanted.size > 0) this.log.warn({ file: this.file }, '--policies: Gearman function policies ignored (Gearman is off)');
      return;
    }
    const done = new Set<string>();
    for (const [name, policy] of wanted) {
      const want = policyOrNull(policy);
      const now = (await store.tubePolicy(name)).policy;
      if (!samePolicy(now, want)) mustSucceed(await store.setTubePolicy(name, want), realm, name);
      done.add(name);
    }
    for (const name of this.applied[realm]) {
      if (!done.has(name)) mustSucceed(await store.setTubePolicy(name, null), realm, name);
    }
    this.applied[realm] = done;
  }
}

function mustSucceed(result: { ok: boolean; code?: string }, realm: string, name: string): void {
  if (!result.ok) throw new Error(`--policies: ${realm} ${name}: the policy could not be recorded (${result.code ?? 'failed'})`);
}

/**
 * The --policies file at work: applied before the ports open (a store that cannot record them
 * stops the start), and again on every SIGHUP. Null without the flag.
 */
export async function startFilePolicies(
  options: { file: string; doc: PolicyFile } | null,
  stores: { tubes: PolicyStore; functions: PolicyStore | null },
  log: Logger,
): Promise<FilePolicies | null> {
  if (options === null) return null;
  const policies = new FilePolicies(options.file, stores, log);
  await policies.apply(options.doc);
  log.info({ file: options.file, tubes: options.doc.tubes.size, functions: options.doc.functions.size }, '--policies file applied');
  process.on('SIGHUP', policies.reload);
  return policies;
}
