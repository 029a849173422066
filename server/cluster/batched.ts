// What a node keeps per tube, and what its batched statements take and give (TurnBatch).

/** Per-node facts about a tube: its clients on this node, and the commands counted here. */
export interface LocalTube {
  using: number;
  watching: number;
  waiting: number;
  deletes: number;
  pauses: number;
}

/** A client's reserve, batched with the others of its turn. `hold`: ms, or -1 for the job's TTR. */
export interface ReserveRequest {
  tubes: string[];
  conn: number;
  hold: number;
  /** False once the request is moot (an offer to a client that stopped waiting): left out. */
  live: () => boolean;
}

/** A reservation just made: what the client needs to hold it (its token) and to answer RESERVED. */
export interface ReservedRow {
  id: number;
  tube: string;
  reserves: number;
  due_at: number;
  ttr_ms: number;
  body: Buffer;
  /** Gearman: a foreground job nobody waits for any more (always false in the beanstalkd realm). */
  abandoned: boolean;
}

/** A client's delete, with the token it holds for the job (-1s when it holds none). */
export interface DeleteRequest {
  id: number;
  node: number;
  conn: number;
  reserves: number;
  client: number;
}

/** A job a client's delete removed. */
export interface DeletedRow {
  id: number;
  tube: string;
  client: number;
  bytes: number;
}

/** The deleteMany statement's first five parameters: ids, then each request's token and client. */
export function deleteArrays(requests: DeleteRequest[]): unknown[] {
  return [
    requests.map((r) => r.id),
    requests.map((r) => r.node),
    requests.map((r) => r.conn),
    requests.map((r) => r.reserves),
    requests.map((r) => r.client),
  ];
}
