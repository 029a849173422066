import { DoorServer } from '../door-server.js';
import { BeanstalkConnection, type ConnectionContext } from './connection.js';

/** The beanstalkd front door: a TCP (or UNIX socket) server whose clients drive the operations. */
export class BeanstalkServer extends DoorServer<BeanstalkConnection> {
  constructor(ctx: ConnectionContext) {
    super(ctx.log, (socket) => new BeanstalkConnection(socket, ctx));
  }
}
