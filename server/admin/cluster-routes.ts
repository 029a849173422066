/** The dashboard's view of the cluster (cluster mode only): its nodes and their health. */
import type { Router } from 'express';
import type { Access } from './access.js';
import { guardedRouter } from './guarded-router.js';
import { API } from '../../shared/api.js';
import type { ClusterNodeDto } from '../../shared/dto.js';
import type { ClusterNodes, NodeRecord } from '../operations/cluster-nodes.js';

/** What the dashboard needs of a cluster node. */

export function clusterNodeDto(row: NodeRecord, cluster: ClusterNodes, now: number): ClusterNodeDto {
  // Heartbeats come five times per lease: two missed in a row is late.
  const late = now - row.heartbeat_at > (2 * cluster.leaseMs) / 5 + 200;
  return {
    id: row.id,
    address: row.address,
    version: row.version,
    startedAt: row.started_at,
    heartbeatAt: row.heartbeat_at,
    leaseUntil: row.lease_until,
    connections: row.connections,
    goneAt: row.gone_at,
    health: row.gone_at !== null ? 'gone' : late ? 'late' : 'up',
    self: row.id === cluster.nodeId(),
  };
}

export function clusterRoutes(cluster: ClusterNodes, access: Access): Router {
  const r = guardedRouter(access);
  r.get(API.clusterNodes, 'viewer', async (_req, res) => {
    const now = cluster.now();
    res.json((await cluster.nodes()).map((row) => clusterNodeDto(row, cluster, now)));
  });
  return r.router;
}
