import type { Logger } from 'pino';
import { whenReady, type JobReads, type Pending } from '../operations/operations.js';
import { loadAclFile, ruleFor, type AclRules } from './acl-file.js';
import { ConnectionAccess, type AccessHolder, type Protocol } from './connection-access.js';

/** One denial counter: the rule key it was counted under, and the protocol. */
export interface DenialCount {
  /** The matching `identities` key (a CN, a glob of CNs, `*`), or NO_RULE. */
  identity: string;
  protocol: Protocol;
  count: number;
}

/** What a door tells the rules about one of its connections when it opens its access. */
export interface AccessSubject {
  /** The client certificate's subject CN; null without one. */
  identity: string | null;
  protocol: Protocol;
  /** The tubes (beanstalkd) or functions (Gearman) the connection is served from now. */
  served(): string[];
  /** Ends the connection: reloaded rules forbid something it is served from. */
  drop(): void;
}

/**
 * The --acl rules in force, for every connection of both job ports: a door opens a
 * ConnectionAccess per connection and asks it before each command. SIGHUP reads the file again;
 * each open connection then answers to the new rules, and one that is served from a tube or
 * function it may no longer touch is closed, so no reserve (a blocked one too) or grab hands it
 * a job from there. Denials are counted per rule key (not per CN: a glob may match any number
 * of certificates, and /metrics must stay bounded).
 */
export class Acl implements AccessHolder {
  private current: AclRules;
  private readonly open = new Set<{ access: ConnectionAccess; subject: AccessSubject }>();
  private readonly denials = new Map<string, DenialCount>();

  constructor(
    private readonly file: string,
    rules: AclRules,
    /** Which tube a job is in, for beanstalkd commands that name a job: the beanstalkd realm's reads. */
    private readonly beanstalkJobs: Pick<JobReads, 'peek'>,
  ) {
    this.current = rules;
  }

  /** The access of a new connection; `close()` it when the connection ends. */
  connect(subject: AccessSubject): ConnectionAccess {
    const reads = this.beanstalkJobs;
    // Gearman's packets name functions, never a job by id.
    const tubeOfJob = subject.protocol === 'gearman' ? noJobs : (id: number): Pending<string | undefined> => whenReady(reads.peek(id), (job) => job?.tubeName);
    const access = new ConnectionAccess(this, ruleFor(this.current, subject.identity), subject.protocol, tubeOfJob);
    const entry = { access, subject };
    this.open.add(entry);
    access.onClose(() => this.open.delete(entry));
    return access;
  }

  /** SIGHUP: reads the file again; a file that has become unusable keeps the rules in force. */
  reload(log: Logger): void {
    let next: AclRules;
    try {
      next = loadAclFile(this.file);
    } catch (err) {
      log.error({ err: (err as Error).message }, `SIGHUP: access rules not reloaded, the previous ones stay in force: ${(err as Error).message}`);
      return;
    }
    this.current = next;
    let dropped = 0;
    for (const { access, subject } of [...this.open]) {
      access.follow(ruleFor(next, subject.identity));
      if (subject.served().some((name) => !access.permits(name))) {
        dropped++;
        subject.drop();
      }
    }
    log.info({ connections: this.open.size, dropped }, 'SIGHUP: access rules reloaded; connections served from what they may no longer touch were closed');
  }

  /** A connection was refused something (ConnectionAccess counts its own). */
  denied(identity: string, protocol: Protocol): void {
    const key = `${protocol}\0${identity}`;
    const counter = this.denials.get(key);
    if (counter !== undefined) counter.count++;
    else this.denials.set(key, { identity, protocol, count: 1 });
  }

  /** Every denial counter (for /metrics); counters of rules since removed stay, as counters must. */
  denialCounts(): DenialCount[] {
    return [...this.denials.values()];
  }
}

const noJobs = (): undefined => undefined;
