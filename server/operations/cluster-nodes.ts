/**
 * A cluster node's lease record as the cluster store keeps it and the dashboard reads it (times
 * in epoch ms; `gone_at` once the node left or its lease ran out). Here, between the two, so
 * that the dashboard imports no store.
 */
export interface NodeRecord {
  id: number;
  address: string;
  version: string;
  started_at: number;
  heartbeat_at: number;
  lease_until: number;
  connections: number;
  gone_at: number | null;
}

/** The cluster as the dashboard's nodes view reads it: this node, every node's lease, the time. */
export interface ClusterNodes {
  nodeId(): number;
  nodes(): Promise<NodeRecord[]>;
  /** How long a node's lease lasts (ms), to tell a late heartbeat from a missed one. */
  leaseMs: number;
  now(): number;
}
