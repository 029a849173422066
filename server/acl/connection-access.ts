import { whenReady, type Pending } from '../operations/operations.js';
import { ADMIN_COMMAND, type AclRule } from './acl-file.js';

export type Protocol = 'beanstalkd' | 'gearman';

/** Where a connection's denials are counted (the Acl). */
export interface AccessHolder {
  denied(identity: string, protocol: Protocol): void;
}

/** Denials of connections that no entry matched (and no `*` entry): they may do nothing. */
export const NO_RULE = '(none)';

/** Decisions kept per connection before the cache starts over (a client may name endless tubes). */
const MAX_CACHED = 256;

/**
 * What one connection of a job port may do under the --acl rules: run a command, touch a tube
 * (beanstalkd) or use a function (Gearman). Each `may...` answer that is no counts a denial; the
 * door then answers FORBIDDEN or PERMISSION_DENIED and changes nothing. A rule reload
 * (Acl.reload) hands it the new rule.
 */
export class ConnectionAccess {
  /** Tube or function decisions made under the current rule: a client names the same few again and again. */
  private readonly decided = new Map<string, boolean>();
  private closed: (() => void) | null = null;

  constructor(
    private readonly holder: AccessHolder,
    /** null: no entry matches this connection, and there is no `*`: nothing is allowed. */
    private rule: AclRule | null,
    private readonly protocol: Protocol,
    private readonly tubeOfJob: (id: number) => Pending<string | undefined>,
  ) {}

  /** The rule key denials are counted under. */
  get identity(): string {
    return this.rule?.key ?? NO_RULE;
  }

  /** A beanstalkd command by its name (`quit` is always allowed). */
  mayRun(command: string): boolean {
    if (command === 'quit') return true;
    const commands = this.rule === null ? EMPTY : this.rule.commands;
    return commands === null || commands.has(command) || this.deny();
  }

  /** Gearman's text admin commands that change the server: the rule's commands must allow `admin`. */
  mayAdminister(): boolean {
    return this.mayRun(ADMIN_COMMAND);
  }

  /** A tube (beanstalkd) or a function (Gearman) of this connection's port, by name. */
  mayTouch(name: string): boolean {
    return this.permits(name) || this.deny();
  }

  /**
   * A command on job `id`: true when the job's tube may be touched, or when there is no such job
   * (the command then answers NOT_FOUND as it would).
   */
  mayTouchJob(id: number): Pending<boolean> {
    return whenReady(this.tubeOfJob(id), (tube) => tube === undefined || this.mayTouch(tube));
  }

  /** The same decision as `mayTouch`, counting nothing: for filtering a listing, and for a reload. */
  permits(name: string): boolean {
    const cached = this.decided.get(name);
    if (cached !== undefined) return cached;
    const rule = this.rule;
    const matcher = rule === null ? NOTHING : this.protocol === 'beanstalkd' ? rule.tubes : rule.functions;
    const allowed = matcher === null || matcher(name);
    if (this.decided.size >= MAX_CACHED) this.decided.clear();
    this.decided.set(name, allowed);
    return allowed;
  }

  /** Reloaded rules: this connection answers to `rule` from now on. */
  follow(rule: AclRule | null): void {
    this.rule = rule;
    this.decided.clear();
  }

  /** Called once, when the connection ends. */
  onClose(fn: () => void): void {
    this.closed = fn;
  }

  close(): void {
    this.closed?.();
    this.closed = null;
  }

  /** Counts a denial; false, so a check reads `allowed || this.deny()`. */
  private deny(): false {
    this.holder.denied(this.identity, this.protocol);
    return false;
  }
}

const EMPTY: ReadonlySet<string> = new Set();
const NOTHING = (): boolean => false;
