import { DoorServer } from '../door-server.js';
import { GearmanConnection, type GearmanContext } from './connection.js';

/** The Gearman front door: binary packets and text admin lines on one port, onto the same operations. */
export class GearmanServer extends DoorServer<GearmanConnection> {
  constructor(ctx: GearmanContext) {
    super(ctx.log, (socket) => new GearmanConnection(socket, ctx));
  }
}
