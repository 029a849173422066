/**
 * What an audited change was aimed at, read off its request once it is answered. The request
 * has been validated by then, or refused: these read what is there and leave out what is not.
 */
import type { Request } from 'express';
import type { AuditTargetDto } from '../../shared/dto.js';

/** Job ids an entry lists; the count says how many there were in all. */
const MAX_IDS = 100;

function bodyField(req: Request, key: string): unknown {
  const body: unknown = req.body;
  return typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)[key] : undefined;
}

/** The body's fields named in `keys` that it has, as `key=value` words. */
function bodyWords(req: Request, keys: readonly string[]): string | undefined {
  const words = keys.flatMap((k) => {
    const v = bodyField(req, k);
    return v === undefined || (typeof v === 'object' && v !== null) ? [] : [`${k}=${String(v)}`];
  });
  return words.length > 0 ? words.join(' ') : undefined;
}

const param = (req: Request, name: string): string => String(req.params[name] ?? '');
const jobIdParam = (req: Request, name = 'id'): number[] => {
  const id = Number(param(req, name));
  return Number.isSafeInteger(id) && id > 0 ? [id] : [];
};
const defined = (target: AuditTargetDto): AuditTargetDto =>
  Object.fromEntries(Object.entries(target).filter(([, v]) => v !== undefined)) as AuditTargetDto;

/** A change to one job named in the path (`:id`); `keys` of the body say how. */
export const oneJob =
  (keys: readonly string[] = []) =>
  (req: Request): AuditTargetDto => {
    const ids = jobIdParam(req);
    // An edit that moves the job names the tube it goes to.
    const tube = bodyField(req, 'tube');
    return defined({
      jobIds: ids,
      jobCount: ids.length,
      tube: typeof tube === 'string' ? tube : undefined,
      detail: bodyWords(req, keys.filter((k) => k !== 'tube')),
    });
  };

/** A change to the tube named in the path (`:name`); `keys` of the body, and of the query, say how. */
export const oneTube =
  (keys: readonly string[] = []) =>
  (req: Request): AuditTargetDto => {
    const query = keys.flatMap((k) => (typeof req.query[k] === 'string' ? [`${k}=${String(req.query[k])}`] : []));
    const words = [bodyWords(req, keys), ...query].filter((w) => w !== undefined && w !== '');
    return defined({ tube: param(req, 'name'), detail: words.length > 0 ? words.join(' ') : undefined });
  };

/** A change to every tube; `keys` of the body say how. */
export const allTubes =
  (keys: readonly string[]) =>
  (req: Request): AuditTargetDto =>
    defined({ detail: bodyWords(req, keys) });

/** A bulk action: the ids given (the first MAX_IDS, and how many), or the search that selected them. */
export function bulkSelection(req: Request): AuditTargetDto {
  const ids = bodyField(req, 'ids') ?? bodyField(req, 'handles');
  const search = bodyField(req, 'search');
  const list = Array.isArray(ids) ? ids : [];
  const numbers = list.filter((id): id is number => typeof id === 'number');
  const words = [bodyWords(req, ['action', 'to']), list.length > 0 && numbers.length === 0 ? `handles=${list.slice(0, MAX_IDS).map(String).join(',')}` : undefined];
  return defined({
    jobIds: numbers.length > 0 ? numbers.slice(0, MAX_IDS) : undefined,
    jobCount: Array.isArray(ids) ? list.length : undefined,
    search: typeof search === 'object' && search !== null ? searchFields(search as Record<string, unknown>) : undefined,
    detail: words.filter((w) => w !== undefined).join(' ') || undefined,
  });
}

function searchFields(search: Record<string, unknown>): Record<string, string | boolean> {
  const out: Record<string, string | boolean> = {};
  for (const [k, v] of Object.entries(search)) if (typeof v === 'string' || typeof v === 'boolean') out[k] = v;
  return out;
}

/** A change whose target is a path parameter, written as `<label> <value>`. */
export const namedInPath =
  (label: string, name: string, keys: readonly string[] = []) =>
  (req: Request): AuditTargetDto =>
    defined({ detail: [`${label} ${param(req, name)}`, bodyWords(req, keys)].filter((w) => w !== undefined).join(' ') });

/** A change on an attached server: its id, and the tube or job in the path. */
export function externalThing(req: Request): AuditTargetDto {
  const tube = req.params.name === undefined ? undefined : param(req, 'name');
  const jobs = req.params.jid === undefined ? undefined : jobIdParam(req, 'jid');
  const words = [`server ${param(req, 'id')}`, bodyWords(req, ['bound', 'seconds', 'priority', 'delay', 'ttr'])];
  return defined({ tube, jobIds: jobs, jobCount: jobs?.length, detail: words.filter((w) => w !== undefined).join(' ') });
}

/** A change described by its body alone. */
export const bodyOnly =
  (keys: readonly string[]) =>
  (req: Request): AuditTargetDto =>
    defined({ detail: bodyWords(req, keys) });
